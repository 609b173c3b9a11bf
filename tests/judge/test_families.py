"""Model families from model names."""

from __future__ import annotations

import pytest

from judge.families import model_family, same_family, shared_family


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("qwen3:8b", "qwen"),
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen"),
        ("llama3.1:8b", "llama"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama"),
        ("mixtral-8x7b", "mistral"),
        ("mistral-nemo", "mistral"),
        ("gemma2:9b", "gemma"),
        ("phi-4", "phi"),
        ("gpt-4o-mini", "gpt"),
        ("o3-mini", "gpt"),
        ("claude-3-5-sonnet", "claude"),
        ("gemini-1.5-pro", "gemini"),
        ("deepseek-r1:7b", "deepseek"),
        ("SmolLM2-135M-Instruct", "smollm"),
        ("phind-codellama", "llama"),
        ("my-agent-model", None),
        ("", None),
        (None, None),
    ],
)
def test_family_of_model_names(name: str | None, family: str | None) -> None:
    assert model_family(name) == family


def test_same_family_needs_both_known() -> None:
    assert same_family("qwen3:8b", "Qwen2.5-72B-Instruct") == "qwen"
    assert same_family("qwen3:8b", "llama3.1") is None
    assert same_family("custom", "custom") is None


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude"),
        ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", "claude"),
        ("us.meta.llama3-2-90b-instruct-v1:0", "llama"),
        ("meta.llama3-70b-instruct-v1:0", "llama"),
        ("openai.gpt-oss-120b-1:0", "gpt"),
        ("google.gemma-3-27b-it", "gemma"),
        ("qwen.qwen3-32b-v1:0", "qwen"),
        ("amazon.nova-pro-v1:0", None),
    ],
)
def test_provider_dotted_model_ids_have_their_family(name: str, family: str | None) -> None:
    """Bedrock-style ids, the provider joined to the model by a dot (as Bedrock and the
    proxies in front of it spell them), have the family of the model after the dot."""
    assert model_family(name) == family


def test_a_judge_behind_a_proxy_shares_the_family_of_a_bedrock_agent() -> None:
    """A Claude judge reached through a proxy and a Claude agent named by its Bedrock id
    share the family ``claude``, so the self-preference guard sees them."""
    judge = "openai:bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0@http://litellm:4000/v1"
    assert shared_family(judge, "anthropic.claude-3-haiku-20240307-v1:0") == "claude"
