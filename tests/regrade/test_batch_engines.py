"""Regrades through batch engines: the offline exchange and the OpenAI Batch API.

The judge is the real ``openai`` client: its chat completions go to a real local judge
server (``tests.support.judge_server``: asked only for what a batch did not answer), its
files and batches to respx routes in the Batch API's recorded shapes
(``tests.support.batch_api``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import respx
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.regrade import batch_engine
from api.regrade.batch_queries import MAX_RETRY_SECONDS, BatchQueries, retry_wait
from judge.backends.openai import OpenAIBackend
from judge.batch import CheckedResults, parse_custom_id
from storage import JudgeCallRecord, Store
from storage.regrade.batch_tables import RegradeBatchRequestRecord, RegradeEngineRecord
from tests.api.conftest import ClientFactory
from tests.support.app_client import AppClient
from tests.support.batch_api import FakeBatchAPI, chat_completion
from tests.support.gradings import add_many
from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import JudgeServer, running_judge_server, sregym_reply
from tests.support.keys import session_key
from tests.web.conftest import sign_in

pytestmark = pytest.mark.postgres

MODEL = "judge-m"
ITEMS = 6
REPLY = sregym_reply({"D1-Q1", "D1-Q2", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q2", "D3-Q3"})


@pytest.fixture
def results_read_on_loop(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each results file read: whether it was read and checked on an event loop (a
    file of 10,000 replies takes about a second: it must not hold up the graders)."""
    noted: list[bool] = []
    real = batch_engine.check_results

    def check(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            noted.append(True)
        except RuntimeError:
            noted.append(False)
        return real(*args, **kwargs)

    monkeypatch.setattr(batch_engine, "check_results", check)
    return noted


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    """The live judge: asked only for what a batch did not answer."""
    with running_judge_server(default=REPLY) as server:
        yield server


def _spec(server: JudgeServer) -> str:
    return f"openai:{MODEL}@{server.openai_url}"


def _backends(server: JudgeServer) -> dict[str, Any]:
    return {_spec(server): OpenAIBackend(MODEL, base_url=server.openai_url, api_key="sk-test")}


async def _gradings(engine: Engine, n: int = ITEMS) -> None:
    store = Store(engine, key=session_key())
    for i in range(n):  # distinct diagnoses: distinct prompts, no cache hit among them
        await add_many(store, {"fail": 1}, diagnosis=f"checkout ran out of memory (run {i})")


async def _finished(client: AppClient, admin: dict[str, str], job_id: str) -> Any:
    for _ in range(600):
        body = (await client.get(f"/v1/regrade-jobs/{job_id}", headers=admin)).json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"job still {body['state']}: {body}")


def _calls(engine: Engine, job_id: str) -> list[Any]:
    from storage import GradingRecord

    with engine.connect() as connection:
        return list(
            connection.execute(
                select(JudgeCallRecord.grading_id, JudgeCallRecord.via, JudgeCallRecord.cached)
                .join(GradingRecord, GradingRecord.id == JudgeCallRecord.grading_id)
                .where(GradingRecord.regrade_job_id == job_id)
            )
        )


def _result_line(request: dict[str, Any], text: str, *, model: str | None = None) -> str:
    completion = chat_completion(model or request["body"]["model"], text)
    return json.dumps(
        {
            "id": f"vllm-{request['custom_id']}",
            "custom_id": request["custom_id"],
            "response": {"status_code": 200, "request_id": "r", "body": completion},
            "error": None,
        }
    )


async def _start(client: AppClient, admin: dict[str, str], body: dict[str, Any]) -> Any:
    reply = await client.post("/v1/regrade-jobs", json=body, headers=admin)
    assert reply.status_code == 201, reply.text
    return reply.json()


async def _requests(client: AppClient, admin: dict[str, str], job_id: str) -> list[Any]:
    reply = await client.get(f"/v1/regrade-jobs/{job_id}/batch-requests", headers=admin)
    assert reply.status_code == 200, reply.text
    return [json.loads(line) for line in reply.text.splitlines()]


async def _post_results(client: AppClient, admin: dict[str, str], job_id: str, text: str) -> Any:
    return await client.post(
        f"/v1/regrade-jobs/{job_id}/batch-results",
        content=text.encode(),
        headers={**admin, "Content-Type": "application/jsonl"},
    )


