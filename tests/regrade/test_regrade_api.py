"""Regrade jobs over HTTP: imported SREGym runs, a shadow regrade, flips, the cache, states."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import Completion, JudgeRequest, TokenLogprob
from judge.rule import apply_rule
from judge.verdict import Answer, GradingResult
from storage import Claim, GradingFilter, Store
from tests.api.conftest import ClientFactory
from tests.storage.helpers import graded_result, new_submission, sregym_rubric
from tests.support.app_client import AppClient
from tests.support.cut_replies import CutOnceJudge
from tests.support.keys import session_key
from tests.support.rubrics import rubric_dir_with_ops_mini
from tests.support.sregym_results import write_sregym_results
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, graded

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

NEW_JUDGE = "scripted:fail"


async def _import(engine: Engine, tmp_path: Path) -> int:
    fixture = write_sregym_results(tmp_path)
    store = Store(engine, key=session_key())
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root),
        read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )
    assert report.sregym_verdicts == 42
    return sum(fixture.verdicts.values())


def _failing(claim: Claim) -> GradingResult:
    rubric = sregym_rubric()
    answers = {q.id: False for q in rubric.questions}
    outcome = apply_rule(rubric, answers)
    return GradingResult(
        status="graded", rubric_id=rubric.id, rubric_version=claim.rubric_version,
        judge_backend="scripted", judge_model="fail", outcome=outcome, judge_outcome=outcome,
        answers=tuple(
            Answer(question_id=q, dimension_id=q[:2], answer=False, judge_answer=False)
            for q in answers
        ),
    )  # fmt: skip


async def _finished(client: AppClient, headers: dict[str, str], job_id: str) -> Any:
    for _ in range(600):  # 30 s
        body = (await client.get(f"/v1/regrade-jobs/{job_id}", headers=headers)).json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"job still {body['state']}: {body}")


async def _assert_flips(client: AppClient, admin: dict[str, str], job_id: str, passes: int) -> None:
    """The flips of a job that failed every one of the 42 imported runs, as JSON and CSV."""
    flips = (await client.get(f"/v1/regrade-jobs/{job_id}/flips", headers=admin)).json()
    assert flips["compared"] == 42
    assert flips["pass_to_fail"]["count"] == passes > 0
    assert flips["fail_to_pass"]["count"] == 0
    assert flips["questions"]["D1-Q1"]["no->yes"] == 0
    assert sum(flips["questions"]["D1-Q1"].values()) == 42
    assert flips["agreement"]["answers"]["n"] == 42 * 9
    assert flips["agreement"]["verdicts"]["n"] == 42
    csv_reply = await client.get(
        f"/v1/regrade-jobs/{job_id}/flips", params={"format": "csv"}, headers=admin
    )
    assert csv_reply.headers["content-type"].startswith("text/csv")
    lines = csv_reply.text.strip().splitlines()
    assert len(lines) == 43 and lines[0].startswith("submission_id,agent")
    assert sum(",pass->fail," in line for line in lines) == passes


async def _assert_answered_from_cache(engine: Engine, job_id: str) -> None:
    """A grading of the job came from the cache: no attempt, a ``judge.call`` of origin cache."""
    store = Store(engine, key=session_key())
    views, _ = await store.gradings.page(filters=GradingFilter(current_only=False), limit=500)
    item = next(v for v in views if v.grading.regrade_job_id == job_id)
    [call] = await store.gradings.judge_calls(item.grading.id)
    assert call.cached and call.attempts == []
    [event] = [e for e in await store.gradings.history(item.grading.id) if e.event == "judge.call"]
    assert event.payload["origin"] == "cache"


async def test_shadow_regrade_of_sregym_runs_yields_flips_and_a_second_run_costs_nothing(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    tmp_path: Path,
) -> None:
    passes = await _import(engine, tmp_path)
    judge = ScriptedBackend(model="fail")
    admin = await tokens("admin")
    request = {"judge": NEW_JUDGE, "filter": {"judge": "external:sregym"}}
    async with api_client(backends={NEW_JUDGE: judge}) as client:
        dry = await client.post(
            "/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin
        )
        assert dry.status_code == 200, dry.text
        assert (dry.json()["state"], dry.json()["total"]) == ("done", 42)
        assert dry.json()["estimate"]["judge_calls"] == 42
        assert dry.json()["estimate"]["cache_granularity"] == "call"
        assert judge.requests == []

        first = await client.post("/v1/regrade-jobs", json=request, headers=admin)
        assert first.status_code == 201, first.text
        done = await _finished(client, admin, first.json()["id"])
        assert (done["state"], done["done"], done["failed"], done["remaining"]) == (
            "done",
            42,
            0,
            0,
        )
        assert (done["judge_calls"], done["cache_hits"]) == (42, 0)

        await _assert_flips(client, admin, done["id"], passes)

        again = await client.post(
            "/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin
        )
        assert again.json()["estimate"]["cache_hits"] == 42
        assert again.json()["estimate"]["judge_calls"] == 0
        second = await client.post("/v1/regrade-jobs", json=request, headers=admin)
        repeat = await _finished(client, admin, second.json()["id"])
        assert (repeat["judge_calls"], repeat["cache_hits"], repeat["done"]) == (0, 42, 42)
    assert len(judge.requests) == 42  # the second regrade made no judge call

    await _assert_answered_from_cache(engine, repeat["id"])


_ANSWER = re.compile(r'"answer"\s*:\s*"')


class _UnsureJudge(ScriptedBackend):
    """A deterministic judge that returns log-probabilities (as llama.cpp or OpenAI do):
    each answer value one token, P(yes) 0.4 against P(no) 0.6."""

    async def complete(self, request: JudgeRequest) -> Completion:
        completion = await super().complete(request)
        text, tokens, start = completion.text, [], 0
        yes, no = math.log(0.4), math.log(0.6)
        for match in _ANSWER.finditer(text):
            end = text.index('"', match.end())
            value = text[match.end() : end]
            tokens.append(TokenLogprob(token=text[start : match.end()], logprob=-0.01))
            top = (("yes", yes), ("no", no))
            tokens.append(TokenLogprob(token=value, logprob=dict(top)[value], top=top))
            start = end
        tokens.append(TokenLogprob(token=text[start:], logprob=-0.01))
        return completion.model_copy(update={"logprobs": tuple(tokens)})


async def test_a_regrade_answered_from_the_cache_keeps_the_confidences_of_the_live_reply(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """An answer's confidence is P(yes)/(P(yes)+P(no)) at the reply's answer token (below
    0.5 the review queue lists the grading as ``low_confidence``). A regrade with the
    same judge and rubric is answered from the judge cache and changes nothing: the same
    confidences, the same review reasons, as the live reply gave."""
    spec = "openai:scripted@http://127.0.0.1:9/v1"
    judge = _UnsureJudge(model="pass", digest="sha256:" + "a" * 64)
    admin = await tokens("admin")
    async with api_client(judge=spec, backends={spec: judge}) as client:
        live = await graded(client, admin)
        body = {"judge": spec, "mode": "promote", "filter": {}}
        job = await client.post("/v1/regrade-jobs", json=body, headers=admin)
        assert job.status_code == 201, job.text
        done = await _finished(client, admin, job.json()["id"])
        [again] = (await client.get("/v1/gradings", headers=admin)).json()["items"]
        again = (await client.get(f"/v1/gradings/{again['id']}", headers=admin)).json()
    assert (done["judge_calls"], done["cache_hits"]) == (0, 1), done
    assert len(judge.requests) == 1 and again["id"] != live["id"]

    def confidences(grading: dict[str, Any]) -> dict[str, Any]:
        return {a["question_id"]: a["confidence"] for a in grading["answers"]}

    assert set(confidences(live)) == set(IDS) and confidences(live)["D1-Q1"] == 0.4
    assert confidences(again) == confidences(live)
    assert again["review_reasons"] == live["review_reasons"]


async def test_a_new_job_is_graded_at_once_not_at_the_workers_next_poll(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, tmp_path: Path
) -> None:
    """Workers that found no regrade item a moment ago look again as soon as a job is
    made in their process, not after ``SRE_JUDGE_POLL_SECONDS``."""
    await _import(engine, tmp_path)
    admin = await tokens("admin")
    request = {"judge": NEW_JUDGE, "filter": {"judge": "external:sregym"}}
    backends = {NEW_JUDGE: ScriptedBackend(model="fail")}
    async with api_client(backends=backends, poll_seconds=60) as client:
        await asyncio.sleep(0.2)  # the workers have looked for work and found none
        job = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        done = await asyncio.wait_for(_finished(client, admin, job["id"]), timeout=20)
    assert (done["state"], done["done"]) == ("done", 42)
    # each state the job went through is an audit event, the start by the worker once
    with engine.connect() as connection:
        events = connection.execute(
            text("SELECT event, actor FROM audit_log WHERE entity_id = :id ORDER BY seq"),
            {"id": job["id"]},
        ).all()
    assert [e for e, _ in events] == [
        "regrade_job.created", "regrade_job.started", "regrade_job.done"
    ], events  # fmt: skip
    assert events[1].actor.split(":")[1] == str(os.getpid()), events  # host:pid:worker


async def test_the_dry_run_counts_the_cache_hits_of_the_model_behind_the_name_now(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, tmp_path: Path
) -> None:
    """A judge that reports its model's digest: its entries are kept under the digest,
    so the estimate finds them; once another model answers behind the same name, the
    estimate promises no hit, as the regrade will find none."""
    await _import(engine, tmp_path)
    judge = ScriptedBackend(model="fail", digest="sha256:first")
    admin = await tokens("admin")
    request = {"judge": NEW_JUDGE, "filter": {"judge": "external:sregym"}}
    async with api_client(backends={NEW_JUDGE: judge}, judge_digest_seconds=0) as client:
        first = await client.post("/v1/regrade-jobs", json=request, headers=admin)
        done = await _finished(client, admin, first.json()["id"])
        assert (done["judge_calls"], done["cache_hits"]) == (42, 0)
        dry = {**request, "dry_run": True}
        same = await client.post("/v1/regrade-jobs", json=dry, headers=admin)
        assert same.json()["estimate"]["cache_hits"] == 42
        judge.digest = "sha256:second"  # the model file replaced behind the name
        swapped = await client.post("/v1/regrade-jobs", json=dry, headers=admin)
        assert swapped.json()["estimate"]["cache_hits"] == 0
        assert swapped.json()["estimate"]["judge_calls"] == 42


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rubric": "no-such-rubric"}, "rubric"),
        ({"rubric": "sregym-rca@v0+000000000000"}, "rubric"),
        # an empty version names no version: not the current one
        ({"rubric": "sregym-rca@"}, "rubric"),
        ({"judge": NEW_JUDGE, "filter": {"rubric_version": "sregym-rca@"}}, "rubric_version"),
        ({"judge": "nonsense"}, "judge"),
        ({"judge": "scripted:maybe"}, "judge"),
        # a model name no grading can record (256 characters), alone or in a panel
        ({"judge": "openai:" + "m" * 300 + "@http://127.0.0.1:9/v1"}, "judge"),
        # a base URL no client can ask (a control character): refused, not a 500
        ({"judge": "openai:m@http://127.0.0.1:8080/v1\x01", "dry_run": True}, "judge"),
        ({"judge": "panel:" + ",".join(f"ollama:{n}{'m' * 60}" for n in range(5))}, "judge"),
        ({"mode": "shadow"}, "rubric"),
        ({"judge": NEW_JUDGE, "mode": "replace"}, "mode"),
        ({"judge": NEW_JUDGE, "filter": {"colour": "red"}}, "filter.colour"),
        ({"judge": NEW_JUDGE, "filter": {"created_after": "2025-01-01T00:00:00"}}, "created_after"),
    ],
)
async def test_invalid_requests_get_422_naming_the_field(
    api_client: ClientFactory, tokens: Callable[..., Any], body: dict[str, Any], field: str
) -> None:
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        reply = await client.post("/v1/regrade-jobs", json=body, headers=admin)
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert any(field in e["field"] for e in reply.json()["errors"]), reply.json()


async def test_a_compact_date_in_a_filter_is_that_date_never_seconds_since_1970(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A filter's ``created_after`` in ISO 8601's compact form is that date: with an offset
    (``29990101T000000Z``) it selects nothing yet, and without one (``29990101``) it is
    refused naming the field like any bound without an offset; never read as seconds since
    1970, which would select the whole history for a regrade."""
    admin = await tokens("admin")
    async with api_client() as client:
        await graded(client, admin)

        async def dry_run(after: str) -> Any:
            body = {"judge": NEW_JUDGE, "dry_run": True, "filter": {"created_after": after}}
            return await client.post("/v1/regrade-jobs", json=body, headers=admin)

        zoned, bare = await dry_run("29990101T000000Z"), await dry_run("29990101")
    assert zoned.status_code in (200, 201), zoned.text
    assert zoned.json()["total"] == 0, zoned.json()
    assert bare.status_code == 422, bare.text
    assert [e["field"] for e in bare.json()["errors"]] == ["filter.created_after"]


