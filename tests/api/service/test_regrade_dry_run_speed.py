"""A dry run over 10,000 stored submissions answers in under 2 seconds on SQLite."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bench.dry_run import seed_submissions, time_dry_run

pytestmark = pytest.mark.slow


async def test_a_dry_run_of_10000_submissions_takes_under_two_seconds(
    db_backend: str, engine: Engine
) -> None:
    if db_backend != "sqlite":
        pytest.skip("the figure is promised for the embedded SQLite database")
    await seed_submissions(engine, 10_000, cached_share=0.25)
    elapsed, estimate = await time_dry_run(engine)
    assert estimate["submissions"] == 10_000
    assert (estimate["cache_hits"], estimate["judge_calls"]) == (2_500, 7_500)
    assert estimate["cache_checked"] is True and estimate["prompt_tokens"] > 0
    # the 2 s target is measured by bench/dry_run.py, not asserted here: a loaded
    # machine must not fail the suite; this bound only catches a pathological slowdown
    assert elapsed < 30.0, f"dry run took {elapsed:.2f} s"
