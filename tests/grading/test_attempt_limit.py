"""A submitter token's attempts on one registered scenario are limited per hour
(``SRE_JUDGE_SUBMITTER_ATTEMPTS_PER_SCENARIO_PER_HOUR``): past the limit, 429 with
``Retry-After`` as problem+json and nothing stored; replays, inline ground truths, other
scenarios and adjudicators are not limited; admins read the counts."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from api.cli.main import main
from api.service.attempts import TooManyAttempts
from storage.tables import SubmissionRecord

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
_SUBMISSIONS = SubmissionRecord.__table__  # type: ignore[attr-defined]
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT={port}; the frontend fails."


def _body(port: int, **where: str) -> dict[str, Any]:
    return {"diagnosis": DIAGNOSIS.format(port=port), **(where or {"scenario_id": "s1"})}


async def test_past_the_limit_a_submitter_gets_429_and_nothing_is_stored(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "prober")
    other = await tokens("submitter", "other")
    async with api_client(submitter_attempts_per_scenario_per_hour=3) as client:
        for scenario in ("s1", "s2"):
            made = await client.post(
                "/v1/scenarios", json={"id": scenario, "ground_truth": TRUTH}, headers=admin
            )
            assert made.status_code == 201
        for port in (1, 2, 3):
            sent = {**agent, "Idempotency-Key": f"k{port}"}
            assert (await client.post("/v1/submissions", json=_body(port), headers=sent)).is_success
        refused = await client.post(
            "/v1/submissions", json=_body(4), headers={**agent, "Idempotency-Key": "k4"}
        )
        # a replay of a stored attempt is no new attempt
        replay = await client.post(
            "/v1/submissions", json=_body(1), headers={**agent, "Idempotency-Key": "k1"}
        )
        not_limited = [
            await client.post("/v1/submissions", json=_body(5, scenario_id="s2"), headers=agent),
            await client.post("/v1/submissions", json=_body(6, ground_truth=TRUTH), headers=agent),
            await client.post("/v1/submissions", json=_body(7), headers=other),
            await client.post("/v1/submissions", json=_body(8), headers=admin),
        ]
        mine = (await client.get("/v1/gradings", headers=agent)).json()["items"]
        report = await client.get("/v1/stats/attempts", headers=admin)
        as_agent = await client.get("/v1/stats/attempts", headers=agent)
        metrics = (await client.get("/metrics")).text
        # an hour later the first attempts have left the window
        with engine.begin() as connection:
            rows = (connection.execute(select(_SUBMISSIONS.c.id, _SUBMISSIONS.c.created_at))).all()
            for row_id, created in rows:
                moved = created - timedelta(hours=1, seconds=1)
                connection.execute(
                    update(_SUBMISSIONS).where(_SUBMISSIONS.c.id == row_id).values(created_at=moved)
                )
        later = await client.post("/v1/submissions", json=_body(9), headers=agent)

    assert refused.status_code == 429, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert 3500 <= int(refused.headers["Retry-After"]) <= 3600
    problem = refused.json()
    assert problem["title"] == "Too many attempts" and problem["status"] == 429
    assert problem["errors"][0]["field"] == "scenario_id"
    assert TRUTH not in refused.text
    assert replay.status_code in (200, 201, 202) and replay.headers["Idempotent-Replayed"]
    assert [r.status_code for r in not_limited] == [202] * 4
    assert len(mine) == 5  # three attempts on s1, one on s2, one inline: the refused one is not
    assert 'sre_judge_submissions_rejected_total{reason="attempt_limit"} 1.0' in metrics
    assert later.status_code == 202, later.text

    assert as_agent.status_code == 403
    assert report.status_code == 200, report.text
    counts = {(i["token_name"], i["scenario_id"]): i["attempts"] for i in report.json()["items"]}
    # inline ground truths are no attempts on a scenario; the admin's are counted too
    assert counts == {("prober", "s1"): 3, ("prober", "s2"): 1, ("other", "s1"): 1,
                      ("admin-1", "s1"): 1}  # fmt: skip
    assert report.json()["limit_per_hour"] == 3


async def test_submissions_sent_at_once_never_pass_the_limit_together(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count and the new submission are one transaction (the token's attempts on the
    scenario locked on PostgreSQL): attempts racing each other are counted as if sent one
    by one, however long each takes between its arrival and its store (a slow screening,
    here)."""
    from api.grading import intake
    from api.service.principal import Principal
    from api.service.schemas import SubmissionCreate

    screen = intake.screen_submission

    def slow_screen(diagnosis: str, trace: Any) -> Any:
        time.sleep(0.1)  # the others arrive meanwhile
        return screen(diagnosis, trace)

    monkeypatch.setattr(intake, "screen_submission", slow_screen)
    admin = await tokens("admin")
    async with api_client(start_workers=False, submitter_attempts_per_scenario_per_hour=3) as c:
        made = await c.post(
            "/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201
        services = c.app.state.services
        racer = Principal(id="racer", name="racer", role="submitter")
        sent = await asyncio.gather(
            *(
                intake.accept_submission(
                    services, SubmissionCreate.model_validate(_body(port)), principal=racer
                )
                for port in range(12)
            ),
            return_exceptions=True,
        )
    refused = [r for r in sent if isinstance(r, TooManyAttempts)]
    assert (len(refused), len(sent) - len(refused)) == (9, 3), sent
    with engine.connect() as connection:
        stored = connection.execute(select(_SUBMISSIONS.c.id)).all()
    assert len(stored) == 3


async def test_the_limit_is_on_by_default_and_zero_turns_it_off(
    api_client: Any, tokens: Any
) -> None:
    from api.service.settings import Settings

    assert Settings().submitter_attempts_per_scenario_per_hour == 20
    admin, agent = await tokens("admin"), await tokens("submitter")
    async with api_client(submitter_attempts_per_scenario_per_hour=0) as client:
        await client.post("/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=admin)
        codes = [
            (await client.post("/v1/submissions", json=_body(n), headers=agent)).status_code
            for n in range(21)
        ]
    assert set(codes) == {202}


async def test_the_command_line_reports_the_attempts_the_route_reports(
    api_client: Any, tokens: Any, database_url: str
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "prober")
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201
        for port in (1, 2):
            assert (
                await client.post("/v1/submissions", json=_body(port), headers=agent)
            ).is_success
        route = (await client.get("/v1/stats/attempts", headers=admin)).json()

    env = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE": "scripted:pass"}
    runner = CliRunner(env=env)
    as_json = await asyncio.to_thread(
        runner.invoke, main, ["report", "attempts", "--format", "json"]
    )
    as_csv = await asyncio.to_thread(
        runner.invoke, main, ["report", "attempts", "--scenario", "s1", "--format", "csv"]
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["items"] == route["items"]
    assert as_csv.exit_code == 0, as_csv.output
    header, row, *rest = as_csv.stdout.splitlines()
    assert header == "token,role,scenario,attempts,first_at,last_at" and rest == []
    token, role, scenario, attempts, first_at, last_at = row.split(",")
    assert (token, role, scenario, attempts) == ("prober", "submitter", "s1", "2")
    stated = route["items"][0]
    assert datetime.fromisoformat(first_at) == datetime.fromisoformat(stated["first_at"])
    assert datetime.fromisoformat(last_at) == datetime.fromisoformat(stated["last_at"])


async def test_retry_after_waits_until_one_more_attempt_fits_under_a_lowered_limit(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A token holding more attempts in the hour than a limit lowered since (5, then 2:
    three made 50 minutes ago, two just now) is told to wait until enough of them left
    the window for one more to fit, not until the first leaves: a client that waits its
    ``Retry-After`` is let in, not refused again."""
    admin, agent = await tokens("admin"), await tokens("submitter", "prober")
    async with api_client(start_workers=False, submitter_attempts_per_scenario_per_hour=5) as c:
        made = await c.post(
            "/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        for port in range(5):
            taken = await c.post("/v1/submissions", json=_body(port), headers=agent)
            assert taken.status_code == 202, taken.text

    def move_back(minutes: float, first: int | None = None) -> None:
        with engine.begin() as connection:
            rows = connection.execute(
                select(_SUBMISSIONS.c.id, _SUBMISSIONS.c.created_at).order_by(
                    _SUBMISSIONS.c.created_at
                )
            ).all()
            for row_id, created in rows[:first]:
                connection.execute(
                    update(_SUBMISSIONS)
                    .where(_SUBMISSIONS.c.id == row_id)
                    .values(created_at=created - timedelta(minutes=minutes))
                )

    move_back(50, first=3)
    async with api_client(start_workers=False, submitter_attempts_per_scenario_per_hour=2) as c:
        refused = await c.post("/v1/submissions", json=_body(9), headers=agent)
        assert refused.status_code == 429, refused.text
        wait = int(refused.headers["Retry-After"])
        assert 3500 <= wait <= 3600, wait  # the fourth oldest leaves in about an hour
        move_back(wait / 60 - 1)  # a minute short of it: still refused
        early = await c.post("/v1/submissions", json=_body(10), headers=agent)
        move_back(1 + 1 / 60)  # waited as told
        retried = await c.post("/v1/submissions", json=_body(11), headers=agent)
    assert early.status_code == 429, early.text
    assert retried.status_code == 202, (wait, retried.text)
