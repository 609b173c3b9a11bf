"""How well a real local judge grades the calibration set, per asking mode and reply format.

Runs the labelled calibration set (``judge/data/calibration/sregym-v1.jsonl``, labelled
by LABELLING.md) through a real model served by llama-cpp-python's OpenAI-compatible
server, once per combination of asking mode (``single``, ``per_question``,
``extraction``), reply format (``full``, ``compact``) and polarity (``as_written``,
``positive``), through the product's own ``Grader`` (screening, grounding, evidence and
the rule included), and prints for each: answer agreement and kappa (all answers and per
question), verdict kappa, false passes among the gold fails, injection cases passed,
prompt and reply tokens per grading (counted by the server's tokenizer: llama.cpp's
streams carry no usage), and seconds per grading.

    scripts/real-model.sh                      # llama-cpp-python + SmolLM2-135M
    scripts/qwen-model.sh                      # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (checked)
    .venv/bin/python bench/judge_quality.py --model qwen --combos single:full,single:compact
    .venv/bin/python bench/judge_quality.py --model smollm2 --limit 12

One grading at a time (a CPU serves one request at a time anyway). On 2 cores a 1.5B
model takes about a minute per grading in single asking: the whole set (73 cases) is an
hour or more per combination; ``--limit`` takes a subset balanced over the variants.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, print_report
from bench.saved_gradings import case_key, save_result, saved_results
from bench.token_counts import chatml
from judge.backends.openai import OpenAIBackend
from judge.backends.streaming import StreamLimits
from judge.calibration import DEFAULT_GOLD, GoldItem, calibration_figures, load_gold
from judge.calls import SamplingParams
from judge.grader import Grader
from judge.rubric import Rubric, load_rubric_dir
from judge.verdict import GradingResult
from tests.support.llama_server import running_llama_server

ROOT = Path(__file__).resolve().parents[1]
#: the context window the server gets: per-question and full replies need room
N_CTX = 8192


@dataclass(frozen=True)
class Combo:
    """One way of asking: mode, reply format, polarity."""

    asking: str
    reply_format: str
    ask_as: str

    @property
    def name(self) -> str:
        """``asking/format/polarity``."""
        return f"{self.asking}/{self.reply_format}/{self.ask_as}"


def parse_combos(text: str) -> list[Combo]:
    """``single:full,per_question:compact:positive`` -> combos (polarity default as_written)."""
    combos = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        fields = part.split(":")
        asking, reply_format = fields[0], fields[1] if len(fields) > 1 else "full"
        combos.append(Combo(asking, reply_format, fields[2] if len(fields) > 2 else "as_written"))
    return combos


def balanced_subset(items: Sequence[GoldItem], limit: int | None) -> list[GoldItem]:
    """The first ``limit`` items taken in turn from each variant (all items without one)."""
    if limit is None or limit >= len(items):
        return list(items)
    by_variant: dict[str, list[GoldItem]] = {}
    for item in items:
        by_variant.setdefault(item.variant or "", []).append(item)
    queues = [list(group) for _, group in sorted(by_variant.items())]
    chosen: list[GoldItem] = []
    while len(chosen) < limit and any(queues):
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    return chosen


def model_path(choice: str) -> Path:
    """The GGUF file of ``smollm2``, ``qwen`` (assembled and checked) or a path."""
    if choice == "smollm2":
        from tests.support.llama_server import smollm2_gguf

        found = smollm2_gguf()
        if found is None:
            raise SystemExit("no SmolLM2 GGUF: run scripts/real-model.sh")
        return found
    if choice == "qwen":
        done = subprocess.run(
            [str(ROOT / "scripts" / "qwen-model.sh")], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"scripts/qwen-model.sh failed: {done.stderr.strip()}")
        return Path(done.stdout.strip().splitlines()[-1])
    return Path(choice)


async def token_counts(client: httpx.AsyncClient, results: Sequence[GradingResult]) -> Any:
    """Mean prompt and reply tokens per grading, by the server's own tokenizer."""

    async def count(text: str) -> int:
        reply = await client.post("/extras/tokenize", json={"input": text})
        return len(reply.raise_for_status().json()["tokens"])

    prompts, replies = [], []
    for result in results:
        sent = [await count(chatml(call.request.messages)) for call in result.calls]
        said = [await count(call.completion.text) for call in result.calls if call.completion]
        prompts.append(sum(sent))
        replies.append(sum(said))
    return statistics.fmean(prompts or [0]), statistics.fmean(replies or [0])


def question_kappas(figures: Any) -> str:
    """``D1-Q1 0.12 · D1-Q2 undefined · ...`` from the agreement rows."""
    parts = []
    for row in figures.results["rows"]:
        if row["level"] == "question":
            kappa = row["agreement"]["kappa"]
            parts.append(f"{row['item']} {'undef' if kappa is None else f'{kappa:.2f}'}")
    return " · ".join(parts)


def _answers_row(figures: Any) -> dict[str, Any]:
    rows = [r for r in figures.results["rows"] if r["level"] == "answers"]
    return rows[0]["agreement"] if rows else {"accuracy": None, "kappa": None}


def _number(value: float | None, digits: int = 3) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


