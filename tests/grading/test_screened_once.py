"""A diagnosis is screened once, at intake: the screening is stored with the submission
and every grading of it (live, by a panel, a regrade) reuses it, with the same outcome
as screening it again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

import judge.grader
import judge.trace
from judge.screening import Screening, screen
from storage import NewSubmission
from storage.tables import GradingRecord, SubmissionRecord
from tests.support.injection_corpus import CORPUS, CORPUS_TRUTH
from tests.support.regrades import shadow_regrade

INJECTED = next(case.diagnosis for case in CORPUS if screen(case.diagnosis).injected)
LEAKED = (
    "The payment service fails: its pod logs show the key AKIAIOSFODNN7EXAMPLE "
    "rejected by the billing API with 403."
)


@pytest.fixture
def screenings(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often intake, a grader and a panel screen a diagnosis."""
    calls: Counter[str] = Counter()

    def counting(where: str) -> Any:
        def counted(text: str, **options: Any) -> Screening:
            calls[where] += 1
            return screen(text, **options)

        return counted

    # intake screens through judge.trace.screen_submission (the trace's credentials too)
    monkeypatch.setattr(judge.trace, "screen", counting("intake"))
    monkeypatch.setattr(judge.grader, "screen", counting("grader"))
    return calls


async def _stored(engine: Engine) -> list[SubmissionRecord]:
    with engine.connect() as connection:
        rows = connection.execute(select(SubmissionRecord.__table__))  # type: ignore[attr-defined]
        return [SubmissionRecord.model_validate(dict(row._mapping)) for row in rows]


async def test_intake_stores_the_screening_and_the_grading_reuses_it(
    api_client: Any, tokens: Any, engine: Engine, screenings: Counter[str]
) -> None:
    headers = await tokens("submitter")
    async with api_client(judge="scripted:pass") as client:
        gradings = []
        for text in (INJECTED, LEAKED):
            response = await client.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": text, "ground_truth": CORPUS_TRUTH},
                headers=headers,
            )
            assert response.status_code == 201, response.text
            gradings.append(response.json())
    assert screenings == Counter({"intake": 2}), "the grader screened the diagnosis again"
    injected, leaked = gradings
    assert "injection_suspected" in injected["review_reasons"]
    assert "credential_leaked" in leaked["review_reasons"]
    stored = {s.id: s for s in await _stored(engine)}
    for text, grading in zip((INJECTED, LEAKED), gradings, strict=True):
        submission = stored[grading["submission_id"]]
        again = screen(text)
        assert submission.diagnosis == again.text
        assert submission.screening == again.record()
        assert submission.redactions == list(again.redactions)
    assert "AKIA" not in stored[leaked["submission_id"]].diagnosis


async def test_a_regrade_reuses_the_stored_screening(
    api_client: Any, tokens: Any, engine: Engine, screenings: Counter[str]
) -> None:
    headers, admin = await tokens("submitter"), await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        first = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": INJECTED, "ground_truth": CORPUS_TRUTH},
            headers=headers,
        )
        job = await shadow_regrade(client, admin, "scripted:fail")
        assert (job["done"], job["failed"]) == (1, 0), job
    with engine.connect() as connection:
        rows = (
            connection.execute(
                select(GradingRecord.judge_spec, GradingRecord.review_reasons).where(
                    GradingRecord.submission_id == first.json()["submission_id"]
                )
            )
        ).all()
    assert sorted(spec for spec, _ in rows) == ["scripted:fail", "scripted:pass"]
    assert all("injection_suspected" in reasons for _, reasons in rows)
    assert screenings == Counter({"intake": 1})


async def test_a_panel_screens_once_for_all_its_members(screenings: Counter[str]) -> None:
    """Without a stored screening (the command line, an import), a panel screens the
    diagnosis once, not once per member and sample."""
    from judge.backends.scripted import ScriptedBackend
    from judge.panel import PanelGrader, PanelMember
    from tests.storage.helpers import sregym_rubric

    members = [
        PanelMember(f"scripted:{mode}", judge.grader.Grader(ScriptedBackend.for_mode(mode)))
        for mode in ("pass", "fail")
    ]
    panel = PanelGrader(members)
    result = await panel.grade(sregym_rubric(), CORPUS_TRUTH, INJECTED)
    assert screenings == Counter({"grader": 1})
    assert "injection_suspected" in result.review_reasons


def test_the_screening_is_not_part_of_the_request() -> None:
    """A request replayed under its idempotency key hashes as before the screening was
    stored (older submissions' hashes stay valid)."""
    base = {"diagnosis": "d", "ground_truth": "t", "ground_truth_source": "inline"}
    plain = NewSubmission(**base)
    screened = NewSubmission(**base, screening=screen("d").record())
    assert plain.request_hash() == screened.request_hash()
