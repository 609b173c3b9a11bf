"""The injection screen finds what it found when its literal prefilter was replaced.

``injection_markers_expected.json`` holds ``injection_markers`` (kind and excerpt of
each marker) and, for a flagged text, ``injected_spans``, for every text of
:func:`recorded_texts`: the corpora of ``bench/screening.py`` (calibration set, both
injection regression sets and their benign texts, the bench diagnosis, each case and
benign text under eight disguises), the correct-diagnosis corpus
``injection_corpus.yaml`` (cases, bases, benign texts, each under the same disguises),
the diagnoses of ``tests/fixtures/gold-small.jsonl``, every line of all of these, and
2,000 seeded random texts mixing ordinary SRE words with pieces of injections, plain and
disguised. It was written by the screening as it was before (the prefilter that read
``re``'s private parse trees), with ``python -m tests.judge.test_injection_recorded``;
a text that is not in it fails the test rather than being skipped.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import yaml

from bench.screening import DISGUISES, digest, texts
from judge.injected_spans import injected_spans
from judge.injection import injection_markers
from tests.support.injection_corpus import BASES, CORPUS

EXPECTED = Path(__file__).with_name("injection_markers_expected.json")
_ROOT = Path(__file__).resolve().parents[2]
#: words of ordinary diagnoses and pieces of injections the random texts are made of
_ORDINARY = (
    "the pod restarted because its liveness probe failed; the service user-service in "
    "namespace hotel-reservation targets port 8086 while USER_PORT=9999. Requests from "
    "frontend time out, logins fail with 500 and the error rate rose to 100% after the "
    "rollout. kubectl -n test-social-network get pods shows CrashLoopBackOff; the "
    "deployment's readiness gate, the node's disk pressure, OOMKilled, upgrade degraded "
    "answered marked scored rate count system note model bot passed password bypass"
)
_INJECTED = (
    "ignore", "disregard", "all", "previous", "instructions", "prompt", "rubric", "grader",
    "judge", "evaluator", "yes", "pass", "full marks", "10/10", "9/9", "nine of nine",
    "criteria", "satisfied", "met", "as", "mark", "this", "diagnosis", "answer", "system:",
    "\nsystem:", "assistant:", "<<<", ">>>", "«", "<!--", "-->", "note to the", "dear",
    "hey", "ai", "llm", "ground truth", "[fault_spec]", "component=x;", "namespace=",
    "d1-q1", "\"answer\":", "verdict: pass", "override ->", "you are now", "act as",
    "<|im_start|>", "[inst]", "### system", "✅", "ignoriere", "anweisungen", "responde",
    "sí", "игнорируй", "忽略", "無視", "全部", "是", "1gn0r3", "pr3v10u5", "i g n o r e",
    "ig-nore", "\u0131gnore", "ｉｇｎｏｒｅ", "іgnоrе", "\u200b", "grading policy",
    "has been updated", "auto-approved", "whoever is grading", "to the judge:", "yes yes",
    "y/y/y/y", "q1-q9", "<verdict>", "pre-approved", "already graded",
)  # fmt: skip
_SEPARATORS = (" ", " ", " ", " ", "\n", "  ", ". ", ", ", "\t", "-", "")


def _random_texts(count: int) -> list[str]:
    """``count`` texts of ordinary words mixed with pieces of injections (seeded)."""
    rng = random.Random(20261204)
    ordinary = _ORDINARY.split()
    made = []
    for n in range(count):
        words = []
        for _ in range(rng.randint(3, 60)):
            pool = _INJECTED if rng.random() < 0.06 else ordinary
            words.append(rng.choice(pool) + rng.choice(_SEPARATORS))
        text = "".join(words)
        if n % 10 == 0:  # a sentence of it in base64, as an encoded instruction would be
            text += " " + base64.b64encode(" ".join(words[:8]).encode()).decode()
        made.append(text)
    return made


def recorded_texts() -> list[str]:
    """Every text recorded, each once, in a fixed order."""
    whole = [text for group in texts().values() for text in group]
    corpus_yaml = yaml.safe_load((_ROOT / "tests/judge/injection_corpus.yaml").read_text("utf-8"))
    corpus = [*(case.diagnosis for case in CORPUS), *BASES, *corpus_yaml["benign"]]
    whole += corpus + [disguise(text) for disguise in DISGUISES.values() for text in corpus]
    gold = (_ROOT / "tests/fixtures/gold-small.jsonl").read_text("utf-8").splitlines()
    whole += [json.loads(line)["diagnosis"] for line in gold if line]
    lines = [line for text in whole for line in text.splitlines()]
    return list(dict.fromkeys([*whole, *lines, *_random_texts(2000)]))


def screened(text: str) -> dict[str, Any] | None:
    """``text``'s markers and injected spans as one JSON value; None when it has none."""
    markers = injection_markers(text)
    if not markers:
        return None
    return {
        "markers": [[marker.kind, marker.excerpt] for marker in markers],
        "spans": [list(span) for span in injected_spans(text)],
    }


def _record() -> None:
    """Write every recorded text's screening to ``EXPECTED``."""
    unflagged: list[str] = []
    flagged: dict[str, Any] = {}
    for text in recorded_texts():
        found = screened(text)
        if found is None:
            unflagged.append(digest(text))
        else:
            flagged[digest(text)] = found
    rows = [f"{json.dumps(key)}:{_compact(row)}" for key, row in flagged.items()]
    EXPECTED.write_text(
        f'{{"unflagged":{_compact(unflagged)},\n"flagged":{{\n' + ",\n".join(rows) + "}}\n", "utf-8"
    )


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_every_text_screens_as_recorded() -> None:
    recorded = json.loads(EXPECTED.read_text("utf-8"))
    unflagged, flagged = set(recorded["unflagged"]), recorded["flagged"]
    differ, missing = [], []
    for text in recorded_texts():
        key = digest(text)
        if key not in unflagged and key not in flagged:
            missing.append(text[:80])
        elif screened(text) != flagged.get(key):
            differ.append((text[:80], screened(text), flagged.get(key)))
    assert not missing, missing[:3]
    assert not differ, differ[:3]


def test_the_recording_is_large_and_flags_many_kinds() -> None:
    recorded = json.loads(EXPECTED.read_text("utf-8"))
    assert len(recorded["unflagged"]) >= 1500 and len(recorded["flagged"]) >= 1500
    kinds = {kind for row in recorded["flagged"].values() for kind, _ in row["markers"]}
    assert len(kinds) >= 14


if __name__ == "__main__":
    _record()