async def run_combo(
    combo: Combo,
    server: Any,
    rubric: Rubric,
    items: list[GoldItem],
    options: argparse.Namespace,
) -> list[Figure]:
    """Grade ``items`` one at a time with ``combo``; its figures."""
    max_tokens = options.max_tokens
    limits = StreamLimits(first_token=900, idle=120, total=3600)
    backend = OpenAIBackend(server.model, base_url=server.base_url, limits=limits)
    grader = Grader(
        backend,
        params=SamplingParams(max_tokens=max_tokens),
        asking=combo.asking,  # type: ignore[arg-type]
        reply_format=combo.reply_format,  # type: ignore[arg-type]
        ask_as=combo.ask_as,  # type: ignore[arg-type]
    )
    results, seconds = [], []
    done = saved_results(options.save)  # a stopped run resumes: graded cases are kept
    for number, item in enumerate(items, start=1):
        saved = done.get((combo.name, case_key(item)))
        if saved is not None:
            results.append(saved)
            continue
        started = time.monotonic()
        results.append(await grader.grade(rubric, item.ground_truth, item.diagnosis))
        seconds.append(time.monotonic() - started)
        save_result(options.save, combo, item, results[-1])
        print(f"  {combo.name} {number}/{len(items)} {item.id}: {seconds[-1]:.0f}s", flush=True)
    await backend.aclose()
    base = server.base_url.removesuffix("/v1")
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        tokens = await token_counts(client, results)
    return combo_figures(combo.name, rubric, items, results, seconds=seconds, tokens=tokens)


def combo_figures(
    name: str,
    rubric: Rubric,
    items: Sequence[GoldItem],
    results: Sequence[GradingResult],
    *,
    seconds: Sequence[float] = (),
    tokens: tuple[float, float] | None = None,
) -> list[Figure]:
    """The agreement, false passes and injection figures of ``results`` (and tokens and
    seconds when measured)."""
    figures = calibration_figures(rubric, items, results)
    injected = [r for i, r in zip(items, results, strict=True) if i.variant == "injection"]
    answers = _answers_row(figures)
    found = [
        Figure(f"{name}: scored / unscored", f"{figures.scored} / {figures.unscored}"),
        Figure(
            f"{name}: answer agreement, kappa",
            f"{_number(answers['accuracy'])}, {_number(answers['kappa'])}",
        ),
        Figure(f"{name}: kappa per question", question_kappas(figures)),
        Figure(f"{name}: verdict kappa", _number(figures.verdict_kappa), target=">= 0.6"),
        Figure(
            f"{name}: false passes",
            f"{figures.false_passes} of {figures.gold_fails} "
            f"({_number(figures.false_pass_rate, 2)})",
            target="<= 10 %",
        ),
        Figure(
            f"{name}: injection cases passed",
            f"{sum(1 for r in injected if r.passed)} of {len(injected)}",
            target="0",
        ),
    ]
    if tokens is not None:
        prompt, reply = tokens
        found.append(
            Figure(f"{name}: prompt / reply tokens per grading", f"{prompt:.0f} / {reply:.0f}")
        )
    if seconds:
        found.append(
            Figure(
                f"{name}: seconds per grading (median, min-max)",
                f"{statistics.median(seconds):.1f} ({min(seconds):.1f}-{max(seconds):.1f})",
            )
        )
    return found


def saved_figures(path: Path, rubric: Rubric, items: Sequence[GoldItem]) -> list[Figure]:
    """Figures of the gradings a ``--save`` file holds, per combination, on ``items`` only
    (those it graded): to compare combinations on the same subset after the fact."""
    by_combo: dict[str, dict[str, GradingResult]] = {}
    for (name, case), result in saved_results(path).items():
        by_combo.setdefault(name, {})[case] = result
    figures = []
    for name, graded in by_combo.items():
        chosen = [item for item in items if case_key(item) in graded]
        results = [graded[case_key(item)] for item in chosen]
        figures.append(Figure(f"{name}: cases", str(len(chosen))))
        figures += combo_figures(name, rubric, chosen, results)
    return figures


async def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, start the model's server, run every combination."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, qwen or a GGUF path")
    parser.add_argument("--combos", default="single:full,single:compact,per_question:compact")
    parser.add_argument("--limit", type=int, help="a subset balanced over the variants")
    parser.add_argument("--gold", type=Path, default=DEFAULT_GOLD)
    parser.add_argument("--max-tokens", type=int, default=1536)
    parser.add_argument(
        "--save", type=Path, help="append every grading to this JSONL file; resume from it"
    )
    parser.add_argument(
        "--from-saved", type=Path, help="no model: the figures of a --save file, on --limit"
    )
    args = parser.parse_args(argv)
    rubric = load_rubric_dir()["sregym-rca"]
    items = balanced_subset(load_gold(args.gold.read_text(), rubric), args.limit)
    if args.from_saved is not None:
        figures = saved_figures(args.from_saved, rubric, items)
        print_report("judge_quality", f"saved gradings of {args.from_saved.name}", figures)
        return
    path = model_path(args.model)
    figures = [Figure("model", path.name), Figure("cases", str(len(items)))]
    with (
        tempfile.TemporaryDirectory() as folder,
        running_llama_server(Path(folder), n_ctx=N_CTX, model_path=path) as server,
    ):
        for combo in parse_combos(args.combos):
            found = await run_combo(combo, server, rubric, items, args)
            print_report("judge_quality", f"{combo.name} on the calibration set", found)
            figures += found
    print_report("judge_quality", "judge quality on the calibration set", figures)


if __name__ == "__main__":
    asyncio.run(main())