async def test_offline_exchange_grades_each_item_once_and_a_second_import_stores_nothing(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
    results_read_on_loop: list[bool],
) -> None:
    await _gradings(engine)
    admin = await tokens("admin")
    body = {"judge": _spec(judge_server), "engine": "offline"}
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, body)
        assert job["engine"] == "offline" and job["total"] == ITEMS
        lines = await _requests(client, admin, job["id"])
        assert len(lines) == ITEMS
        for line in lines:
            assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
            assert line["body"]["model"] == MODEL and "stream" not in line["body"]
            assert parse_custom_id(line["custom_id"]).call == 0
        waiting = (await client.get(f"/v1/regrade-jobs/{job['id']}", headers=admin)).json()
        assert waiting["state"] == "queued" and waiting["batch"]["state"] == "waiting"
        assert waiting["batch"]["requests"] == ITEMS
        await sign_in(client, admin)  # the job's page says where the exchange stands
        page = (await client.get(f"/regrades/{job['id']}")).text
        shown = page.split('data-testid="batch-engine"', 1)[1].split("</p>", 1)[0]
        assert "offline exchange" in shown and f"{ITEMS} requests written" in shown
        assert f"sre-judge regrade results {job['id']} results.jsonl" in shown

        results = "\n".join(_result_line(line, REPLY) for line in lines) + "\n"
        first = await _post_results(client, admin, job["id"], results)
        assert first.status_code == 200, first.text
        assert (first.json()["answered"], first.json()["refused"]) == (ITEMS, 0)
        done = await _finished(client, admin, job["id"])
        assert (done["state"], done["done"], done["failed"]) == ("done", ITEMS, 0)
        assert done["batch"]["completed"] == ITEMS
        assert done["batch"]["prompt_tokens"] == 500 * ITEMS
        page = (await client.get(f"/regrades/{job['id']}")).text
        shown = page.split('data-testid="batch-engine"', 1)[1].split("</p>", 1)[0]
        assert f"{ITEMS} answered · 0 failed" in shown and "regrade results" not in shown

        again = await _post_results(client, admin, job["id"], results)
        assert again.status_code == 200, again.text
        assert (again.json()["answered"], again.json()["duplicates"]) == (0, ITEMS)
    assert results_read_on_loop == [False, False]  # both files read in a worker thread
    assert judge_server.requests == []  # nothing was asked live
    calls = _calls(engine, job["id"])
    assert len(calls) == ITEMS and len({c.grading_id for c in calls}) == ITEMS
    batch_id = first.json()["batch_id"]
    assert {c.via for c in calls} == {f"batch {batch_id}"} and not any(c.cached for c in calls)
    store = Store(engine, key=session_key())
    events = [
        e for e in await store.gradings.history(calls[0].grading_id) if e.event == "judge.call"
    ]
    assert [(e.payload["origin"], e.payload["via"]) for e in events] == [
        ("batch", f"batch {batch_id}")
    ]


#: a reply to one question asked on its own (per-question asking)
QUESTION_REPLY = json.dumps({"reasoning": "r", "evidence": "", "answer": "no", "confidence": 0.9})


