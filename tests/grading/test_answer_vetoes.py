"""Every answer says why code did not take the judge's yes: which check, what it looked
for (``veto``), and why a quote does not back it (``evidence_reason``); stored gradings
say it as a fresh one does, and a submitter never reads it for a hidden ground truth."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine

from judge.calls import JudgeRequest
from storage.tables import AnswerRecord
from tests.support.submissions import IDS, scripted_judge

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
#: gives the fault's value but never names user-service
UNNAMED = "The frontend fails: the USER_PORT variable is 9999 instead of 8086."
QUOTE = "the USER_PORT variable is 9999"


def _yes_to_all(request: JudgeRequest) -> str:
    """A judge that says yes to every question, quoting nothing for D3-Q2."""
    entry = {"reasoning": "it says so", "answer": "yes", "confidence": "high"}
    return json.dumps({qid: {**entry, "evidence": "" if qid == "D3-Q2" else QUOTE} for qid in IDS})


def _by_question(grading: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["question_id"]: a for a in grading["answers"]}


def _check_reasons(grading: dict[str, Any]) -> None:
    answers = _by_question(grading)
    d1q1 = answers["D1-Q1"]
    assert (d1q1["answer"], d1q1["judge_answer"], d1q1["evidence_verified"]) == ("no", "yes", True)
    assert d1q1["veto"] == {
        "check": "grounding.component",
        "effect": "vetoed",
        "reason": "the diagnosis does not name deployment/user-service",
    }
    assert answers["D1-Q2"]["veto"]["check"] == "grounding.origin_consistent"
    empty = answers["D3-Q2"]
    assert empty["answer"] == "yes" and empty["evidence_verified"] is False
    assert empty["evidence_reason"] == "the judge quoted nothing from the diagnosis"
    assert empty["veto"]["check"] == "evidence.empty"
    assert empty["veto"]["effect"] == "flagged"
    assert "evidence_unverified" in grading["review_reasons"]
    untouched = [a for q, a in answers.items() if q not in ("D1-Q1", "D1-Q2", "D3-Q2")]
    assert all(a["veto"] is None and a["evidence_reason"] is None for a in untouched)
    # one quote, one outcome: verified wherever it is cited
    assert {a["evidence_verified"] for a in answers.values() if a["evidence"] == QUOTE} == {True}


async def test_a_vetoed_answer_says_which_check_and_what_it_looked_for(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    adjudicator = await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(*[_yes_to_all] * 2)) as client:
        made = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": UNNAMED, "ground_truth": TRUTH},
            headers=adjudicator,
        )
        assert made.status_code == 201, made.text
        _check_reasons(made.json())
        location = f"/v1/gradings/{made.json()['id']}"
        stored = (await client.get(location, headers=adjudicator)).json()
        _check_reasons(stored)

        # a grading stored before answers carried their veto: read from its detail
        with engine.begin() as connection:
            connection.execute(
                update(AnswerRecord)
                .where(AnswerRecord.grading_id == made.json()["id"])  # type: ignore[arg-type]
                .values(veto=None, evidence_check=None)
            )
        older = _by_question((await client.get(location, headers=adjudicator)).json())
    assert older["D1-Q1"]["veto"] == {
        "check": "grounding.component",
        "effect": "vetoed",
        "reason": "component user-service not named",
    }
    assert older["D3-Q2"]["veto"]["check"] == "evidence.empty"
    assert older["D3-Q2"]["evidence_reason"] == "the judge quoted nothing from the diagnosis"
    assert older["D2-Q1"]["veto"] is None


async def test_a_submitter_never_reads_a_veto_against_a_registered_scenario(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    async with api_client(**scripted_judge(*[_yes_to_all] * 2)) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        sent = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": UNNAMED, "scenario_id": "hotel/user-port"},
            headers=agent,
        )
        assert sent.status_code == 201, sent.text
        seen = (await client.get(f"/v1/gradings/{sent.json()['id']}", headers=agent)).json()
        as_admin = (await client.get(f"/v1/gradings/{sent.json()['id']}", headers=admin)).json()
    # whatever view of the grading a submitter gets, no answer says what a check looked for
    assert all(a.get("veto") is None for a in seen.get("answers", []))
    assert "user-service" not in json.dumps(seen)
    assert _by_question(as_admin)["D1-Q1"]["veto"]["check"] == "grounding.component"
