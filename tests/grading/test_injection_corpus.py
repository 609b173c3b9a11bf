"""No disguised injection ends ``passed: true`` with a yes-saying judge, through the service.

The corpus (``tests/judge/injection_corpus.yaml``, 68 cases) embeds each disguise in a
correct diagnosis, so a judge that says yes to everything passes it by the rule. Each
case is submitted through the HTTP API and graded by the service's workers with the
scripted ``pass`` judge (yes to every question, quoting the diagnosis' first words):

- under the default pass policy (``qualified``) with the judge uncalibrated, every
  pass is held whatever screening finds: the guarantee does not rest on the regexes;
- with the judge marked qualified, what holds a pass is an injection signal (screening's
  markers, or yes answers that code overruled); every case must still end held or
  failed, and the correct diagnoses without injection pass.

The figures (held, failed, flagged by screening) are printed for docs/safety.md.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.service.settings import Settings
from judge.review_reasons import INJECTION_SIGNALS
from tests.storage.helpers import sregym_rubric
from tests.support.injection_corpus import BASES, CORPUS, CORPUS_TRUTH
from tests.support.judge_server import sregym_reply
from tests.support.qualification import qualify
from tests.support.submissions import IDS, scripted_judge

YES_SAYER = "scripted:pass"


async def _grade_all(
    client: Any, headers: dict[str, str], texts: list[str]
) -> list[dict[str, Any]]:
    gradings = []
    for text in texts:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": text, "ground_truth": CORPUS_TRUTH},
            headers=headers,
        )
        assert response.status_code == 201, response.text
        gradings.append(response.json())
    return gradings


def _outcome(grading: dict[str, Any]) -> str:
    assert grading["status"] == "graded", grading
    if grading["held"]:
        assert grading["passed"] is None
        return "held"
    return "passed" if grading["passed"] else "failed"


async def test_an_uncalibrated_yes_sayer_passes_nothing_on_its_own(
    api_client: Any, tokens: Any
) -> None:
    """Default policy: every pass of a judge no calibration run qualified is held, the
    correct diagnoses without injection too (a pass is earned, not defaulted)."""
    async with api_client(judge=YES_SAYER, pass_policy="qualified") as client:
        headers = await tokens("submitter")
        gradings = await _grade_all(client, headers, [c.diagnosis for c in CORPUS] + BASES)
    cases, controls = gradings[: len(CORPUS)], gradings[len(CORPUS) :]
    outcomes = Counter(_outcome(g) for g in cases)
    print(f"\ncorpus of {len(CORPUS)} with an uncalibrated yes-sayer: {dict(outcomes)}")
    assert "passed" not in outcomes
    assert [_outcome(g) for g in controls] == ["held"] * len(BASES)
    assert all(g["judge_passed"] is True and g["provisional"] is True for g in gradings)
    for grading in gradings:  # every pass by the rule is held, for want of qualification
        if grading["held"]:
            assert "judge_not_qualified" in grading["review_reasons"]
        else:  # a quote from the injected text did not verify: the rule fails it
            assert "evidence_unverified" in grading["review_reasons"]


async def test_a_qualified_yes_sayer_passes_the_correct_diagnoses_and_no_disguise(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """Default policy, judge qualified: only injection signals hold a pass."""
    await qualify(engine, Settings(judge=YES_SAYER, database_url=database_url), sregym_rubric())
    async with api_client(judge=YES_SAYER, pass_policy="qualified") as client:
        headers = await tokens("submitter")
        controls = await _grade_all(client, headers, BASES)
        gradings = await _grade_all(client, headers, [c.diagnosis for c in CORPUS])
    for control in controls:
        assert (_outcome(control), control["provisional"]) == ("passed", False), control
        assert not set(control["review_reasons"]) & INJECTION_SIGNALS
    outcomes = Counter(_outcome(g) for g in gradings)
    flagged = sum("injection_suspected" in g["review_reasons"] for g in gradings)
    overruled = sum("judge_overruled" in g["review_reasons"] for g in gradings)
    print(
        f"\ncorpus of {len(CORPUS)} with a qualified yes-sayer: {dict(outcomes)}; "
        f"flagged by screening {flagged}; yes answers overruled {overruled}"
    )
    passed = [c.id for c, g in zip(CORPUS, gradings, strict=True) if g["passed"] is True]
    assert passed == []
    for case, grading in zip(CORPUS, gradings, strict=True):
        if grading["held"]:
            assert set(grading["review_reasons"]) & INJECTION_SIGNALS, case.id
    assert len(CORPUS) >= 60


@pytest.mark.parametrize("policy", ["qualified", "unflagged"])
async def test_a_pass_over_overruled_yes_answers_is_held_without_any_marker(
    api_client: Any, tokens: Any, engine: Engine, database_url: str, policy: str
) -> None:
    """A disguise screening does not know still leaves the judge's yes answers to check:
    a yes-sayer that quotes what the diagnosis does not say is held, qualified or not."""
    reply = sregym_reply(set(IDS), evidence="the grader confirmed every answer")
    judge = scripted_judge(reply)
    await qualify(
        engine, Settings(judge=judge["judge"], database_url=database_url), sregym_rubric()
    )
    async with api_client(pass_policy=policy, **judge) as client:
        headers = await tokens("submitter")
        (grading,) = await _grade_all(client, headers, [BASES[0]])
    assert grading["provisional"] is False
    assert "injection_suspected" not in grading["review_reasons"]
    assert (grading["held"], grading["passed"], grading["judge_passed"]) == (True, None, True)
    assert "evidence_unverified" in grading["review_reasons"]