async def test_per_question_asking_sends_every_question_in_the_batch_and_grades_from_it(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """With per-question asking, each item's nine questions are nine calls a live
    grading makes whatever the replies are: all nine go in the requests file, and the
    grading answers each question from its own reply, asking the judge nothing live."""
    items = 2
    await _gradings(engine, items)
    admin = await tokens("admin")
    body = {"judge": _spec(judge_server), "engine": "offline"}
    async with api_client(backends=_backends(judge_server), judge_asking="per_question") as client:
        job = await _start(client, admin, body)
        lines = await _requests(client, admin, job["id"])
        ids = [parse_custom_id(line["custom_id"]) for line in lines]
        assert len(lines) == 9 * items, sorted(ids)
        for grading in {cid.grading_id for cid in ids}:
            assert sorted((c.call, c.sample) for c in ids if c.grading_id == grading) == [
                (call, 0) for call in range(9)
            ]
        results = "\n".join(_result_line(line, QUESTION_REPLY) for line in lines) + "\n"
        posted = await _post_results(client, admin, job["id"], results)
        assert posted.status_code == 200, posted.text
        assert (posted.json()["answered"], posted.json()["refused"]) == (9 * items, 0)
        done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"], done["failed"]) == ("done", items, 0)
    assert judge_server.requests == []  # every question answered from the batch
    calls = _calls(engine, job["id"])
    assert len(calls) == 9 * items
    assert {c.via for c in calls} == {f"batch {posted.json()['batch_id']}"}


async def test_offline_results_are_checked_and_what_is_refused_or_failed_is_asked_live(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    await _gradings(engine)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        lines = await _requests(client, admin, job["id"])
        good = [_result_line(line, REPLY) for line in lines[2:]]

        broken = await _post_results(client, admin, job["id"], "\n".join([*good, "{not json"]))
        assert broken.status_code == 422, broken.text
        assert broken.headers["content-type"].startswith("application/problem+json")
        assert broken.json()["errors"][0]["field"] == "line"
        # the requests file itself, sent back as results: no line of it is a result
        requests = await client.get(f"/v1/regrade-jobs/{job['id']}/batch-requests", headers=admin)
        mixed_up = await _post_results(client, admin, job["id"], requests.text)
        assert mixed_up.status_code == 422, mixed_up.text
        assert mixed_up.json()["errors"][0]["field"] == "response"
        with engine.connect() as connection:
            statuses = connection.execute(select(RegradeBatchRequestRecord.status)).scalars()
            assert set(statuses) == {"rendered"}  # nothing stored

        unknown = dict(lines[0], custom_id=f"rg-{'0' * 32}-c0-s0")
        failed = {
            "id": "x",
            "custom_id": lines[1]["custom_id"],
            "response": {"status_code": 500, "request_id": "r", "body": {"error": "boom"}},
            "error": None,
        }
        text = "\n".join(
            [
                *good,
                good[0],  # the same custom id twice in one file
                _result_line(unknown, REPLY),
                # another model whose name starts with the one asked: not a dated snapshot
                _result_line(lines[0], REPLY, model=f"{MODEL}-large"),
                json.dumps(failed),
            ]
        )
        report = (await _post_results(client, admin, job["id"], text)).json()
        assert (report["answered"], report["failed"], report["refused"]) == (ITEMS - 2, 1, 3)
        reasons = " | ".join(r["reason"] for r in report["refusals"])
        assert "twice" in reasons and "no request" in reasons and f"{MODEL}-large" in reasons
        done = await _finished(client, admin, job["id"])
        assert (done["done"], done["failed"]) == (ITEMS, 0)
        # a reply for a request already asked live comes too late: 409, nothing kept
        late = await _post_results(client, admin, job["id"], _result_line(lines[1], REPLY))
        assert late.status_code == 409, late.text
        assert "no more results" in late.json()["detail"]
        with engine.connect() as connection:
            kept = select(RegradeBatchRequestRecord.status).where(
                RegradeBatchRequestRecord.custom_id == lines[1]["custom_id"]
            )
            assert connection.execute(kept).scalar_one() == "failed"

        asked_live = len(judge_server.requests)
        live_job = await _start(client, admin, {"judge": _spec(judge_server)})
        await _finished(client, admin, live_job["id"])
        refused = await client.get(
            f"/v1/regrade-jobs/{live_job['id']}/batch-requests", headers=admin
        )
        assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "engine"
        assert (
            await client.get("/v1/regrade-jobs/nope/batch-requests", headers=admin)
        ).status_code == 404
    # the refused (model) and the failed request were asked live; the others not
    assert asked_live == 2
    vias = [c.via for c in _calls(engine, job["id"])]
    assert vias.count(None) == 2 and len(vias) == ITEMS
    with engine.connect() as connection:  # batch replies are cached as live ones are
        kept = select(func.count()).where(col(JudgeCallRecord.cache_key).is_not(None))
        cached = connection.execute(kept).scalar()
    assert cached is not None and cached >= ITEMS
    vias = [c.via for c in _calls(engine, job["id"])]
    assert vias.count(None) == 2 and len(vias) == ITEMS


async def test_importing_the_same_offline_file_again_uses_no_retry_round(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """A results file imported again keeps nothing: the job keeps waiting for a file
    with the open requests, it does not use up its rounds and go to the live judge."""
    await _gradings(engine)
    admin = await tokens("admin")
    body = {"judge": _spec(judge_server), "engine": "offline", "engine_retry": "batch"}
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, body)
        lines = await _requests(client, admin, job["id"])
        partial = "\n".join(_result_line(line, REPLY) for line in lines[2:]) + "\n"
        first = (await _post_results(client, admin, job["id"], partial)).json()
        assert (first["answered"], first["state"]) == (ITEMS - 2, "waiting")
        for _ in range(3):  # one past the three rounds a job has
            again = (await _post_results(client, admin, job["id"], partial)).json()
            assert (again["answered"], again["duplicates"]) == (0, ITEMS - 2)
            assert again["state"] == "waiting"
        shown = (await client.get(f"/v1/regrade-jobs/{job['id']}", headers=admin)).json()
        assert shown["batch"]["state"] == "waiting" and shown["batch"]["round"] == 1
        rest = await _requests(client, admin, job["id"])
        assert [line["custom_id"] for line in rest] == [line["custom_id"] for line in lines[:2]]
        last = "\n".join(_result_line(line, REPLY) for line in rest) + "\n"
        assert (await _post_results(client, admin, job["id"], last)).json()["answered"] == 2
        done = await _finished(client, admin, job["id"])
        assert (done["state"], done["done"]) == ("done", ITEMS)
    assert judge_server.requests == []  # every reply came from a file


def _failed_line(request: dict[str, Any], result_id: str) -> str:
    """A result line saying the engine could not answer ``request``."""
    return json.dumps(
        {
            "id": result_id,
            "custom_id": request["custom_id"],
            "response": {"status_code": 500, "request_id": "r", "body": {"error": "boom"}},
            "error": None,
        }
    )


async def test_the_same_offline_file_with_a_failed_result_imported_again_is_all_duplicates(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """A results file holding a failed result, imported again, keeps nothing and uses no
    round: the failure it recorded is recognised by the result's ``id``. A failure of
    the same request in another result (a new run) is a new failure, using a round."""
    await _gradings(engine)
    admin = await tokens("admin")
    body = {"judge": _spec(judge_server), "engine": "offline", "engine_retry": "batch"}
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, body)
        lines = await _requests(client, admin, job["id"])
        good = [_result_line(line, REPLY) for line in lines[1:]]
        text = "\n".join([*good, _failed_line(lines[0], "vllm-run-1")])
        first = (await _post_results(client, admin, job["id"], text)).json()
        assert (first["answered"], first["failed"], first["state"]) == (ITEMS - 1, 1, "waiting")
        for _ in range(2):
            again = await _post_results(client, admin, job["id"], text)
            assert again.status_code == 200, again.text
            report = again.json()
            assert (report["answered"], report["failed"], report["duplicates"]) == (0, 0, ITEMS)
        shown = (await client.get(f"/v1/regrade-jobs/{job['id']}", headers=admin)).json()
        assert (shown["batch"]["state"], shown["batch"]["round"]) == ("waiting", 1), shown
        rerun = _failed_line(lines[0], "vllm-run-2")
        second = (await _post_results(client, admin, job["id"], rerun)).json()
        assert (second["failed"], second["duplicates"], second["state"]) == (1, 0, "waiting")
        shown = (await client.get(f"/v1/regrade-jobs/{job['id']}", headers=admin)).json()
        assert shown["batch"]["round"] == 2, shown


async def test_the_same_offline_file_with_a_failed_result_is_taken_again_after_it_went_live(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """With ``engine_retry: live`` the failed request is asked live after the first
    import; the same file sent again (a retried upload) is a 200 with every line a
    duplicate, not a 409 for a new result."""
    await _gradings(engine)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        lines = await _requests(client, admin, job["id"])
        good = [_result_line(line, REPLY) for line in lines[1:]]
        text = "\n".join([*good, _failed_line(lines[0], "vllm-run-1")])
        first = await _post_results(client, admin, job["id"], text)
        assert first.status_code == 200, first.text
        assert first.json()["state"] == "grading"
        await _finished(client, admin, job["id"])
        again = await _post_results(client, admin, job["id"], text)
        assert again.status_code == 200, again.text
        assert (again.json()["answered"], again.json()["duplicates"]) == (0, ITEMS)
    assert len(judge_server.requests) == 1  # the failed request, asked live once


async def test_a_cancelled_offline_job_writes_its_requests_once_resumed(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """The requests of an offline job cancelled before they were written are refused
    (409, nothing changed: its items are out); once resumed, the job writes every
    item's request and still waits for the results file."""
    await _gradings(engine)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server), start_workers=False) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        base = f"/v1/regrade-jobs/{job['id']}"
        assert (await client.post(f"{base}/cancel", headers=admin)).status_code == 200
        refused = await client.get(f"{base}/batch-requests", headers=admin)
        assert refused.status_code == 409, refused.text
        assert "cancelled" in refused.json()["detail"]
        assert (await client.post(f"{base}/resume", headers=admin)).status_code == 200
        shown = (await client.get(base, headers=admin)).json()
        assert (shown["batch"]["state"], shown["batch"]["requests"]) == ("rendering", 0)
        assert len(await _requests(client, admin, job["id"])) == ITEMS
        shown = (await client.get(base, headers=admin)).json()
        assert shown["batch"]["state"] == "waiting", shown


async def test_an_offline_job_that_takes_no_more_results_offers_no_requests(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """Once what was open went to the live judge (``engine_retry: live``, a partial
    file), the requests file is refused (409 naming why), as their results would be."""
    await _gradings(engine)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        lines = await _requests(client, admin, job["id"])
        partial = "\n".join(_result_line(line, REPLY) for line in lines[2:]) + "\n"
        taken = (await _post_results(client, admin, job["id"], partial)).json()
        assert taken["state"] == "grading"
        await _finished(client, admin, job["id"])
        offered = await client.get(f"/v1/regrade-jobs/{job['id']}/batch-requests", headers=admin)
        assert offered.status_code == 409, offered.text
        assert "no more results (its engine is grading)" in offered.json()["detail"]


async def test_the_document_lists_the_409_of_both_offline_exchange_routes(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
) -> None:
    """Both routes of the offline exchange answer 409 (results before the requests are
    written, requests of a cancelled job) and the OpenAPI document lists it on each, so
    generated clients and status-code checks expect it."""
    await _gradings(engine, 2)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server), start_workers=False) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        base = f"/v1/regrade-jobs/{job['id']}"
        early = await _post_results(client, admin, job["id"], "{}\n")
        assert (await client.post(f"{base}/cancel", headers=admin)).status_code == 200
        refused = await client.get(f"{base}/batch-requests", headers=admin)
        document = (await client.get("/schema/openapi.json")).json()
    assert (early.status_code, refused.status_code) == (409, 409), (early.text, refused.text)
    paths = document["paths"]
    results = paths["/v1/regrade-jobs/{job_id}/batch-results"]["post"]["responses"]
    requests = paths["/v1/regrade-jobs/{job_id}/batch-requests"]["get"]["responses"]
    assert "409" in results, sorted(results)
    assert "409" in requests, sorted(requests)
    assert not judge_server.requests


def _batch_api(server: JudgeServer) -> tuple[respx.MockRouter, FakeBatchAPI]:
    api = FakeBatchAPI(server.openai_url)
    router = respx.mock(assert_all_called=False)
    api.routes(router)
    router.route().pass_through()  # chat completions: the real local judge
    return router, api


async def _until(predicate: Callable[[], bool], seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("waited in vain")


BATCH = {"regrade_batch_poll_seconds": 0.05}


async def _batch_setup(
    engine: Engine, tokens: Callable[..., Any], judge_server: JudgeServer
) -> tuple[dict[str, str], respx.MockRouter, FakeBatchAPI]:
    """Gradings to regrade, an admin's token, and a fake Batch API before the judge."""
    await _gradings(engine)
    return await tokens("admin"), *_batch_api(judge_server)


def _batch_service(api_client: ClientFactory, judge_server: JudgeServer) -> Any:
    """The service with the judge's backend, polling batches every 50 ms."""
    return api_client(backends=_backends(judge_server), **BATCH)


async def _start_batch(client: AppClient, admin: dict[str, str], judge_server: JudgeServer) -> Any:
    """A regrade job of every grading through the Batch API."""
    return await _start(client, admin, {"judge": _spec(judge_server), "engine": "batch"})


@pytest.mark.parametrize(
    ("status", "fail", "leave_out", "live"),
    [
        ("completed", 0, 0, 0),
        ("completed", 2, 0, 2),  # partially failed: the error file's requests go live
        ("expired", 0, 3, 3),  # the completed part is used, the rest asked live
        ("cancelled", 1, 2, 3),
        ("failed", 0, ITEMS, ITEMS),
    ],
)
async def test_batch_api_ends_completed_partial_expired_cancelled_or_failed(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
    results_read_on_loop: list[bool],
    status: str,
    fail: int,
    leave_out: int,
    live: int,
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start_batch(client, admin, judge_server)
            await _until(lambda: bool(api.batches))
            [batch_id] = api.batches
            assert api.batches[batch_id]["metadata"]["regrade_job"] == job["id"]
            ids = [r["custom_id"] for r in api.requests_of(batch_id)]
            for _ in range(200):  # the batch's ids are stored once it is created
                running = (await client.get(f"/v1/regrade-jobs/{job['id']}", headers=admin)).json()
                if running["batch"]["state"] == "running":
                    break
                await asyncio.sleep(0.05)
            assert running["batch"]["state"] == "running" and running["batch"]["submitted"] == ITEMS
            api.finish(
                batch_id,
                status,
                lambda body: REPLY,
                fail=set(ids[:fail]),
                leave_out=set(ids[fail : fail + leave_out]),
            )
            done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"], done["failed"]) == ("done", ITEMS, 0)
    assert done["batch"]["batches"][0]["state"] == status
    assert done["batch"]["completed"] == ITEMS - fail - leave_out
    assert len(judge_server.requests) == live
    vias = [c.via for c in _calls(engine, job["id"])]
    assert len(vias) == ITEMS and vias.count(f"batch {batch_id}") == ITEMS - live
    assert (api.uploads, api.creates) == (1, 1)
    assert results_read_on_loop == [False]  # the batch's files read in a worker thread


async def test_failed_requests_go_in_a_new_batch_with_retry_batch(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    body = {"judge": _spec(judge_server), "engine": "batch", "engine_retry": "batch"}
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start(client, admin, body)
            await _until(lambda: len(api.batches) == 1)
            ids = [r["custom_id"] for r in api.requests_of("batch_1")]
            api.finish("batch_1", "expired", lambda b: REPLY, fail={ids[0]}, leave_out={ids[1]})
            await _until(lambda: len(api.batches) == 2)
            assert sorted(r["custom_id"] for r in api.requests_of("batch_2")) == sorted(ids[:2])
            api.finish("batch_2", "completed", lambda b: REPLY)
            done = await _finished(client, admin, job["id"])
    assert done["done"] == ITEMS and judge_server.requests == []
    assert [b["state"] for b in done["batch"]["batches"]] == ["expired", "completed"]
    vias = sorted(c.via for c in _calls(engine, job["id"]))
    assert vias.count("batch batch_2") == 2 and vias.count("batch batch_1") == ITEMS - 2


async def test_a_batch_imported_by_another_runner_keeps_nothing_and_sends_nothing_again(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    """Each process's runner polls every batch under way. One that saw a batch ended
    while another runner imported it and sent its failed request in the next batch keeps
    nothing of it, whether it reads the batch's files after that import (it reads none)
    or read them before: the next batch keeps its request, the engine stays ``running``,
    and no third batch sends the same request again (paid twice, a round used up)."""
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    body = {"judge": _spec(judge_server), "engine": "batch", "engine_retry": "batch"}
    with router:
        async with _batch_service(api_client, judge_server) as client:
            services = client.app.state.services
            job = await _start(client, admin, body)
            await _until(lambda: len(api.batches) == 1)
            ids = [r["custom_id"] for r in api.requests_of("batch_1")]
            api.finish("batch_1", "completed", lambda b: REPLY, fail={ids[0]})
            await _until(lambda: len(api.batches) == 2)  # imported; ids[0] sent again
            await _until(lambda: _engine_row(engine, job["id"]).state == "running")
            queries = BatchQueries(services.store.db)
            first, second = await queries.batches(job["id"])
            remote_client = await batch_engine._batch_client(services, _spec(judge_server))
            try:  # a runner that saw batch_1 ended before the import
                remote = await remote_client.batches.retrieve("batch_1")
                late = await batch_engine._import_remote(
                    services, remote_client, job["id"], first.id, remote, "batch-other"
                )
            finally:
                await remote_client.close()
            # one that had read batch_1's files before the import, keeping them now
            stale = CheckedResults(failures={ids[0]: "server_error"}, failed_by={ids[0]: "r1"})
            report = await queries.import_results(
                job["id"],
                stale,
                actor="batch-other",
                batch_id=first.id,
                engine_kind="batch",
                sent=ids,
                batch_state="completed",
            )
            await asyncio.sleep(0.5)  # the runners' next rounds (every 50 ms)
            state = _engine_row(engine, job["id"]).state
            with engine.connect() as connection:
                row = connection.execute(
                    select(
                        RegradeBatchRequestRecord.status, RegradeBatchRequestRecord.batch_id
                    ).where(RegradeBatchRequestRecord.custom_id == ids[0])
                ).one()
            batches_sent = len(api.batches)
    assert late is None
    assert (report.failed, report.missing, report.duplicates) == (0, 0, 1)
    assert (report.state, state, batches_sent) == ("running", "running", 2)
    assert tuple(row) == ("submitted", second.id)


async def test_a_restarted_service_resumes_polling_the_stored_batch(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start_batch(client, admin, judge_server)
            await _until(lambda: api.retrieves > 0)  # submitted and polled once
        api.finish("batch_1", "completed", lambda body: REPLY)
        # a new runtime: its runner finds the stored batch, polls it and imports it
        async with _batch_service(api_client, judge_server) as client:
            done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", ITEMS)
    assert (api.uploads, api.creates) == (1, 1)  # never submitted twice
    assert judge_server.requests == []
    assert {c.via for c in _calls(engine, job["id"])} == {"batch batch_1"}


async def test_a_batch_found_again_after_a_cut_short_submission_is_imported_once_it_ended(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    judge_server: JudgeServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A submission cut short after the Batch API made the batch (its id not stored) is
    found again by its ``metadata.sre_judge_batch`` on the next try, not sent twice;
    a batch that has ended meanwhile has its results imported and the job is graded."""
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    store_ids = BatchQueries.update_batch
    cut: list[str] = []

    async def stopped(self: BatchQueries, batch_id: str, **values: Any) -> Any:
        if values.get("remote_id") and not cut:  # the process stops before storing it
            cut.append(values["remote_id"])
            api.finish(values["remote_id"], "completed", lambda body: REPLY)  # ends meanwhile
            raise ConnectionError("cut short")
        return await store_ids(self, batch_id, **values)

    monkeypatch.setattr(BatchQueries, "update_batch", stopped)
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start_batch(client, admin, judge_server)
            done = await _finished(client, admin, job["id"])
    assert cut == ["batch_1"]
    assert (done["state"], done["done"]) == ("done", ITEMS)
    assert (api.uploads, api.creates) == (1, 1)
    assert judge_server.requests == []
    assert {c.via for c in _calls(engine, job["id"])} == {"batch batch_1"}


async def test_the_dry_run_puts_the_batch_price_beside_the_live_one_and_bad_engines_are_422(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    await _gradings(engine)
    admin = await tokens("admin")
    prices = {"judge_price_prompt": 2.5, "judge_price_completion": 10.0}
    async with api_client(
        backends=_backends(judge_server), start_workers=False, **prices
    ) as client:
        body = {"judge": _spec(judge_server), "engine": "batch", "dry_run": True}
        dry = (await client.post("/v1/regrade-jobs", json=body, headers=admin)).json()
        cost = dry["estimate"]["cost_usd"]
        assert cost["live"] > 0 and cost["batch"] == pytest.approx(cost["live"] / 2, abs=1e-4)
        for bad, field in [
            ({"engine": "gpu"}, "engine"),
            ({"engine_retry": "never"}, "engine_retry"),
            ({"judge": "scripted:pass", "engine": "offline"}, "engine"),
        ]:
            reply = await client.post(
                "/v1/regrade-jobs", json={"judge": _spec(judge_server), **bad}, headers=admin
            )
            assert reply.status_code == 422, reply.text
            assert any(field in e["field"] for e in reply.json()["errors"]), reply.json()


async def test_a_cancelled_batch_job_rests_and_a_resumed_one_goes_on(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start_batch(client, admin, judge_server)
            await _until(lambda: api.retrieves > 0)
            base = f"/v1/regrade-jobs/{job['id']}"
            cancelled = (await client.post(f"{base}/cancel", headers=admin)).json()
            assert (cancelled["state"], cancelled["cancelled"]) == ("cancelled", ITEMS)
            # the job object GET gives, its engine with it (it read as a live job's)
            assert cancelled["engine"] == "batch" and cancelled["batch"] is not None
            api.finish("batch_1", "completed", lambda body: REPLY)
            await asyncio.sleep(0.3)  # a poll begun before the cancel ends
            polls = api.retrieves
            await asyncio.sleep(0.5)
            assert api.retrieves == polls  # a cancelled job's batch is not polled
            resumed = (await client.post(f"{base}/resume", headers=admin)).json()
            assert resumed["state"] in ("queued", "running") and resumed["engine"] == "batch"
            done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", ITEMS)
    assert judge_server.requests == [] and (api.uploads, api.creates) == (1, 1)


async def test_a_step_that_keeps_failing_is_tried_after_longer_and_longer_waits(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    database_url: str,
    judge_server: JudgeServer,
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    api.refusing = True  # the Batch API refuses the file, every time
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start_batch(client, admin, judge_server)
            url = f"/v1/regrade-jobs/{job['id']}"
            await asyncio.sleep(1)
            # waits of 0.05, 0.1, 0.2, 0.4 s...: about 5 tries in a second, not 20
            assert 3 <= api.uploads <= 7, api.uploads
            batch = (await client.get(url, headers=admin)).json()["batch"]
            assert batch["failures"] >= 3 and batch["retry_at"] is not None, batch
            row = _engine_row(engine, job["id"])
            wait = (row.retry_at - row.updated_at).total_seconds()
            assert wait == pytest.approx(0.05 * 2 ** (row.failures - 1)), (wait, row.failures)
            assert "file refused" in batch["error"] and batch["state"] == "submitting"
            # written, and in a batch of ours, but the Batch API has none of them
            assert (batch["requests"], batch["submitted"]) == (ITEMS, 0), batch
            await sign_in(client, admin)
            page = (await client.get(f"/regrades/{job['id']}")).text
            assert 'data-testid="batch-error"' in page and "times in a row; next try" in page
            env = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE": "scripted:pass"}
            status = cli_in_process("regrade", "status", job["id"], "--format", "table", env=env)
            assert "last step failed (" in status.stdout and "file refused" in status.stdout
            api.refusing = False  # the Batch API takes the file again: the job goes on
            await _until(lambda: bool(api.batches))
            api.finish("batch_1", "completed", lambda body: REPLY)
            done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", ITEMS)
    assert (done["batch"]["failures"], done["batch"]["retry_at"], done["batch"]["error"]) == (
        0,
        None,
        None,
    )


async def test_a_restarted_service_tries_a_failed_step_at_once(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    api.refusing = True
    with router:
        async with _batch_service(api_client, judge_server) as client:
            job = await _start_batch(client, admin, judge_server)
            await _until(lambda: api.uploads >= 2)
        with engine.begin() as connection:  # the next try an hour away
            connection.execute(
                update(RegradeEngineRecord)
                .where(RegradeEngineRecord.job_id == job["id"])
                .values(retry_at=datetime.now(UTC) + timedelta(hours=1))
            )
        api.refusing = False  # fixed (a new key, say) and restarted
        async with _batch_service(api_client, judge_server) as client:
            await _until(lambda: bool(api.batches), seconds=10)
            api.finish("batch_1", "completed", lambda body: REPLY)
            done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", ITEMS)


def test_the_wait_doubles_up_to_an_hour_whatever_the_count_of_failures() -> None:
    assert [retry_wait(n, 30) for n in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert retry_wait(7, 30) == 1920
    assert retry_wait(8, 30) == MAX_RETRY_SECONDS == 3600  # 30 s x 128 is past the hour
    # a step failing every hour for months: still an hour, never an overflow
    assert retry_wait(5_000, 30) == retry_wait(10**9, 0.05) == MAX_RETRY_SECONDS


async def test_resuming_a_job_tries_its_failed_step_at_once(
    api_client: ClientFactory, tokens: Callable[..., Any], engine: Engine, judge_server: JudgeServer
) -> None:
    admin, router, api = await _batch_setup(engine, tokens, judge_server)
    api.refusing = True
    slow = {"regrade_batch_poll_seconds": 60}  # a failed step waits a minute
    with router:
        async with api_client(backends=_backends(judge_server), **slow) as client:
            job = await _start_batch(client, admin, judge_server)
            await _until(lambda: api.uploads == 1)
            base = f"/v1/regrade-jobs/{job['id']}"
            await _until(lambda: bool(_engine_row(engine, job["id"]).retry_at))
            api.refusing = False  # mended; the admin cancels and resumes the job
            assert (await client.post(f"{base}/cancel", headers=admin)).status_code == 200
            assert (await client.post(f"{base}/resume", headers=admin)).status_code == 200
            await _until(lambda: bool(api.batches), seconds=10)  # not a minute later
    assert (api.uploads, api.creates) == (2, 1)


def _engine_row(engine: Engine, job_id: str) -> Any:
    with engine.connect() as connection:
        return connection.execute(
            select(RegradeEngineRecord).where(RegradeEngineRecord.job_id == job_id)
        ).one()
