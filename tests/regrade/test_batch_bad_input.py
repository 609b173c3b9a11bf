"""Bad input to the batch-engine and canary routes: a clear 4xx naming what is at fault,
and nothing stored (NUL characters, deep JSON, huge numbers, bytes that are not UTF-8, a
wrong media type), on both databases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from storage.regrade.batch_tables import RegradeBatchRequestRecord
from tests.api.conftest import ClientFactory
from tests.regrade.test_batch_engines import (
    ITEMS,
    REPLY,
    _backends,
    _finished,
    _gradings,
    _post_results,
    _requests,
    _result_line,
    _spec,
    _start,
    judge_server,
)

__all__ = ["judge_server"]

pytestmark = pytest.mark.postgres

DEEP = "[" * 100_000 + "]" * 100_000


def _field(reply: Any) -> str:
    """The field a problem+json answer names."""
    return str(reply.json()["errors"][0]["field"])


def _answered(engine: Engine) -> int:
    with engine.connect() as connection:
        status = col(RegradeBatchRequestRecord.status)
        query = select(func.count()).where(status.in_(("answered", "failed")))
        return int(connection.execute(query).scalar_one())


async def test_a_bad_results_file_is_refused_whole_and_stores_nothing(
    api_client: ClientFactory, tokens: Any, engine: Engine, judge_server: Any
) -> None:
    await _gradings(engine)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        lines = await _requests(client, admin, job["id"])
        good = [_result_line(line, REPLY) for line in lines]
        nul = good[0].replace('"custom_id": "', '"custom_id": "\\u0000', 1)
        huge = json.loads(good[1])
        huge["response"]["status_code"] = 10**400
        for bad in (
            nul,  # a NUL in an id: not a request of this job
            DEEP,  # deep JSON: a line that cannot be read
            json.dumps(huge),
            '{"custom_id": "rg-x", "response": 1e999999}',
            good[2].replace("judge-m", "judge-m\\u0000"),  # a NUL in the model's name
        ):
            reply = await _post_results(client, admin, job["id"], bad)
            assert reply.status_code == 422, reply.text[:300]
            assert reply.headers["content-type"].startswith("application/problem+json")
            assert _field(reply) in ("line", "status_code", "response", "file"), reply.text
        assert _answered(engine) == 0
        headers = {**admin, "Content-Type": "application/jsonl"}
        path = f"/v1/regrade-jobs/{job['id']}/batch-results"
        not_utf8 = await client.post(path, content=b"\xff\xfe{}", headers=headers)
        assert not_utf8.status_code == 422 and _field(not_utf8) == "body"
        wrong_type = await client.post(
            path, content="\n".join(good).encode(), headers={**admin, "Content-Type": "text/csv"}
        )
        assert wrong_type.status_code == 415 and _field(wrong_type) == "Content-Type"
        assert _answered(engine) == 0
        # the right file is taken after all that, whole
        taken = await _post_results(client, admin, job["id"], "\n".join(good))
        assert taken.json()["answered"] == ITEMS
        assert (await _finished(client, admin, job["id"]))["done"] == ITEMS


async def test_the_canary_routes_refuse_bad_input_and_run_nothing(
    api_client: ClientFactory, tokens: Any
) -> None:
    admin, ada = await tokens("admin"), await tokens("adjudicator", "Ada")
    async with api_client() as client:
        for body in ('{"judge": "ollama:x"}', '{"\\u0000": 1}', DEEP, '{"n": 1e999999}', "[]"):
            reply = await client.post(
                "/v1/judges/canary",
                content=body.encode(),
                headers={**admin, "Content-Type": "application/json"},
            )
            assert reply.status_code in (400, 422), (body[:40], reply.status_code, reply.text[:200])
            assert reply.headers["content-type"].startswith("application/problem+json")
        for query in ("limit=" + "9" * 400, "limit=0", "judge=a%00b", "judge=" + "x" * 600):
            reply = await client.get(f"/v1/judges/canary?{query}", headers=ada)
            assert reply.status_code in (400, 422), (query[:40], reply.status_code)
        listed = await client.get("/v1/judges/canary", headers=ada)
        assert listed.status_code == 200 and listed.json()["items"] == []


async def test_a_result_error_holding_a_nul_is_kept_without_it(
    api_client: ClientFactory, tokens: Any, engine: Engine, judge_server: Any
) -> None:
    """A result line reporting an error whose message holds a NUL is taken as any other
    failed result, its message kept without the NUL (no database stores one in text)."""
    await _gradings(engine)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        lines = await _requests(client, admin, job["id"])
        error = {"code": "server_error", "message": "upstream\u0000died"}
        line = json.dumps({"custom_id": lines[0]["custom_id"], "response": None, "error": error})
        reply = await _post_results(client, admin, job["id"], line)
    assert reply.status_code == 200, reply.text[:500]
    assert "\u0000" not in reply.text


async def test_a_custom_id_with_a_lone_surrogate_is_refused_and_the_rest_of_the_file_taken(
    api_client: ClientFactory, tokens: Any, engine: Engine, judge_server: Any
) -> None:
    """A result line whose custom_id holds a lone surrogate escape (``\\ud800``: valid
    JSON) names no request of the job: it is refused with its line and reason, the
    file's other results are kept, and the answer is a 200 that says so."""
    await _gradings(engine, 2)
    admin = await tokens("admin")
    async with api_client(backends=_backends(judge_server)) as client:
        job = await _start(client, admin, {"judge": _spec(judge_server), "engine": "offline"})
        lines = await _requests(client, admin, job["id"])
        odd = json.loads(_result_line(lines[1], REPLY))
        odd["custom_id"] = "rg-\ud800"
        bad = json.dumps(odd)  # ensure_ascii: the surrogate written as \ud800
        assert "\\ud800" in bad
        reply = await _post_results(
            client, admin, job["id"], f"{_result_line(lines[0], REPLY)}\n{bad}\n"
        )
    assert reply.status_code == 200, reply.text[:300]
    body = reply.json()
    assert (body["answered"], body["refused"], _answered(engine)) == (1, 1, 1)
    [refusal] = body["refusals"]
    assert (refusal["line"], refusal["reason"]) == (2, "no request of this job has it")
