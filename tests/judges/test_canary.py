"""The drift canary: a labelled canary set regraded on a schedule and on demand.

A judge that answers as the labels say is calibrated (on the shipped set) and qualified;
the canary, run by the service's background loop, leaves it qualified while it answers
the same and demotes it once it starts answering differently: its gradings turn
provisional, ``judge.demoted`` is delivered, ``/metrics`` counts it. No run makes more
judge calls than its budget, whatever the judge answers. The judges page shows the runs.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlmodel import col

from api.judges.calibration import calibrate
from api.judges.canary import CanaryLoop, run_canary
from api.service.qualification import identity_of
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calibration import DEFAULT_GOLD, load_gold
from judge.calls import Completion, JudgeRequest
from judge.errors import JudgeUnavailable
from storage.canonical import utcnow
from storage.quality_tables import CanaryRunRecord
from storage.tables import AuditRecord
from tests.storage.helpers import sregym_rubric
from tests.support.in_process_cli import cli_in_process
from tests.support.submissions import DIAGNOSIS, TRUTH, graded
from tests.support.webhook_receiver import receiving
from tests.web.conftest import sign_in

#: the engine matters here (digests and canary runs are stored): PostgreSQL too under --db all
pytestmark = pytest.mark.postgres

JUDGE = "scripted:pass"
#: gold diagnosis -> the questions its labels answer yes
LABELS = {
    item.diagnosis: {q for q, a in item.answers.items() if a == "yes"}
    for item in load_gold(DEFAULT_GOLD.read_text(), sregym_rubric())
}


class LabelledJudge(ScriptedBackend):
    """Answers as the gold labels say (``drifted``: the opposite), and counts its calls."""

    def __init__(self) -> None:
        super().__init__(model="pass")
        self.drifted = False

    def _next(self, request: JudgeRequest) -> str:
        text = "\n".join(m.content for m in request.messages)
        yes = next((ids for diagnosis, ids in LABELS.items() if diagnosis in text), set())
        if self.drifted:
            yes = {q for q in ("D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3",
                               "D3-Q1", "D3-Q2", "D3-Q3") if q not in yes}  # fmt: skip
        return scripted_reply(request, yes=yes)


async def _runs(client: Any, headers: dict[str, str], count: int) -> list[dict[str, Any]]:
    """The canary runs once there are ``count`` of them (newest first)."""
    for _ in range(600):
        items = (await client.get("/v1/judges/canary", headers=headers)).json()["items"]
        if len(items) >= count:
            return list(items)
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} canary runs in 30 s")


async def _provisional(client: Any, headers: dict[str, str]) -> bool:
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    response = await client.post("/v1/submissions?wait=10", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return bool(response.json()["provisional"])


def _audited(engine: Engine, event: str) -> int:
    """How many audit events of type ``event`` the log holds."""
    with Session(engine) as session:
        query = select(func.count()).where(col(AuditRecord.event) == event)
        return int(session.execute(query).scalar_one())


async def _qualified(settings: Settings, engine: Engine, judge: ScriptedBackend) -> None:
    """Calibrate ``judge`` on the shipped set, as ``sre-judge calibrate`` does."""
    async with Runtime(settings, engine=engine, backends={settings.judge: judge}) as runtime:
        gold = DEFAULT_GOLD.read_bytes()
        outcome = await calibrate(runtime.services, gold, gold_name=DEFAULT_GOLD.name)
    assert outcome.run.qualified, outcome.figures


async def test_a_scheduled_canary_demotes_a_judge_whose_answers_changed(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    judge = LabelledJudge()
    await _qualified(Settings(judge=JUDGE, database_url=database_url), engine, judge)
    settings = {"canary_interval": 0.2, "canary_budget": 12, "webhook_allow_hosts": "127.0.0.1"}
    with receiving() as receiver:
        async with api_client(judge=JUDGE, backends={JUDGE: judge}, **settings) as client:
            agent, admin = await tokens("submitter"), await tokens("admin")
            hook = {"url": receiver.url, "events": ["judge.demoted"]}
            created = await client.post("/v1/webhooks", json=hook, headers=admin)
            receiver.secret = created.json()["secret"]
            assert await _provisional(client, agent) is False
            before = len(await _runs(client, admin, 0))
            stable = await _runs(client, admin, before + 2)
            assert not any(run["demoted"] for run in stable)
            assert all(run["judge_calls"] <= 12 and run["n"] == 12 for run in stable)
            judge.drifted = True  # the judge starts answering differently
            for _ in range(100):
                latest = (await _runs(client, admin, 1))[0]
                if latest["demoted"]:
                    break
                await asyncio.sleep(0.1)
            assert latest["demoted"], latest
            assert latest["judge_calls"] <= 12
            assert any("agreement" in reason for reason in latest["reasons"])
            assert await _provisional(client, agent) is True
            # the drift lasts: later runs find it too, and the judge stays demoted
            later = await _runs(client, admin, len(await _runs(client, admin, 1)) + 2)
            assert all(run["demoted"] for run in later[:2])
            [event] = await asyncio.to_thread(receiver.wait_for, 1)
            assert event["type"] == "judge.demoted"
            assert event["data"]["judge"] == JUDGE and event["data"]["demoted"] is True
            history = await _runs(client, admin, 0)
            first = [run for run in history if run["demoted"]][-1]  # newest first
            assert event["data"]["canary_run_id"] == first["id"]
            # one demotion, one event: a judge demoted already is not demoted again
            assert _audited(engine, "judge.demoted") == 1
            metrics = (await client.get("/metrics")).text
            counted = 'demotions_total{judge="scripted:pass",reason="agreement"} 1.0'
            assert counted in metrics
            assert receiver.delivered() == [event]


async def test_a_stable_judge_stays_qualified_and_the_page_shows_the_history(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    judge = LabelledJudge()
    await _qualified(Settings(judge=JUDGE, database_url=database_url), engine, judge)
    async with api_client(
        judge=JUDGE, backends={JUDGE: judge}, canary_interval=0.2, canary_budget=8
    ) as client:
        agent, admin = await tokens("submitter"), await tokens("admin")
        runs = await _runs(client, admin, 3)
        assert not any(run["demoted"] for run in runs)
        assert runs[0]["changed_share"] == 0.0  # compared with the calibration's: the same
        assert runs[0]["noise"]["successes"] == 0  # calibration measured no noise either
        assert await _provisional(client, agent) is False
        await sign_in(client, await tokens("adjudicator", "Ada"))
        page = (await client.get("/judges")).text
        assert 'data-testid="canary-chart"' in page
        assert page.count('data-testid="canary-run"') >= 3
        assert "status-qualified" in page
        assert 'data-testid="canary-noise">0 of 240 (' in page  # measured at calibration


class SlowJudge(ScriptedBackend):
    """The scripted passing judge, each call taking a while (as a real judge does)."""

    def __init__(self) -> None:
        super().__init__(model="pass")

    async def complete(self, request: JudgeRequest) -> Completion:
        await asyncio.sleep(0.3)
        return await super().complete(request)


def _canary_runs(engine: Engine) -> int:
    with Session(engine) as session:
        return int(session.execute(select(func.count()).select_from(CanaryRunRecord)).scalar_one())


async def test_processes_that_run_workers_together_run_one_canary_per_interval(
    engine: Engine, database_url: str
) -> None:
    """Every process with workers (``serve --processes 2``, extra ``sre-judge worker``
    machines) runs the canary loop; the schedule is one for all of them: one process
    claims the interval's run (audited as ``canary.scheduled``) and the others skip it,
    also while the run is under way, so the budget is spent once an interval.

    The store's clock stands still, so the whole test is one interval by the schedule's
    reckoning (a run slower than a claim's life keeps it: see the next test)."""
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_interval=2.0, canary_budget=4,
        workers=1,
    )  # fmt: skip
    first = Runtime(settings, engine=engine, backends={JUDGE: SlowJudge()}, workers=True)
    second = Runtime(settings, engine=engine, backends={JUDGE: SlowJudge()}, workers=True)
    now = utcnow()
    for runtime in (first, second):
        runtime.store.db.clock = lambda: now
    loop = asyncio.get_running_loop()
    async with first, second:
        deadline = loop.time() + 60
        while _canary_runs(engine) < 1:  # the first interval ends, a run is stored
            assert loop.time() < deadline, "no canary run in 60 s"
            await asyncio.sleep(0.05)
        # each loop wakes again after the run: any other run is the same interval's
        await asyncio.sleep(settings.canary_interval + 0.5)
        runs = _canary_runs(engine)
    assert runs == 1, f"{runs} canary runs in one interval"
    assert _audited(engine, "canary.scheduled") == 1