@pytest.mark.parametrize("dry_run", [True, False])
async def test_an_empty_target_rubric_is_refused_not_read_as_the_services_default(
    api_client: ClientFactory, tokens: Callable[..., Any], dry_run: bool
) -> None:
    """A target rubric of ``""`` names no rubric: the job is refused with 422 naming
    ``rubric``, dry run or not, never started as a regrade of everything with the
    service's default rubric (which only an omitted rubric means)."""
    admin = await tokens("admin")
    async with api_client() as client:
        await graded(client, admin)
        body = {"rubric": "", "dry_run": dry_run}
        reply = await client.post("/v1/regrade-jobs", json=body, headers=admin)
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert any("rubric" in e["field"] for e in reply.json()["errors"]), reply.json()


async def _post_over_one_grading(
    api_client: ClientFactory, tokens: Callable[..., Any], body: dict[str, Any]
) -> Any:
    """The answer to starting the job ``body`` with one current grading, by scripted:pass."""
    admin = await tokens("admin")
    async with api_client() as client:
        await graded(client, admin)
        return await client.post("/v1/regrade-jobs", json=body, headers=admin)


def _assert_refused_naming(reply: Any, field: str) -> None:
    assert reply.status_code == 422, (reply.status_code, reply.text)
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert any(field in e["field"] for e in reply.json()["errors"]), reply.json()


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(
    "judge",
    [
        "nonsense",  # no backend:model at all
        "",  # names nothing, as "$OLD_JUDGE" with OLD_JUDGE unset gives
        "   ",
        "scripted:",  # no model
        ":pass",  # no backend
        "scripted:pass@",  # an empty base URL, which no recorded spec has
        "panel:",  # a panel of no member
    ],
)
async def test_a_filter_judge_in_none_of_the_documented_forms_is_refused_naming_it(
    api_client: ClientFactory, tokens: Callable[..., Any], judge: str, dry_run: bool
) -> None:
    """A filter's ``judge`` that is in none of the forms a grading's judge has
    (``BACKEND:MODEL``, ``BACKEND:MODEL@URL``, a panel of such members) is refused with
    422 naming ``judge``, dry run or not: a script whose judge variable is unset or
    misspelt learns it, rather than getting a job that regraded nothing."""
    body = {"judge": NEW_JUDGE, "dry_run": dry_run, "filter": {"judge": judge}}
    _assert_refused_naming(await _post_over_one_grading(api_client, tokens, body), "judge")


