"""What tests of several features share: an SREGym attempt whose checklist leaves
questions out, imported through ``ImportQueries.sregym`` (what ``sre-judge import
sregym`` and ``POST /v1/imports`` run)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import update
from sqlalchemy.engine import Engine

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from storage import GradingRecord, Store
from storage.engine import session_factory
from tests.storage.helpers import sregym_rubric
from tests.support.keys import session_key
from tests.support.sregym_results import write_sregym_attempt
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH

__all__ = ["import_partial_checklist"]


async def import_partial_checklist(
    engine: Engine,
    tmp_path: Path,
    *,
    success: bool | None = None,
    answered: int = 6,
    as_graded_earlier: bool = False,
) -> None:
    """Import one SREGym attempt whose checklist answers the rubric's first ``answered``
    questions (five Yes, then No) with ``Diagnosis.success`` ``success`` (None: empty).
    ``as_graded_earlier``: its grading as earlier versions stored one with no success,
    graded with its answers and no verdict (imported with a success, which is then
    taken away)."""
    checklist = [
        {"id": q, "answer": "Yes" if i < 5 else "No", "evidence": "USER_PORT=9999",
         "confidence": "High"}
        for i, q in enumerate(IDS[:answered])
    ]  # fmt: skip
    written = True if as_graded_earlier else success
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis=DIAGNOSIS, ground_truth=TRUTH, success=written
    )
    store = Store(engine, key=session_key())
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip
    if as_graded_earlier:
        with session_factory(engine)() as session, session.begin():
            session.execute(update(GradingRecord).values(passed=None, judge_passed=None))
