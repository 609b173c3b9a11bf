"""Model families from model names."""

from __future__ import annotations

import pytest

from judge.families import model_family, same_family


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