@pytest.mark.parametrize("rubric_version", ["", "@v1+5b849a4d5806", "sregym-rca@ "])
async def test_a_filter_rubric_version_with_an_empty_id_is_refused_naming_it(
    api_client: ClientFactory, tokens: Callable[..., Any], rubric_version: str
) -> None:
    """A filter's ``rubric_version`` with an empty rubric id (``""``, ``@VERSION``) or a
    version of blanks names no rubric a grading has: refused with 422 naming
    ``rubric_version``, as a job's own empty rubric is."""
    body = {"judge": NEW_JUDGE, "dry_run": True, "filter": {"rubric_version": rubric_version}}
    reply = await _post_over_one_grading(api_client, tokens, body)
    _assert_refused_naming(reply, "rubric_version")


@pytest.mark.parametrize(
    ("filter_", "field"),
    [
        ({"scenario_set": ""}, "scenario_set"),
        ({"scenario_set": " "}, "scenario_set"),
        ({"tags": [""]}, "tags"),
        (
            {"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"},
            "created_before",
        ),
        (
            {"created_after": "2026-01-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"},
            "created_before",
        ),
    ],
)
async def test_a_filter_nothing_can_match_is_refused_naming_it(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    filter_: dict[str, Any],
    field: str,
) -> None:
    """A filter's empty (or blank) ``scenario_set`` or empty tag, which no scenario has,
    or a ``created_before`` not later than its ``created_after`` (no time between), is
    refused with 422 naming the field, as the reports' filters refuse an empty set."""
    body = {"judge": NEW_JUDGE, "dry_run": True, "filter": filter_}
    _assert_refused_naming(await _post_over_one_grading(api_client, tokens, body), field)


