"""Attempts on registered scenarios, written straight through Core INSERTs: many
(token, scenario) pairs in well under a second."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from storage.canonical import utcnow
from storage.tables import ScenarioRecord, SubmissionRecord, new_id, row_values

__all__ = ["add_attempts", "attempt_row", "seed_attempts"]


def attempt_row(token_id: str, scenario_id: str, created_at: datetime) -> dict[str, Any]:
    """The row of a submission of ``token_id`` against the registered ``scenario_id``."""
    submission = SubmissionRecord(
        id=new_id(), diagnosis="d", ground_truth="truth", ground_truth_source="scenario",
        ground_truth_sha256="0" * 64, scenario_id=scenario_id, scenario_version=1,
        agent=token_id, submitted_by=token_id, request_hash="0" * 64, created_at=created_at,
    )  # fmt: skip
    return row_values(submission)


def add_attempts(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Insert :func:`attempt_row` rows in one transaction."""
    with engine.begin() as connection:
        connection.execute(insert(SubmissionRecord.__table__), rows)  # type: ignore[attr-defined]


def seed_attempts(
    engine: Engine,
    *,
    tokens: int,
    scenarios: int,
    attempts: Callable[[int, int], int] = lambda token, scenario: 1,
    created_at: datetime | None = None,
) -> dict[tuple[str, str], int]:
    """Scenarios ``p000``... and, from the tokens ``token-0``... (unstored), ``attempts(t,
    s)`` submissions of token ``t`` on scenario ``s``, made at ``created_at`` (default
    now). The attempts of each (token id, scenario id) pair."""
    moment = created_at or utcnow()
    made = {
        (f"token-{t}", f"p{s:03d}"): attempts(t, s) for t in range(tokens) for s in range(scenarios)
    }
    scenario_rows = [
        row_values(ScenarioRecord(id=f"p{s:03d}", ground_truth="truth", created_by="seed"))
        for s in range(scenarios)
    ]
    with engine.begin() as connection:
        connection.execute(insert(ScenarioRecord.__table__), scenario_rows)  # type: ignore[attr-defined]
    add_attempts(
        engine,
        [
            attempt_row(token_id, scenario_id, moment)
            for (token_id, scenario_id), count in made.items()
            for _ in range(count)
        ],
    )
    return made
