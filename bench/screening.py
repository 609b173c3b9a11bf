"""CPU per screening of a diagnosis (``judge.screening.screen``), per corpus of texts.

    python bench/screening.py [--runs 7] [--seconds 0.3] [--callgrind] [--record FILE]

The corpora (``texts()``): the diagnoses of the calibration set, the injection cases and
the benign texts of ``tests/judge/injection_cases*.yaml``, the diagnosis
``bench/cpu_per_grading.py`` submits (20 variants), and every case and benign text
under each disguise of ``DISGUISES`` (mixed case, zero-width characters, look-alikes,
markers split across lines...). For each, ``screen`` is called on
every text in turn, for about ``--seconds`` of CPU per run; a figure is the median over
``--runs`` runs of CPU microseconds (``time.process_time``) per call, with its min-max.

"warm" is the grader's usual case: the text was redacted by this process before (at
intake), so redaction returns at once and the injection screen is most of the cost.
"cold" forgets the redactions first, as for a text that came by another path.

``--callgrind`` also counts instructions per call under ``valgrind --tool=callgrind``
(instrumentation on for the measured calls only): stable whatever the machine's load.
``--record FILE`` writes every text's screening instead, one JSON row per text: the
results ``tests/judge/test_screening_recorded.py`` holds screening to.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/screening.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from bench.common import Figure, callgrind_instructions, callgrind_switch, print_report
from bench.service import DIAGNOSIS
from judge import secrets
from judge.screening import screen

__all__ = ["DISGUISES", "digest", "screened", "texts"]

_ROOT = Path(__file__).resolve().parents[1]
_CALIBRATION = _ROOT / "judge" / "data" / "calibration" / "sregym-v1.jsonl"
_CASES = _ROOT / "tests" / "judge" / "injection_cases.yaml"
_DISGUISED = _ROOT / "tests" / "judge" / "injection_cases_disguised.yaml"


#: ways to disguise a marker, each applied to every injection case and benign text
DISGUISES: dict[str, Callable[[str], str]] = {
    "mixed case": lambda t: "".join(c.upper() if i % 2 else c for i, c in enumerate(t)),
    "zero-width": lambda t: re.sub(r"(\w\w)", "\\1\u200b", t),
    "look-alikes": lambda t: t.translate(str.maketrans("aeopcAEOPC", "аеорсАЕОРС")),
    "split lines": lambda t: re.sub(r"(\S+ \S+ \S+) ", "\\1\n", t),
    "full-width": lambda t: "".join(
        chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() else c for c in t
    ),
    "spaced letters": lambda t: "  ".join(" ".join(word) for word in t.split()),
    "dotless i": lambda t: t.replace("i", "\u0131"),
    "leetspeak": lambda t: t.translate(str.maketrans("aeios", "43105")),
}


def texts() -> dict[str, list[str]]:
    """The corpora screened, by name: calibration, injections, disguised, benign, bench."""
    rows = [json.loads(line) for line in _CALIBRATION.read_text("utf-8").splitlines() if line]
    first = yaml.safe_load(_CASES.read_text("utf-8"))
    disguised = yaml.safe_load(_DISGUISED.read_text("utf-8"))
    corpora = {
        "calibration": [row["diagnosis"] for row in rows],
        "injection cases": [case["diagnosis"] for case in first["cases"]],
        "disguised cases": [case["diagnosis"] for case in disguised["cases"]],
        "benign": [*first["benign"], *disguised["benign"]],
        "bench diagnosis": [DIAGNOSIS.format(n=n, k=n % 20) for n in range(20)],
    }
    plain = [*corpora["injection cases"], *corpora["disguised cases"], *corpora["benign"]]
    corpora["disguised variants"] = [disguise(t) for disguise in DISGUISES.values() for t in plain]
    return corpora


def digest(text: str) -> str:
    """The key of ``text`` in a file of recorded screenings."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def screened(text: str) -> dict[str, Any]:
    """``screen(text)`` as one JSON row (the text only if screening changed it)."""
    result = screen(text)
    return {
        "text": None if result.text == text else result.text,
        "review_reasons": list(result.review_reasons),
        "notes": list(result.notes),
        "injected": [list(span) for span in result.injected],
    }


def _record(path: Path) -> None:
    """Write every text's screening to ``path``, one JSON row per text."""
    rows = [
        {"corpus": name, "key": digest(text), **screened(text)}
        for name, group in texts().items()
        for text in group
    ]
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _per_call(corpus: list[str], seconds: float, *, cold: bool) -> float:
    """CPU microseconds per ``screen`` over ``corpus``, repeated for about ``seconds``."""
    calls, spent = 0, 0.0
    while spent < seconds:
        started = time.process_time()
        for text in corpus:
            if cold:  # forget that this process redacted it (``secrets.redact``)
                secrets._CLEAN.pop(text, None)
            screen(text)
        spent += time.process_time() - started
        calls += len(corpus)
    return spent / calls * 1e6


def _figures(corpus: dict[str, list[str]], runs: int, seconds: float) -> list[Figure]:
    figures = []
    for name, group in corpus.items():
        for cold in (False, True):
            _per_call(group, 0.02, cold=cold)  # warm-up: compiled patterns, caches
            per = [_per_call(group, seconds, cold=cold) for _ in range(runs)]
            label = f"{name} ({len(group)}), {'cold' if cold else 'warm'}"
            figures.append(Figure(f"{label}, median", round(statistics.median(per), 1), "us"))
            figures.append(Figure(f"{label}, min-max", f"{min(per):.0f}-{max(per):.0f}", "us"))
    return figures


def _inner(name: str, repeat: int) -> None:
    """Under callgrind: screen ``name``'s texts ``repeat`` times, instrumented (warm)."""
    group = texts()[name]
    for text in group:
        screen(text)
    callgrind_switch("-i", "on")
    for _ in range(repeat):
        for text in group:
            screen(text)
    callgrind_switch("-i", "off")


def _instructions(name: str, repeat: int) -> float:
    """Instructions per warm ``screen`` of ``name``'s texts, from one callgrind run."""
    counted = callgrind_instructions(__file__, "--inner", name, "--repeat", str(repeat))
    return counted / (repeat * len(texts()[name]))


def main(argv: list[str] | None = None) -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--record", help="write every text's screening to this file")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.record:
        _record(Path(args.record))
        return
    if args.inner:
        _inner(args.inner, args.repeat)
        return
    corpus = texts()
    figures = _figures(corpus, args.runs, args.seconds)
    if args.callgrind:
        for name in ("calibration", "bench diagnosis", "disguised cases"):
            count = _instructions(name, args.repeat)
            figures.append(Figure(f"{name}, instructions per warm screen", round(count), ""))
    title = "CPU per screen() of a diagnosis (redaction + injection markers + spans)"
    print_report("screening", title, figures, {"runs": args.runs, "seconds": args.seconds})


if __name__ == "__main__":
    main()