async def test_a_refused_judge_spec_is_quoted_with_its_password_masked(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A judge spec the service refuses is named in the 422 with the credentials of its
    URL masked: the answer (and any log of it) never carries the password."""
    admin = await tokens("admin")
    spec = "openai:m@http://user:hunter2secret@127.0.0.1:9/v1?x=1@"
    async with api_client(start_workers=False) as client:
        reply = await client.post(
            "/v1/regrade-jobs", json={"judge": spec, "dry_run": True}, headers=admin
        )
    assert reply.status_code == 422, reply.text
    assert "hunter2secret" not in reply.text


async def test_pause_resume_cancel_and_who_may(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, tmp_path: Path
) -> None:
    await _import(engine, tmp_path)
    admin, submitter = await tokens("admin"), await tokens("submitter")
    async with api_client(
        start_workers=False, backends={NEW_JUDGE: ScriptedBackend(model="fail")}
    ) as client:
        denied = await client.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=submitter)
        assert denied.status_code == 403
        job = (
            await client.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=admin)
        ).json()
        assert (job["state"], job["remaining"], job["eta_seconds"]) == ("queued", 42, None)
        base = f"/v1/regrade-jobs/{job['id']}"
        assert (await client.post(f"{base}/pause", headers=admin)).json()["state"] == "paused"
        assert (await client.post(f"{base}/resume", headers=admin)).json()["state"] == "queued"
        cancelled = (await client.post(f"{base}/cancel", headers=admin)).json()
        assert (cancelled["state"], cancelled["cancelled"], cancelled["remaining"]) == (
            "cancelled",
            42,
            0,
        )
        assert (await client.post(f"{base}/pause", headers=admin)).status_code == 409
        assert (await client.get("/v1/regrade-jobs/nope", headers=admin)).status_code == 404
        assert (await client.get(f"{base}/flips", headers=submitter)).status_code == 403
        adjudicator = await tokens("adjudicator")
        assert (await client.get(base, headers=adjudicator)).status_code == 403
        assert (await client.post(f"{base}/resume", headers=adjudicator)).status_code == 403
        assert (await client.get(base)).status_code == 401


async def test_a_job_survives_a_restart_and_continues_where_it_stopped(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, tmp_path: Path
) -> None:
    await _import(engine, tmp_path)
    admin = await tokens("admin")
    judge = ScriptedBackend(model="fail")
    async with api_client(start_workers=False, backends={NEW_JUDGE: judge}) as client:
        job = (
            await client.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=admin)
        ).json()
    store = Store(engine, key=session_key())
    [claim] = await store.queue.claim_pending("before-restart", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "before-restart", _failing(claim))
    async with api_client(backends={NEW_JUDGE: judge}) as client:  # the server comes back
        done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", 42)
    assert len(judge.requests) == 41  # the item graded before the restart was not redone


@pytest.mark.parametrize("settings", [{"judge_asking": "per_question"}, {"judge_samples": 3}])
async def test_the_dry_run_counts_every_call_a_grading_takes(
    api_client: ClientFactory, tokens: Callable[..., Any], settings: dict[str, Any]
) -> None:
    """Per-question asking (9 calls a grading) or several samples: the estimate counted
    one call per submission. A diagnosis of line breaks is blank to the grader (no call),
    though SQL's trim() strips only spaces."""
    admin, submitter = await tokens("admin"), await tokens("submitter")
    truth = "[fault_spec] component=deployment/checkout; namespace=shop || OOM"
    backends = {"scripted:pass": ScriptedBackend.for_mode("pass")}
    async with api_client(backends=backends, **settings) as client:
        for diagnosis in ("\n\t\r\n", *(f"checkout ran out of memory ({n})" for n in range(3))):
            body = {"diagnosis": diagnosis, "ground_truth": truth}
            sent = await client.post(
                "/v1/submissions", params={"wait": 10}, json=body, headers=submitter
            )
            assert sent.status_code == 201, sent.text
        request = {"judge": "scripted:pass", "rubric": "sregym-rca"}
        dry = await client.post(
            "/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin
        )
        estimate = dry.json()["estimate"]
        job = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", 4), done
    assert estimate["empty_diagnoses"] == 1
    made = done["judge_calls"] + done["cache_hits"]
    assert made > 3  # the setting asks more than once a grading
    assert estimate["judge_calls"] == made, (estimate, done)
    assert not estimate["cache_checked"] and "calls" in estimate["cache_note"]


#: two members of a panel, each a scripted judge behind its own address
MEMBERS = ("openai:local@http://127.0.0.1:9/v1", "openai:cloud@http://127.0.0.1:10/v1")


def _members() -> dict[str, ScriptedBackend]:
    """Each member's judge, a model of its own: says yes to every question."""
    return {
        spec: ScriptedBackend([scripted_reply] * 40, model=name)
        for spec, name in zip(MEMBERS, ("local", "cloud"), strict=True)
    }


async def test_a_regrade_without_a_judge_is_graded_by_the_configured_panel(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine
) -> None:
    """A regrade job with a rubric and no judge is graded by the judge the service grades
    with: with ``SRE_JUDGE_PANEL`` set, the panel (not ``SRE_JUDGE_JUDGE``), so its flips
    are the rubric's alone."""
    agent, admin = await tokens("submitter"), await tokens("admin")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    panel = ",".join(MEMBERS)
    async with api_client(judge=MEMBERS[0], panel=panel, backends=_members()) as client:
        first = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        assert first.status_code == 201, first.text
        assert first.json()["judge"]["backend"] == "panel"
        job = await client.post(
            "/v1/regrade-jobs", json={"rubric": "sregym-rca", "mode": "shadow"}, headers=admin
        )
        assert job.status_code == 201, job.text
        done = await _finished(client, admin, job.json()["id"])
    assert done["state"] == "done", done
    store = Store(engine, key=session_key())
    views, _ = await store.gradings.page(filters=GradingFilter(current_only=False), limit=50)
    [regraded] = [v.grading for v in views if v.grading.regrade_job_id == job.json()["id"]]
    assert (regraded.judge_backend, done["judge"]) == ("panel", f"panel:{panel}")


async def test_a_filter_on_a_panel_selects_its_gradings_in_either_spelling(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine
) -> None:
    """A job's ``filter.judge`` names a panel as its judge spec, ``panel:A,B``, or as
    its gradings show backend and model, ``panel:A+B``; its members' base URLs are read
    as theirs, never as the panel's. Another panel is not selected."""
    store = Store(engine, key=session_key())
    without_urls = ["scripted:pass", "scripted:fail"]
    for members in (without_urls, list(MEMBERS)):
        await store.submissions.create(
            new_submission(), rubric=sregym_rubric(), judge_spec="panel:" + ",".join(members),
            judge_backend="panel", judge_model="+".join(members), actor="tok-1",
        )  # fmt: skip
        [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
        assert await store.queue.complete(claim.grading_id, "seed", graded_result())
    admin = await tokens("admin")
    filters = {
        "panel:scripted:pass,scripted:fail": 1,
        "panel:scripted:pass+scripted:fail": 1,
        "panel:" + ",".join(MEMBERS): 1,
        "panel:" + "+".join(MEMBERS): 1,
        "panel:scripted:pass": 0,
    }
    totals = {}
    async with api_client(start_workers=False) as client:
        for written in filters:
            body = {"filter": {"judge": written}, "judge": "scripted:pass", "dry_run": True}
            reply = await client.post("/v1/regrade-jobs", json=body, headers=admin)
            assert reply.is_success, reply.text
            totals[written] = reply.json()["total"]
    assert totals == filters


class _SlowJudge(ScriptedBackend):
    """Says no to everything, a second a request; ``started`` counts the requests as
    they arrive (``requests`` as they are answered)."""

    started = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        self.started += 1
        await asyncio.sleep(1.0)
        return await super().complete(request)


async def test_cancel_with_items_in_flight_keeps_account_of_every_judge_call(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """Items with the judge when a job is cancelled finish, as under a pause: their
    answers (and the judge calls they took) are kept and counted, and only the items
    not yet asked are cancelled; after a resume nothing is asked twice."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    judge = _SlowJudge(model="fail")
    async with api_client(backends={NEW_JUDGE: judge}, workers=2) as client:
        for n in range(3):
            body = {"diagnosis": f"{DIAGNOSIS} ({n})", "ground_truth": TRUTH}
            sent = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
            assert sent.status_code == 201, sent.text
        created = await client.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=admin)
        job = created.json()
        for _ in range(100):  # until two items are with the judge
            if judge.started == 2:
                break
            await asyncio.sleep(0.01)
        assert (judge.started, len(judge.requests)) == (2, 0)
        base = f"/v1/regrade-jobs/{job['id']}"
        cancelled = await client.post(f"{base}/cancel", headers=admin)
        assert cancelled.status_code == 200 and cancelled.json()["cancelled"] == 1
        await asyncio.sleep(1.5)  # the judge has answered both
        assert len(judge.requests) == 2
        kept = (await client.get(base, headers=admin)).json()
        assert (kept["state"], kept["done"], kept["judge_calls"]) == ("cancelled", 2, 2), kept
        assert (await client.post(f"{base}/resume", headers=admin)).status_code == 200
        done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", 3), done
    # every request the judge answered is a judge call of the job (stored and audited)
    assert done["judge_calls"] == len(judge.requests) == 3, (done, len(judge.requests))


async def test_a_jobs_tokens_count_the_replies_cut_at_their_budget(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A job's ``prompt_tokens`` and ``completion_tokens`` are what its judge read and
    wrote: a reply cut at its budget, asked again and never parsed, counts too."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    judge = CutOnceJudge("fail", prompt=1000, written=300)
    async with api_client(backends={NEW_JUDGE: judge}) as client:
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
        sent = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        assert sent.status_code == 201, sent.text
        created = await client.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=admin)
        assert created.status_code == 201, created.text
        done = await _finished(client, admin, created.json()["id"])
    assert (done["state"], done["done"], done["judge_calls"]) == ("done", 1, 1), done
    assert len(judge.requests) == 2 and judge.cut > 0  # cut once, asked again once
    assert (done["prompt_tokens"], done["completion_tokens"]) == (2000, judge.cut + 300), done


async def test_a_superseded_gradings_history_names_the_promotion_that_superseded_it(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A promote regrade changes the old grading (no longer current, its revision moves):
    its history shows the ``grading.promoted`` event that did, so it explains its ETag."""
    admin = await tokens("admin")
    backends = {NEW_JUDGE: ScriptedBackend.for_mode("fail")}
    async with api_client(backends=backends) as c:
        old = await graded(c, admin)
        before = (await c.get(f"/v1/gradings/{old['id']}", headers=admin)).json()["revision"]
        job = await c.post(
            "/v1/regrade-jobs",
            json={"judge": NEW_JUDGE, "mode": "promote", "filter": {}},
            headers=admin,
        )
        assert job.status_code == 201, job.text
        done = await _finished(c, admin, job.json()["id"])
        assert done["state"] == "done" and done["done"] == 1, done
        now = (await c.get(f"/v1/gradings/{old['id']}", headers=admin)).json()
        history = (await c.get(f"/v1/gradings/{old['id']}/history", headers=admin)).json()
    assert now["revision"] > before
    events = [e["event"] for e in history["events"]]
    assert events[-1] == "grading.promoted", events


async def test_a_regrade_items_history_holds_the_job_events_that_wrote_it(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine
) -> None:
    """A regrade item is written by its job's events: ``regrade_job.created`` makes it,
    ``regrade_job.cancelled`` and ``regrade_job.resumed`` set it aside and back. Its
    history shows them, so a cancelled item says what cancelled it; of the digests such
    an event carries for all the job's items, it shows the item's own only."""
    submitter, admin, adjudicator = (
        await tokens("submitter"),
        await tokens("admin"),
        await tokens("adjudicator"),
    )
    async with api_client() as c:
        await graded(c, submitter)
        await graded(c, submitter, "the cart pod is out of memory")
    backends = {NEW_JUDGE: ScriptedBackend(model="fail")}
    async with api_client(backends=backends, start_workers=False) as c:
        job = await c.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=admin)
        assert job.status_code == 201, job.text
        base = f"/v1/regrade-jobs/{job.json()['id']}"
        for action in ("cancel", "resume", "cancel"):
            moved = await c.post(f"{base}/{action}", headers=admin)
            assert moved.status_code == 200, moved.text
        store = Store(engine, key=session_key())
        views, _ = await store.gradings.page(filters=GradingFilter(current_only=False), limit=50)
        items = [v.grading for v in views if v.grading.regrade_job_id == job.json()["id"]]
        assert len(items) == 2 and {i.status for i in items} == {"cancelled"}
        reply = await c.get(f"/v1/gradings/{items[0].id}/history", headers=adjudicator)
        assert reply.status_code == 200, reply.text
    job_events = [e for e in reply.json()["events"] if e["event"].startswith("regrade_job.")]
    assert [e["event"] for e in job_events] == [
        "regrade_job.created",
        "regrade_job.cancelled",
        "regrade_job.resumed",
        "regrade_job.cancelled",
    ]
    assert all(list(e["payload"]["covers"]) == [items[0].id] for e in job_events)


async def test_a_grading_says_whether_it_is_current_what_replaced_it_and_its_job(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """After a promote regrade the old grading reads ``is_current: false`` and names the
    grading that replaced it; the new one names its regrade job. An export with
    superseded gradings tells the two apart the same way, line by line."""
    admin = await tokens("admin")
    backends = {NEW_JUDGE: ScriptedBackend.for_mode("fail")}
    async with api_client(backends=backends) as c:
        old = await graded(c, admin)
        assert (old["is_current"], old["superseded_by"], old["regrade_job_id"]) == (
            True, None, None,
        )  # fmt: skip
        job = await c.post(
            "/v1/regrade-jobs",
            json={"judge": NEW_JUDGE, "mode": "promote", "filter": {}},
            headers=admin,
        )
        done = await _finished(c, admin, job.json()["id"])
        assert done["state"] == "done", done
        now = (await c.get(f"/v1/gradings/{old['id']}", headers=admin)).json()
        [current] = (await c.get("/v1/gradings", headers=admin)).json()["items"]
        export = await c.get(
            "/v1/exports/gradings",
            params={"format": "jsonl", "include_superseded": "true"},
            headers=admin,
        )
    assert (now["is_current"], now["superseded_by"]) == (False, current["id"])
    assert (current["is_current"], current["regrade_job_id"]) == (True, job.json()["id"])
    assert export.status_code == 200, export.text
    lines = {g["id"]: g for g in map(json.loads, export.text.splitlines())}
    assert lines[old["id"]]["superseded_by"] == current["id"]
    assert lines[current["id"]]["is_current"] is True


async def test_a_promote_between_pages_leaves_no_submission_out_of_the_list(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A client reads the current gradings page by page, passing ``next_cursor`` back.
    A promote regrade that finishes between two pages replaces a grading the client has
    not reached yet: the new grading takes the old one's place in the list, so every
    submission is listed once (``GET /v1/gradings``: newest first, stable under
    inserts). Each grading still shows its own ``created_at``."""
    admin = await tokens("admin")
    backends = {NEW_JUDGE: ScriptedBackend.for_mode("fail")}
    async with api_client(backends=backends) as c:
        made = {}
        for agent in ("old", "mid", "new"):
            body = {"diagnosis": f"{agent}: {DIAGNOSIS}", "ground_truth": TRUTH, "agent": agent}
            answer = await c.post("/v1/submissions?wait=10", json=body, headers=admin)
            assert answer.status_code == 201, answer.text
            made[agent] = answer.json()
            await asyncio.sleep(0.01)
        first = (await c.get("/v1/gradings?limit=1", headers=admin)).json()
        seen = first["items"]
        assert [g["submission"]["agent"] for g in seen] == ["new"]
        request = {"judge": NEW_JUDGE, "mode": "promote", "filter": {"agent": "old"}}
        job = await c.post("/v1/regrade-jobs", json=request, headers=admin)
        assert job.status_code == 201, job.text
        assert (await _finished(c, admin, job.json()["id"]))["state"] == "done"
        cursor = first["next_cursor"]
        while cursor:
            page = await c.get("/v1/gradings", params={"limit": 1, "cursor": cursor}, headers=admin)
            assert page.status_code == 200, page.text
            seen += page.json()["items"]
            cursor = page.json()["next_cursor"]
    assert [g["submission"]["agent"] for g in seen] == ["new", "mid", "old"]
    promoted = seen[-1]
    assert promoted["id"] != made["old"]["id"] and promoted["regrade_job_id"] == job.json()["id"]
    assert promoted["created_at"] > made["new"]["created_at"]  # made by the job, listed last


async def test_a_credential_in_the_filters_judge_is_masked_in_the_audit_log(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine
) -> None:
    """A job that selects the gradings of a judge whose base URL carries a key
    (``filter.judge``, matched against the gradings' own spec) keeps that key out of the
    audit log, which is kept for ever, as its API answer does."""
    secret = "s3cret-filter-key"
    admin, submitter = await tokens("admin"), await tokens("submitter")
    graded_judge = f"openai:m@http://proxy.example/v1?api_key={secret}"
    async with api_client() as client:
        await graded(client, submitter)
        body = {"judge": "scripted:fail", "filter": {"judge": graded_judge}}
        job = await client.post("/v1/regrade-jobs", json=body, headers=admin)
        assert job.status_code == 201, job.text
        assert secret not in job.text
    with engine.connect() as connection:
        [payload] = connection.execute(
            text("SELECT payload FROM audit_log WHERE event = 'regrade_job.created'")
        ).scalars()
    written = payload if isinstance(payload, str) else json.dumps(payload)
    assert secret not in written and "api_key=***" in written, written


async def test_a_regrade_with_only_a_new_judge_keeps_each_submissions_rubric(
    api_client: ClientFactory, tokens: Callable[..., Any], tmp_path: Path
) -> None:
    """A submission graded with a rubric its sender asked for by name (``ops-mini``) and
    regraded, promoted, by a job that names only a new judge ("what flips with this
    judge?") is graded again with ``ops-mini``, not the service's default rubric: the
    job's ``rubric`` is null (each item keeps its submission's), and the new current
    grading answers ``ops-mini``'s questions."""
    admin = await tokens("admin")
    backends = {NEW_JUDGE: ScriptedBackend(model="fail")}
    async with api_client(rubric_dir=rubric_dir_with_ops_mini(tmp_path), backends=backends) as c:
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "rubric": "ops-mini"}
        first = (await c.post("/v1/submissions?wait=10", json=body, headers=admin)).json()
        assert first["rubric"]["id"] == "ops-mini"
        request = {"judge": NEW_JUDGE, "mode": "promote"}
        job = (await c.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        assert job["rubric"] is None, job
        assert [r["id"] for r in job["estimate"]["rubrics"]] == ["ops-mini"]
        assert (await _finished(c, admin, job["id"]))["state"] == "done"
        listed = (await c.get("/v1/gradings", headers=admin)).json()["items"]
    [current] = [g for g in listed if g["submission_id"] == first["submission_id"]]
    assert current["id"] != first["id"] and current["regrade_job_id"] == job["id"]
    assert current["rubric"] == first["rubric"]
    assert [a["question_id"] for a in current["answers"]] == [
        "where.1",
        "where.2",
        "what.1",
        "what.2",
    ]


async def test_a_latest_ground_truth_regrade_keeps_each_submissions_rubric(
    api_client: ClientFactory, tokens: Callable[..., Any], tmp_path: Path
) -> None:
    """``"ground_truth": "latest"`` alone, without a new rubric or judge, regrades a
    submission graded with ``ops-mini`` against its scenario's fixed ground truth, with
    ``ops-mini`` still."""
    admin = await tokens("admin")
    async with api_client(rubric_dir=rubric_dir_with_ops_mini(tmp_path)) as c:
        scenario = {"id": "hotel/user-port", "ground_truth": TRUTH}
        made = await c.post("/v1/scenarios", json=scenario, headers=admin)
        assert made.status_code == 201, made.text
        body = {"diagnosis": DIAGNOSIS, "scenario_id": "hotel/user-port", "rubric": "ops-mini"}
        first = (await c.post("/v1/submissions?wait=10", json=body, headers=admin)).json()
        assert first["rubric"]["id"] == "ops-mini"
        etag = (await c.get("/v1/scenarios/hotel/user-port", headers=admin)).headers["etag"]
        fixed = {"ground_truth": TRUTH.replace("hotel ||", "hotel-reservation ||")}
        put = await c.put(
            "/v1/scenarios/hotel/user-port", json=fixed, headers={**admin, "If-Match": etag}
        )
        assert put.status_code == 200, put.text
        request = {"ground_truth": "latest", "mode": "promote"}
        job = (await c.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        assert (await _finished(c, admin, job["id"]))["state"] == "done"
        listed = (await c.get("/v1/gradings", headers=admin)).json()["items"]
    [current] = [g for g in listed if g["submission_id"] == first["submission_id"]]
    assert current["id"] != first["id"] and current["scenario_version"] == 2
    assert current["rubric"] == first["rubric"]


async def test_the_dry_run_of_a_job_naming_no_rubric_counts_each_submissions_rubric(
    api_client: ClientFactory, tokens: Callable[..., Any], tmp_path: Path
) -> None:
    """A dry run that names no rubric counts each submission with the rubric it keeps:
    ``estimate.rubrics`` says how many each grades, and the prompts of a submission kept
    on ``ops-mini`` (four questions) are smaller than those of the default rubric's nine."""
    admin = await tokens("admin")
    async with api_client(rubric_dir=rubric_dir_with_ops_mini(tmp_path)) as c:
        for rubric in ("ops-mini", "sregym-rca"):
            body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "rubric": rubric}
            answer = await c.post("/v1/submissions?wait=10", json=body, headers=admin)
            assert answer.status_code == 201, answer.text
        estimates = {}
        for named in (None, "sregym-rca"):
            request = {"judge": NEW_JUDGE, "dry_run": True, "rubric": named}
            job = await c.post("/v1/regrade-jobs", json=request, headers=admin)
            assert job.status_code == 200, job.text
            assert (job.json()["rubric"] is None) == (named is None), job.text
            estimates[named] = job.json()["estimate"]
    kept, default = estimates[None], estimates["sregym-rca"]
    assert {r["id"]: r["submissions"] for r in kept["rubrics"]} == {"ops-mini": 1, "sregym-rca": 1}
    assert [r["submissions"] for r in default["rubrics"]] == [2]
    assert kept["submissions"] == default["submissions"] == 2
    assert kept["judge_calls"] == default["judge_calls"] == 2
    assert 0 < kept["prompt_tokens"] < default["prompt_tokens"]


async def _only_item_id(engine: Engine, job_id: str) -> str:
    store = Store(engine, key=session_key())
    views, _ = await store.gradings.page(filters=GradingFilter(current_only=False), limit=50)
    items = [v.grading for v in views if v.grading.regrade_job_id == job_id]
    assert len(items) == 1
    return items[0].id


async def test_cancelling_and_resuming_a_job_moves_its_items_etag(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine
) -> None:
    """Cancel turns a pending regrade item into ``status: cancelled`` and resume back
    into ``pending``: each is a change the grading object shows, so its revision (the
    ETag ``If-Match`` names) moves with it."""
    submitter, admin = await tokens("submitter"), await tokens("admin")
    async with api_client() as c:
        await graded(c, submitter)
    backends = {NEW_JUDGE: ScriptedBackend(model="fail")}
    async with api_client(backends=backends, start_workers=False) as c:
        job = await c.post("/v1/regrade-jobs", json={"judge": NEW_JUDGE}, headers=admin)
        assert job.status_code == 201, job.text
        base = f"/v1/regrade-jobs/{job.json()['id']}"
        item = await _only_item_id(engine, job.json()["id"])
        before = await c.get(f"/v1/gradings/{item}", headers=admin)
        assert before.json()["status"] == "pending"
        assert (await c.post(f"{base}/cancel", headers=admin)).status_code == 200
        cancelled = await c.get(f"/v1/gradings/{item}", headers=admin)
        assert cancelled.json()["status"] == "cancelled"
        assert cancelled.headers["etag"] != before.headers["etag"], (
            "status pending -> cancelled, ETag unchanged",
            before.headers["etag"],
        )
        assert (await c.post(f"{base}/resume", headers=admin)).status_code == 200
        resumed = await c.get(f"/v1/gradings/{item}", headers=admin)
        assert resumed.json()["status"] == "pending"
        assert resumed.headers["etag"] != cancelled.headers["etag"]
