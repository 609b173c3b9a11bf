"""Texts to screen: every corpus of diagnoses the tests hold, their lines, disguises and
seeded random texts (``screening_texts``).

The corpora of ``bench/screening.py`` (calibration set, both injection regression sets
and their benign texts, the bench diagnosis, each case and benign text under eight
disguises), the correct-diagnosis corpus ``tests/judge/injection_corpus.yaml`` (cases,
bases, benign texts, each under the same disguises), the diagnoses of
``tests/fixtures/gold-small.jsonl``, every line of all of these, and 2,000 seeded random
texts mixing ordinary SRE words with pieces of injections, plain and disguised.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import yaml

from bench.screening import DISGUISES, texts
from tests.support.injection_corpus import BASES, CORPUS

__all__ = ["screening_texts"]

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


def screening_texts() -> list[str]:
    """Every text, each once, in a fixed order."""
    whole = [text for group in texts().values() for text in group]
    corpus_yaml = yaml.safe_load((_ROOT / "tests/judge/injection_corpus.yaml").read_text("utf-8"))
    corpus = [*(case.diagnosis for case in CORPUS), *BASES, *corpus_yaml["benign"]]
    whole += corpus + [disguise(text) for disguise in DISGUISES.values() for text in corpus]
    gold = (_ROOT / "tests/fixtures/gold-small.jsonl").read_text("utf-8").splitlines()
    whole += [json.loads(line)["diagnosis"] for line in gold if line]
    lines = [line for text in whole for line in text.splitlines()]
    return list(dict.fromkeys([*whole, *lines, *_random_texts(2000)]))
