"""A panel's qualification: a panel whose every member a calibration run qualified is
qualified."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend
from tests.storage.helpers import sregym_rubric
from tests.support.qualification import qualify
from tests.support.submissions import graded

FIRST = "scripted:pass"
SECOND = "openai:other-pass@http://127.0.0.1:9/v1"


async def test_a_panel_of_qualified_judges_is_not_provisional_for_ever(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """A panel is qualified when every member is (each calibrated on its own; no run
    is ever of a panel): its clean, unanimous pass of a correct diagnosis stands."""
    rubric = sregym_rubric()
    for member in (FIRST, SECOND):
        await qualify(engine, Settings(judge=member, database_url=database_url), rubric)
    backends = {FIRST: ScriptedBackend.for_mode("pass"), SECOND: ScriptedBackend(model="pass")}
    async with api_client(
        judge=FIRST, panel=f"{FIRST},{SECOND}", backends=backends, pass_policy="qualified"
    ) as client:
        grading = await graded(client, await tokens("submitter"))
    assert grading["judge"]["backend"] == "panel"
    assert grading["status"] == "graded" and grading["judge_passed"] is True
    assert (grading["provisional"], grading["held"], grading["passed"]) == (False, False, True), (
        grading["review_reasons"]
    )