class GatedJudge(ScriptedBackend):
    """The scripted passing judge whose calls wait until the test opens ``gate`` (a run
    as slow as the test wants), counting the calls it was asked."""

    def __init__(self) -> None:
        super().__init__(model="pass")
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()
        self.calls = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        self.calls += 1
        self.asked.set()
        await self.gate.wait()
        return await super().complete(request)


def _renewed_since(engine: Engine, moment: datetime) -> bool:
    """Whether a claim was renewed (``canary.renewed``) at ``moment`` or later."""
    with Session(engine) as session:
        query = select(func.count()).where(
            col(AuditRecord.event) == "canary.renewed", col(AuditRecord.created_at) >= moment
        )
        return int(session.execute(query).scalar_one()) > 0


async def _renewal_at(engine: Engine, moment: datetime) -> None:
    """Wait (a few milliseconds a beat) until the run's process renewed its claim at
    ``moment`` by the store's clock."""
    for _ in range(1000):
        if await asyncio.to_thread(_renewed_since, engine, moment):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the claim was not renewed at {moment}")


def _two_processes(
    settings: Settings, engine: Engine, *judges: ScriptedBackend
) -> tuple[Runtime, ...]:
    """A process a judge, its canary loop not started (the test turns the schedule)."""
    return tuple(Runtime(settings, engine=engine, backends={JUDGE: judge}) for judge in judges)


