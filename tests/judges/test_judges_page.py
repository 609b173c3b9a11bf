"""The judges page: calibration runs per judge identity, each judge qualified or
provisional (the latest run decides); adjudicators only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from api.judges.canary_queries import CanaryQueries
from api.judges.pages import canary_chart
from storage import Store
from storage.quality_tables import CalibrationRunRecord, CanaryRunRecord
from tests.web.conftest import sign_in


async def test_judges_page_says_provisional_until_a_run_qualifies(
    api_client: Any, tokens: Any
) -> None:
    ada = await tokens("adjudicator", "Ada")
    agent = await tokens("submitter")
    async with api_client() as c:
        await sign_in(c, ada)
        page = (await c.get("/judges")).text
        assert 'data-testid="configured"' in page and "status-provisional" in page
        await sign_in(c, agent)
        for path in ("/judges", "/regrades"):
            assert (await c.get(path)).status_code == 403


async def test_judges_page_lists_runs_per_judge_with_the_latest_deciding(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    store = Store(engine, key=service_key)
    common = {"rubric_id": "sregym-rca", "rubric_version": "v1", "gold_name": "gold.jsonl",
              "gold_sha256": "0" * 64, "n": 40}  # fmt: skip
    await store.calibration.add_run(
        CalibrationRunRecord(judge_spec="openai:big", verdict_kappa=0.4, **common)
    )
    await store.calibration.add_run(
        CalibrationRunRecord(judge_spec="openai:big", qualified=True, verdict_kappa=0.8, **common)
    )
    await store.calibration.add_run(
        CalibrationRunRecord(judge_spec="ollama:small", verdict_kappa=0.1, **common)
    )
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        await sign_in(c, ada)
        page = (await c.get("/judges")).text
        big, small = (
            page.split("<code>openai:big</code>")[1],
            page.split("<code>ollama:small</code>")[1],
        )
        assert big.split("</h2>")[0].count("status-qualified") == 1
        assert small.split("</h2>")[0].count("status-provisional") == 1
        assert "0.800" in big and "0.400" in big


def _canary_run(when: datetime, accuracy: float) -> CanaryRunRecord:
    agreement = {
        "n": 10,
        "agreed": int(accuracy * 10),
        "accuracy": accuracy,
        "accuracy_interval": {"low": accuracy - 0.1, "high": min(accuracy + 0.1, 1)},
    }
    return CanaryRunRecord(
        judge_spec="openai:j",
        rubric_version="v",
        set_name="s",
        set_sha256="x",
        figures={"rows": [{"level": "verdict", "agreement": agreement}]},
        created_at=when,
    )


def test_canary_runs_are_drawn_oldest_left_across_a_new_year() -> None:
    """Runs were placed by their "MM-DD HH:MM" text: December after January."""
    older = _canary_run(datetime(2025, 12, 31, 23, 0, tzinfo=UTC), 0.9)
    newer = _canary_run(datetime(2026, 1, 1, 1, 0, tzinfo=UTC), 0.5)
    chart = canary_chart([newer, older])
    points = chart["lines"][0]["points"]
    assert [p["rate"] for p in points] == [0.9, 0.5]  # oldest first
    assert points[0]["x"] < points[1]["x"], points  # run after run, left to right


def test_two_canary_runs_in_one_minute_are_two_points_apart() -> None:
    """Runs sharing their minute shared one position."""
    first = _canary_run(datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC), 0.9)
    second = _canary_run(datetime(2026, 3, 1, 12, 0, 40, tzinfo=UTC), 0.5)
    points = canary_chart([first, second])["lines"][0]["points"]
    assert points[0]["x"] != points[1]["x"], points


async def test_the_canary_schedule_shows_an_interval_under_a_second_as_it_is_set(
    api_client: Any, tokens: Any
) -> None:
    """``SRE_JUDGE_CANARY_INTERVAL`` is seconds as a float: the judges page shows 0.5 s
    as "every 0.5 s", never cut to "every 0 s"."""
    async with api_client(canary_interval=0.5, start_workers=False) as client:
        await sign_in(client, await tokens("adjudicator", "Ada"))
        page = (await client.get("/judges")).text
    assert "regraded every 0.5 s" in page


async def test_a_canary_run_that_found_drift_it_could_not_demote_for_shows_it(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """A run that finds drift in a judge not qualified now demotes nothing: the judges
    page shows it as ``drifted`` with its reasons, not as ``ok``."""
    run = _canary_run(datetime(2026, 3, 1, 12, 0, tzinfo=UTC), 0.5)
    run.n, run.scored, run.reasons = 10, 10, ["6 of 10 answers (60%) differ"]
    await CanaryQueries(Store(engine, key=service_key).db).add_run(run)
    async with api_client() as c:
        await sign_in(c, await tokens("adjudicator", "Ada"))
        page = (await c.get("/judges")).text
    [row] = page.split('data-testid="canary-run">')[1:]
    outcome = row.split("</tr>")[0].rsplit("<td>", 1)[1]
    assert "drifted" in outcome and "6 of 10 answers (60%) differ" in outcome, outcome