async def test_a_scheduled_run_slower_than_its_claim_keeps_it_and_no_second_run_starts(
    engine: Engine, database_url: str
) -> None:
    """A scheduled canary run that takes longer than a claim's life (two intervals) keeps
    its claim: its process renews it while the run goes on (audited as
    ``canary.renewed``), so another process's turn of the schedule starts no second run
    beside it and the budget is spent once.

    The store's clock is driven: it moves an interval at a time (half a claim's life),
    each step waiting for the run's renewal, until four intervals have passed; the run's
    judge answers only then."""
    interval = 60.0
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_interval=interval, canary_budget=4
    )
    slow, other = GatedJudge(), GatedJudge()
    other.gate.set()  # the other process's judge would answer at once
    first, second = _two_processes(settings, engine, slow, other)
    now = [utcnow()]
    for runtime in (first, second):
        runtime.store.db.clock = lambda: now[0]
    async with first, second:
        running = asyncio.create_task(CanaryLoop(first.services, renew_every=0.01).tick())
        await asyncio.wait_for(slow.asked.wait(), 30)
        for _ in range(4):
            now[0] += timedelta(seconds=interval)
            await _renewal_at(engine, now[0])
            await CanaryLoop(second.services, renew_every=0.01).tick()
            assert other.calls == 0, "a second canary run started beside the slow one"
        slow.gate.set()
        await asyncio.wait_for(running, 30)
    assert _canary_runs(engine) == 1
    assert _audited(engine, "canary.scheduled") == 1


async def test_a_run_whose_lapsed_claim_another_process_took_stops_spending(
    engine: Engine, database_url: str
) -> None:
    """A process that could not renew its claim for the claim's whole life (stalled)
    loses the run: another process claims and runs it, and the first run stops at its
    next renewal: its waiting judge calls are cancelled, it asks no more and stores
    nothing, so one run is stored.

    Each process has its own clock: the second's is three intervals ahead, so the first's
    claim has lapsed by its reckoning whenever it looks."""
    interval = 60.0
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_interval=interval, canary_budget=4
    )
    slow, other = GatedJudge(), GatedJudge()
    other.gate.set()
    first, second = _two_processes(settings, engine, slow, other)
    start = utcnow()
    first.store.db.clock = lambda: start
    second.store.db.clock = lambda: start + timedelta(seconds=3 * interval)
    async with first, second:
        running = asyncio.create_task(CanaryLoop(first.services, renew_every=0.01).tick())
        await asyncio.wait_for(slow.asked.wait(), 30)
        await CanaryLoop(second.services, renew_every=0.01).tick()
        assert other.calls > 0 and _canary_runs(engine) == 1
        await asyncio.wait_for(running, 30)  # the first run stopped, its judge still silent
        asked = slow.calls
        slow.gate.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert slow.calls == asked <= settings.canary_budget
    with Session(engine) as session:
        [run] = session.execute(select(CanaryRunRecord)).scalars()
    assert run.judge_calls == other.calls
    assert _audited(engine, "canary.scheduled") == 2


async def test_a_canary_set_whose_texts_cannot_be_graded_is_refused_naming_the_line(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """A diagnosis the grader refuses (here a NUL) makes the set unusable: refused at
    start naming the setting and the line, and a set changed into one after start is
    refused by the run naming the line, before any judge call."""
    lines = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[:3]
    bad = json.loads(lines[0])
    bad["diagnosis"] = "bad \x00 byte"
    unusable = "\n".join([json.dumps(bad), *lines[1:]]) + "\n"
    canary = tmp_path / "canary.jsonl"
    canary.write_text(unusable)
    with pytest.raises(ValueError, match=r"SRE_JUDGE_CANARY_SET: .*line 1"):
        async with api_client(judge=JUDGE, canary_set=canary):
            pass
    canary.write_text("\n".join(lines) + "\n")
    judge = ScriptedBackend(model="pass")
    async with api_client(judge=JUDGE, backends={JUDGE: judge}, canary_set=canary) as client:
        canary.write_text(unusable)
        admin = await tokens("admin")
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
    assert response.status_code == 422, response.text
    assert "line 1: diagnosis contains NUL bytes" in response.text
    assert judge.requests == []


async def test_a_canary_set_holding_a_number_python_cannot_read_is_refused_naming_the_line(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """An item id written as a 5,000-digit number (more than Python converts) makes the
    set unusable as any unreadable line does: refused at start naming the setting and
    the line, and refused by a run naming the line (422) before any judge call."""
    lines = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[:3]
    first = json.loads(lines[0])
    first["id"] = "@@HUGE@@"
    unusable = "\n".join([json.dumps(first).replace('"@@HUGE@@"', "1" * 5000), *lines[1:]])
    canary = tmp_path / "canary.jsonl"
    canary.write_text(unusable + "\n")
    with pytest.raises(ValueError, match=r"SRE_JUDGE_CANARY_SET: .*line 1"):
        async with api_client(judge=JUDGE, canary_set=canary):
            pass
    canary.write_text("\n".join(lines) + "\n")
    judge = ScriptedBackend(model="pass")
    async with api_client(judge=JUDGE, backends={JUDGE: judge}, canary_set=canary) as client:
        canary.write_text(unusable + "\n")
        admin = await tokens("admin")
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
    assert response.status_code == 422, response.text
    assert "line 1: " in response.json()["detail"]
    assert judge.requests == []


class NoisyJudge(LabelledJudge):
    """Answers as the labels say, but D3-Q3 the other way one call in five (a seeded
    coin): noise the calibration measures, not agreement with the labels falling (a
    coin toss on D3-Q3 made twelve items' agreement fall below the set's by chance)."""

    def __init__(self) -> None:
        super().__init__()
        self.coin = random.Random(7)

    def _next(self, request: JudgeRequest) -> str:
        text = "\n".join(m.content for m in request.messages)
        yes = next((ids for diagnosis, ids in LABELS.items() if diagnosis in text), set())
        if self.coin.random() < 0.2:
            yes = yes ^ {"D3-Q3"}
        return scripted_reply(request, yes=yes)


async def test_answers_that_change_only_as_much_as_measured_at_qualification_keep_the_judge(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """Calibration grades the canary's items twice and stores the judge's run-to-run
    noise; the canary holds what changed against it, not against a fixed allowance."""
    judge = NoisyJudge()
    settings = Settings(judge=JUDGE, database_url=database_url, canary_budget=12,
                        qualify_min_kappa=0.0, qualify_max_false_pass=1.0)  # fmt: skip
    gold = DEFAULT_GOLD.read_bytes()
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(runtime.services, gold, gold_name=DEFAULT_GOLD.name)
    assert outcome.run.qualified
    items = len(gold.decode().splitlines())
    assert len(judge.requests) == items + 12  # the set, then the canary's 12 items again
    noise = outcome.run.results["noise"]
    assert noise["n"] == 12 * 10 and noise["successes"] > 0  # nine answers and the verdict
    async with api_client(
        judge=JUDGE, backends={JUDGE: judge}, canary_budget=12, canary_max_changed=0.0
    ) as client:
        admin = await tokens("admin")
        runs = [
            (await client.post("/v1/judges/canary", json={}, headers=admin)).json()
            for _ in range(3)
        ]
    assert any(run["changed_share"] for run in runs)  # answers did change ...
    assert not any(run["demoted"] for run in runs), runs  # ... within the measured noise
    assert all(run["noise"] == noise for run in runs)


class UnusableAfter(LabelledJudge):
    """Answers as the labels say for its first ``calls`` calls, then unusable text."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls

    def _next(self, request: JudgeRequest) -> str:
        if len(self.requests) > self.calls:
            return "I think the diagnosis is pretty good!"
        return super()._next(request)


async def test_measuring_the_noise_makes_no_more_judge_calls_than_the_canary_budget(
    engine: Engine, database_url: str
) -> None:
    """Unusable replies in the second grading make each item ask again (retries,
    repairs): it stops at the budget, as a canary run does, and what it could not score
    is not counted: a noise of nothing compared, so the fixed allowance stands in."""
    items = len(DEFAULT_GOLD.read_text().splitlines())
    judge = UnusableAfter(items)
    settings = Settings(judge=JUDGE, database_url=database_url, canary_budget=7)
    gold = DEFAULT_GOLD.read_bytes()
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(runtime.services, gold, gold_name=DEFAULT_GOLD.name)
    assert len(judge.requests) == items + 7
    assert outcome.run.results["noise"]["n"] == 0


async def test_no_run_makes_more_judge_calls_than_its_budget(api_client: Any, tokens: Any) -> None:
    """Unusable replies make each item ask again (retries, repairs): the budget holds."""
    judge = ScriptedBackend(model="garbage")
    async with api_client(
        judge="scripted:garbage", backends={"scripted:garbage": judge}, canary_budget=5
    ) as client:
        admin = await tokens("admin")
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
        assert response.status_code == 201, response.text
        run = response.json()
        assert len(judge.requests) == run["judge_calls"] == 5
        assert run["budget"] == 5 and run["demoted"] is False  # never qualified: nothing to demote
        adjudicator = await tokens("adjudicator")
        listed = await client.get("/v1/judges/canary", headers=adjudicator)
        assert [r["id"] for r in listed.json()["items"]] == [run["id"]]
        for name, found in (("scripted:garbage@http://x", [run["id"]]), ("scripted:x", [])):
            one = await client.get("/v1/judges/canary", params={"judge": name}, headers=adjudicator)
            assert [r["id"] for r in one.json()["items"]] == found, name  # address left out
        refused = await client.post(
            "/v1/judges/canary", json={}, headers=await tokens("adjudicator")
        )
        assert refused.status_code == 403
        bad = await client.post("/v1/judges/canary", json={"judge": "x"}, headers=admin)
        assert bad.status_code in (400, 422)


#: a model name the spec grammar accepts (at most 256 characters), as a llama.cpp or
#: vLLM server lists a model under its file's path
LONG_MODEL = "/models/" + "huggingface-cache/" * 9 + "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


async def test_a_judge_with_a_long_model_name_is_measured(api_client: Any, tokens: Any) -> None:
    """A judge named by a model file's path (over 160 characters with its backend) has
    its canary run stored and audited like any other."""
    spec = f"openai:{LONG_MODEL}@http://127.0.0.1:9/v1"
    assert len(f"openai:{LONG_MODEL}") > 160 and len(LONG_MODEL) <= 256
    judge = ScriptedBackend(model="pass")
    async with api_client(judge=spec, backends={spec: judge}, canary_budget=3) as client:
        admin = await tokens("admin")
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
    assert response.status_code == 201, response.text[:500]
    assert response.json()["judge"] == f"openai:{LONG_MODEL}"


def test_the_command_runs_the_canary_and_lists_its_runs(database_url: str, engine: Engine) -> None:
    del engine  # migrated
    env = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url,
           "SRE_JUDGE_JUDGE": "scripted:fail", "SRE_JUDGE_CANARY_BUDGET": "4"}  # fmt: skip
    ran = cli_in_process("judges", "canary", "--format", "json", env=env)
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert (run["judge"], run["judge_calls"], run["n"], run["demoted"]) == (
        "scripted:fail",
        4,
        4,
        False,
    )
    listed = cli_in_process("judges", "canary", "--history", "--format", "table", env=env)
    assert listed.returncode == 0 and "4 of 4 calls" in listed.stdout


class _HotJudge(LabelledJudge):
    """Answers as the labels say at temperature 0, the opposite when sampled hotter."""

    def _next(self, request: JudgeRequest) -> str:
        text = "\n".join(m.content for m in request.messages)
        yes = next((ids for diagnosis, ids in LABELS.items() if diagnosis in text), set())
        if (request.params.temperature or 0) > 0:
            yes = {q.id for q in sregym_rubric().questions if q.id not in yes}
        return scripted_reply(request, yes=yes)


async def test_calibration_measures_the_judge_as_it_grades_samples_included(
    engine: Engine, database_url: str
) -> None:
    """With SRE_JUDGE_JUDGE_SAMPLES=3 the service grades by three samples at the sample
    temperature, and the run is stored under that identity: it must measure that judge
    (it asked one call at temperature 0 and qualified one wrong whenever sampled)."""
    judge = _HotJudge()
    settings = Settings(judge=JUDGE, database_url=database_url, judge_samples=3, canary_budget=6)
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(
            runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
        )
    assert outcome.run.judge_settings["samples"] == 3
    assert any((r.params.temperature or 0) > 0 for r in judge.requests)
    assert outcome.run.qualified is False


class _ExtractingJudge(LabelledJudge):
    """Answers the claims of an extraction and every other request cleanly."""

    def _next(self, request: JudgeRequest) -> str:
        if "origin_component" in request.reply_schema.get("properties", {}):
            claims = {"origin_component": "user-service", "origin_namespace": "hotel"}
            lists = ("values", "symptoms", "affected", "other_causes")
            empty = {key: [] for key in lists}
            return json.dumps({**claims, "fault_kind": "wrong env var", **empty})
        return scripted_reply(request)


async def test_the_canary_grades_every_item_its_budget_pays_for_whatever_the_asking(
    engine: Engine, database_url: str
) -> None:
    """An item asked by extraction takes a call for the claims and one per question the
    claims do not answer: the set is cut by that, so a judge that answers every call
    cleanly has every chosen item scored (with one call per item counted, most of them
    ran out of budget)."""
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_budget=24, judge_asking="extraction"
    )
    async with Runtime(settings, engine=engine, backends={JUDGE: _ExtractingJudge()}) as runtime:
        run = await run_canary(runtime.services)
    assert 0 < run.n == run.scored and run.judge_calls <= 24


async def test_a_demotion_holds_for_the_identity_measured_not_the_model_asked_otherwise(
    engine: Engine, database_url: str
) -> None:
    """Qualification is per identity: the same model at temperature 0 and at 0.3 is
    calibrated twice; a canary run of the second demotes the second only (it demoted
    every identity of the model, including one it never measured)."""

    async def calibrated(settings: Settings) -> None:
        async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
            outcome = await calibrate(
                runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
            )
        assert outcome.run.qualified

    judge = LabelledJudge()
    cold = Settings(judge=JUDGE, database_url=database_url, canary_budget=12)
    warm = cold.model_copy(update={"judge_temperature": 0.3})
    await calibrated(cold)
    await calibrated(warm)
    judge.drifted = True
    async with Runtime(warm, engine=engine, backends={JUDGE: judge}) as runtime:
        assert (await run_canary(runtime.services)).demoted
        rubric = runtime.services.rubrics.current[warm.rubric]
        calibration = runtime.services.store.calibration
        assert not await calibration.is_qualified(**identity_of(warm, JUDGE, rubric))
        assert await calibration.is_qualified(**identity_of(cold, JUDGE, rubric))


async def test_a_sampled_judge_at_another_sample_temperature_is_not_the_judge_calibrated(
    engine: Engine, database_url: str
) -> None:
    """With several samples every call is sent at the sample temperature: a judge
    calibrated at 0.7 is another judge at 1.9, and it counted as qualified (its identity
    held the base temperature, never sent, and not the sample one)."""
    judge = LabelledJudge()
    calibrated = Settings(
        judge=JUDGE, database_url=database_url, judge_samples=3,
        judge_sample_temperature=0.7, canary_budget=6,
    )  # fmt: skip
    async with Runtime(calibrated, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(
            runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
        )
        assert outcome.run.qualified
        assert {r.params.temperature for r in judge.requests} == {0.7}
        hot = calibrated.model_copy(update={"judge_sample_temperature": 1.9})
        rubric = runtime.services.rubrics.current[hot.rubric]
        store = runtime.services.store.calibration
        assert await store.is_qualified(**identity_of(calibrated, JUDGE, rubric))
        assert not await store.is_qualified(**identity_of(hot, JUDGE, rubric))
    single = Settings(judge=JUDGE, judge_sample_temperature=1.9)  # samples unused: not in it
    assert identity_of(single, JUDGE, rubric) == identity_of(
        single.model_copy(update={"judge_sample_temperature": 0.7}), JUDGE, rubric
    )


def _canary_set(tmp_path: Path, *ids: str) -> Path:
    """A canary set of the shipped calibration cases ``ids`` (labelled as shipped)."""
    lines = [json.loads(line) for line in DEFAULT_GOLD.read_text().splitlines() if line.strip()]
    chosen = [line for line in lines if line["id"] in ids]
    assert len(chosen) == len(ids)
    path = tmp_path / "canary.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in chosen))
    return path


async def test_an_extraction_canary_pays_for_the_healthy_control_it_chooses(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """A healthy control's ground truth has no header: extraction asks all nine
    questions (9 calls, not the 7 counted for every item), so a budget of 21 chose three
    items needing 23 and a judge answering every call cleanly had one refused."""
    cases = ("control-correct", "scale-zero-correct", "port-correct")
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_budget=21, judge_asking="extraction",
        canary_set=_canary_set(tmp_path, *cases),
    )  # fmt: skip
    async with Runtime(settings, engine=engine, backends={JUDGE: _ExtractingJudge()}) as runtime:
        run = await run_canary(runtime.services)
    assert run.judge_calls <= 21 and run.n == run.scored == 2  # 9 + 7 paid, 7 more not


class SometimesAway(LabelledJudge):
    """Answers as the labels say, or (``away``) with text no parser can use."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False

    def _next(self, request: JudgeRequest) -> str:
        return "sorry, the model is loading" if self.away else super()._next(request)


async def test_a_first_canary_run_that_scored_nothing_is_no_baseline(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """On a canary set other than the calibration's, the answers are compared with the
    first canary run's after it: one the judge could not answer at all (a model still
    loading) became that baseline, and the answers check was off until the next
    calibration. The first run that scored anything is the baseline."""
    cases = ("port-correct", "port-borderline", "port-wrong", "control-correct")
    judge = SometimesAway()
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_budget=12,
        canary_set=_canary_set(tmp_path, *cases),
    )  # fmt: skip
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(
            runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
        )
        assert outcome.run.qualified
        judge.away = True
        blank = await run_canary(runtime.services)
        judge.away = False
        first = await run_canary(runtime.services)
        second = await run_canary(runtime.services)
    assert blank.scored == 0 and first.scored == second.scored == len(cases)
    assert second.changed_share == 0.0, (second.changed_share, second.reasons)


#: two members of a panel, each a judge behind its own address
MEMBERS = ("openai:local@http://127.0.0.1:9/v1", "openai:cloud@http://127.0.0.1:10/v1")


def _members() -> dict[str, LabelledJudge]:
    return {spec: LabelledJudge() for spec in MEMBERS}


async def test_the_service_s_canary_measures_the_panel_that_grades(
    api_client: Any, tokens: Any
) -> None:
    """With ``SRE_JUDGE_PANEL`` set the panel grades every new submission and is qualified
    while each member is, so the canary of the service's judges (``POST
    /v1/judges/canary`` with ``{}``) measures each member, a run each, and not
    ``SRE_JUDGE_JUDGE``, which grades nothing here."""
    admin = await tokens("admin")
    members, judge = _members(), LabelledJudge()
    backends: dict[str, Any] = {**members, JUDGE: judge}
    async with api_client(
        judge=JUDGE, panel=",".join(MEMBERS), backends=backends, canary_budget=2
    ) as client:
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert [run["judge"] for run in answer["runs"]] == ["openai:local", "openai:cloud"]
    assert answer["demoted"] is False
    assert [len(member.requests) for member in members.values()] == [2, 2]
    assert judge.requests == []


async def test_the_canary_of_a_panel_of_one_answers_in_the_panel_shape(
    api_client: Any, tokens: Any
) -> None:
    """A panel of one member is a panel: the canary on demand answers
    ``{"demoted", "runs"}`` with the member's run, as for any panel."""
    judge = ScriptedBackend(model="pass")
    async with api_client(
        judge=JUDGE, panel=JUDGE, backends={JUDGE: judge}, canary_budget=2
    ) as client:
        admin = await tokens("admin")
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"demoted", "runs"}, sorted(body)
    assert [run["judge"] for run in body["runs"]] == [JUDGE]


def test_the_command_answers_a_panel_of_one_in_the_panel_shape(
    database_url: str, engine: Engine
) -> None:
    """``judges canary --format json`` prints a panel's answer for a panel of one, and
    the bare run of the judge named by ``--judge``."""
    del engine  # migrated
    env = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url,
           "SRE_JUDGE_PANEL": JUDGE, "SRE_JUDGE_CANARY_BUDGET": "2"}  # fmt: skip
    ran = cli_in_process("judges", "canary", "--format", "json", env=env)
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["demoted"] is False
    assert [run["judge"] for run in answer["runs"]] == [JUDGE]
    named = cli_in_process("judges", "canary", "--judge", JUDGE, "--format", "json", env=env)
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["judge"] == JUDGE


async def test_a_panel_member_that_drifts_is_demoted_by_the_scheduled_canary(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """The scheduled canary runs for each member of the panel against that member's own
    calibration: a member that starts answering differently is demoted, and the panel's
    gradings turn provisional again."""
    members = _members()
    for spec, member in members.items():
        await _qualified(Settings(judge=spec, database_url=database_url), engine, member)
    settings = {"canary_interval": 0.2, "canary_budget": 12}
    async with api_client(
        judge=JUDGE, panel=",".join(MEMBERS), backends={**members}, **settings
    ) as client:
        agent, admin = await tokens("submitter"), await tokens("admin")
        assert await _provisional(client, agent) is False
        members[MEMBERS[1]].drifted = True
        for _ in range(100):
            runs = await _runs(client, admin, 1)
            if any(run["demoted"] for run in runs):
                break
            await asyncio.sleep(0.1)
        assert {run["judge"] for run in runs if run["demoted"]} == {"openai:cloud"}
        assert {run["judge"] for run in runs} == {"openai:local", "openai:cloud"}
        assert await _provisional(client, agent) is True


class GoneAway(LabelledJudge):
    """Answers as the labels say until ``away``; then every call is refused."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False

    async def complete(self, request: JudgeRequest) -> Completion:
        if self.away:
            raise JudgeUnavailable("connection refused")
        return await super().complete(request)


def _outcome_cell(page: str) -> str:
    """The outcome cell of the judges page's one canary run."""
    [row] = re.findall(r'<tr data-testid="canary-run">.*?</tr>', page, flags=re.S)
    return str(re.findall(r"<td>(.*?)</td>", row, flags=re.S)[-1].strip())


async def test_a_canary_run_that_scored_nothing_is_unmeasured_not_ok(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """A qualified judge whose server is down is not measured by the canary: the run
    scores 0 of n items, its outcome is ``unmeasured`` (in the API and on the judges
    page, saying why), never ``ok``."""
    judge = GoneAway()
    await _qualified(Settings(judge=JUDGE, database_url=database_url), engine, judge)
    judge.away = True
    async with api_client(
        judge=JUDGE, backends={JUDGE: judge}, canary_budget=4, judge_max_attempts=1
    ) as client:
        admin = await tokens("admin")
        response = await client.post("/v1/judges/canary", json={}, headers=admin)
        assert response.status_code == 201, response.text
        run = response.json()
        await sign_in(client, await tokens("adjudicator", "Ada"))
        page = (await client.get("/judges")).text
    assert run["scored"] == 0 and run["n"] > 0
    assert (run["outcome"], run["demoted"]) == ("unmeasured", False)
    cell = _outcome_cell(page)
    assert "unmeasured" in cell and f"none of its {run['n']} items was scored" in cell, cell


class DigestOutOfTime(LabelledJudge):
    """Answers as the labels say, at once; its model digest (``sha256:model-a``) is read
    until ``late``, then a look-up of it runs out of time (a judge host that stopped
    answering it right after the calls: the 10 s ``BackendPool.follow_digests`` allows
    it pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.digest = "sha256:model-a"
        self.late = False

    async def model_digest(self) -> str | None:
        if self.late:
            raise TimeoutError
        return await super().model_digest()


async def test_a_canary_run_is_stored_when_its_digest_look_up_runs_out_of_time(
    engine: Engine, database_url: str
) -> None:
    """The canary's budget is spent on judge calls; the model digest look-up after them
    runs out of time. The run is stored all the same, with the digest known before it
    (``POST /v1/judges/canary`` answers with it, the loop goes on to the next judge)."""
    judge = DigestOutOfTime()
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_budget=6, judge_digest_seconds=0
    )
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        services = runtime.services
        known = await services.backends.digests.current(services.backends.get(JUDGE))
        judge.late = True
        run = await run_canary(services)
    assert known == "sha256:model-a"
    assert run.judge_calls > 0 and run.scored > 0
    assert run.judge_digest == "sha256:model-a"
    assert _canary_runs(engine) == 1


def test_the_canary_command_exits_3_when_its_judge_cannot_be_asked(
    database_url: str, engine: Engine
) -> None:
    """``sre-judge judges canary`` against a judge nobody answers at scores nothing: it
    prints ``UNMEASURED`` and exits 3, so a scheduled check never reads success."""
    del engine  # migrated
    env = {
        "NO_COLOR": "1",
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": "openai:gone@http://127.0.0.1:9/v1",  # nothing listens there
        "SRE_JUDGE_JUDGE_MAX_ATTEMPTS": "1",
        "SRE_JUDGE_CANARY_BUDGET": "3",
    }
    ran = cli_in_process("judges", "canary", "--format", "table", env=env)
    assert "(scored 0)" in ran.stdout, (ran.stdout, ran.stderr)
    assert ": UNMEASURED: none of its" in ran.stdout, ran.stdout
    assert ran.returncode == 3, ran.stdout


async def test_a_canary_whose_budget_pays_for_no_item_is_unmeasured(
    api_client: Any, tokens: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked per question, an item costs nine calls: a budget of 5 pays for none, so the
    run grades nothing. It is ``unmeasured``, the judges page says the budget pays for no
    item, and the log warns."""
    async with api_client(judge=JUDGE, judge_asking="per_question", canary_budget=5) as client:
        admin = await tokens("admin")
        with caplog.at_level("WARNING", logger="sre_judge.judges"):
            response = await client.post("/v1/judges/canary", json={}, headers=admin)
        assert response.status_code == 201, response.text
        run = response.json()
        await sign_in(client, await tokens("adjudicator", "Ada"))
        page = (await client.get("/judges")).text
    assert (run["n"], run["judge_calls"], run["outcome"]) == (0, 0, "unmeasured")
    assert "pays for no item" in _outcome_cell(page)
    assert any("measured nothing" in r.getMessage() for r in caplog.records), caplog.text


#: every question of the shipped rubric
ALL = {f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)}


class PassingLabelledJudge(LabelledJudge):
    """Answers gold items as labelled (inverted once ``drifted``), and passes any other
    diagnosis (the service's own submissions)."""

    def _next(self, request: JudgeRequest) -> str:
        text = "\n".join(m.content for m in request.messages)
        if any(diagnosis in text for diagnosis in LABELS):
            return super()._next(request)
        return scripted_reply(request, yes=ALL)


async def test_a_held_pass_of_a_demoted_judge_does_not_say_it_never_qualified(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """A judge that qualified and was then demoted by the drift canary has its passes
    held; the hold's words say it is not qualified now, never that it never qualified
    (the judges page lists its qualifying run)."""
    judge = PassingLabelledJudge()
    settings = Settings(judge=JUDGE, database_url=database_url, canary_budget=12)
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        gold = DEFAULT_GOLD.read_bytes()
        calibrated = await calibrate(runtime.services, gold, gold_name=DEFAULT_GOLD.name)
        assert calibrated.run.qualified  # it qualified on a calibration run
        judge.drifted = True
        canary = await run_canary(runtime.services)
        assert canary.demoted, canary.reasons
    judge.drifted = False
    async with api_client(
        judge=JUDGE, backends={JUDGE: judge}, pass_policy="qualified", canary_budget=12
    ) as client:
        agent, adj = await tokens("submitter"), await tokens("adjudicator")
        grading = await graded(client, agent)
        # the demotion is in force: provisional, the pass held for a human
        assert grading["provisional"] is True
        assert grading["held"] is True and "judge_not_qualified" in grading["review_reasons"]
        done = await client.post(f"/v1/review-queue/{grading['id']}/done", headers=adj)
    assert done.status_code == 409
    detail = done.json()["detail"]
    assert "the judge is not qualified now" in detail, detail
    assert "has not qualified on a calibration run" not in detail, detail
