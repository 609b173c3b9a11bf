"""The offline exchange end to end with a real model: llama.cpp plays the GPU fleet.

A grading is regraded live by SmolLM2-135M behind llama-cpp-python's OpenAI server, then
regraded again through the offline exchange: each line of the requests file is POSTed to
the same server's ``/v1/chat/completions`` (as ``vllm run-batch`` would run it) and its
reply written as a results line, the file imported. Every grading is graded exactly once,
each judge call audited, and the flip report is the live regrade's. One grading: each
generation takes one to three minutes on two cores; matching several results to their
gradings by custom id is checked against scripted servers
(``tests/regrade/test_batch_engines.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

from storage import GradingRecord, JudgeCallRecord, Store
from tests.api.conftest import ClientFactory
from tests.api.service.real_model.shared import DIAGNOSIS, TRUTH
from tests.support.app_client import AppClient
from tests.support.gradings import add_many
from tests.support.keys import session_key
from tests.support.llama_server import LlamaServer, missing_requirements, running_llama_server

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

ITEMS = 1  # each call is a real generation (one to three minutes on 2 cores)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The real model's server for this module."""
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)
    with running_llama_server(tmp_path_factory.mktemp("llama")) as server:
        yield server


async def _finished(client: AppClient, admin: dict[str, str], job_id: str) -> Any:
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        body = (await client.get(f"/v1/regrade-jobs/{job_id}", headers=admin)).json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        await asyncio.sleep(0.2)
    raise AssertionError(f"job still {body['state']}")


def _normal(value: Any) -> Any:
    """A flip report without what names the job or its new gradings."""
    if isinstance(value, dict):
        return {
            k: _normal(v) for k, v in value.items() if k != "job" and "grading" not in k.lower()
        }
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _forget_prompt(http: httpx.Client) -> None:
    """Leave the server with no prompt in common with the next request.

    llama.cpp reuses the evaluated prefix a request shares with the one before, and a
    prompt evaluated in one piece or in two gives slightly different logits: greedy
    answers of a small model can differ. The live regrade and each batch request are
    asked after this same short request, so both are evaluated alike."""
    http.post(
        "/chat/completions",
        json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
    ).raise_for_status()


def _run_batch(server: LlamaServer, lines: list[dict[str, Any]]) -> str:
    """What an offline batch runner writes: one result line per request line."""
    out = []
    with httpx.Client(base_url=server.base_url, timeout=600) as http:
        for n, line in enumerate(lines):
            _forget_prompt(http)
            reply = http.post("/chat/completions", json=line["body"])
            ok = reply.status_code == 200
            out.append(
                {
                    "id": f"batch-req-{n}",
                    "custom_id": line["custom_id"],
                    "response": {
                        "status_code": reply.status_code,
                        "request_id": f"req-{n}",
                        "body": reply.json(),
                    },
                    "error": None if ok else {"code": "server_error", "message": reply.text[:200]},
                }
            )
    return "".join(json.dumps(o) + "\n" for o in out)


async def test_offline_exchange_with_the_real_model_matches_the_live_regrade(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    llama_server: LlamaServer,
    db_backend: str,
) -> None:
    if db_backend != "sqlite":
        pytest.skip("one database is enough to drive the real model end to end")
    store = Store(engine, key=session_key())
    # the end-to-end test's case: SmolLM2 answers it in 650-700 tokens, against 800-1,250
    # for a checkout OOM with a one-word ground truth (about 35 s less under CI's load)
    for _ in range(ITEMS):
        await add_many(store, {"fail": 1}, diagnosis=DIAGNOSIS, ground_truth=TRUTH)
    admin = await tokens("admin")
    spec = f"openai:{llama_server.model}@{llama_server.base_url}"
    async with api_client(
        judge=spec,
        backends={},
        # SmolLM2 writes 650-700 tokens for this case (its other wordings up to 1,300): a
        # budget it is not cut at (a cut reply is asked again with a larger one)
        judge_max_tokens=2048,
        judge_max_attempts=2,
        judge_timeout=600,
        judge_first_token_seconds=600,
        judge_idle_seconds=120,
        judge_concurrency=1,  # the server answers one request at a time
        judge_context_tokens=llama_server.n_ctx,
        regrade_batch_poll_seconds=0.2,
    ) as client:
        with httpx.Client(base_url=llama_server.base_url, timeout=600) as http:
            _forget_prompt(http)
        live = (await client.post("/v1/regrade-jobs", json={"judge": spec}, headers=admin)).json()
        live = await _finished(client, admin, live["id"])
        assert live["done"] + live["failed"] == ITEMS
        with engine.begin() as connection:  # the offline regrade must ask the model again
            connection.execute(update(JudgeCallRecord).values(cache_key=None))

        body = {"judge": spec, "engine": "offline"}
        job = (await client.post("/v1/regrade-jobs", json=body, headers=admin)).json()
        reply = await client.get(f"/v1/regrade-jobs/{job['id']}/batch-requests", headers=admin)
        lines = [json.loads(line) for line in reply.text.splitlines()]
        assert len(lines) == ITEMS  # one call per grading (single asking)
        results = await asyncio.to_thread(_run_batch, llama_server, lines)
        imported = await client.post(
            f"/v1/regrade-jobs/{job['id']}/batch-results",
            content=results.encode(),
            headers={**admin, "Content-Type": "application/jsonl"},
        )
        assert imported.status_code == 200, imported.text
        assert imported.json()["answered"] == ITEMS and imported.json()["refused"] == 0
        done = await _finished(client, admin, job["id"])
        assert done["done"] + done["failed"] == ITEMS
        live_flips = (
            await client.get(f"/v1/regrade-jobs/{live['id']}/flips", headers=admin)
        ).json()
        batch_flips = (
            await client.get(f"/v1/regrade-jobs/{job['id']}/flips", headers=admin)
        ).json()
    assert _normal(batch_flips) == _normal(live_flips)

    with engine.connect() as connection:
        per_submission = connection.execute(
            select(GradingRecord.submission_id, func.count())
            .where(GradingRecord.regrade_job_id == job["id"])
            .group_by(GradingRecord.submission_id)
        ).all()
        assert len(per_submission) == ITEMS and {n for _, n in per_submission} == {1}
        calls = connection.execute(
            select(JudgeCallRecord.grading_id, JudgeCallRecord.id, JudgeCallRecord.via)
            .join(GradingRecord, GradingRecord.id == JudgeCallRecord.grading_id)
            .where(GradingRecord.regrade_job_id == job["id"])
        ).all()
    batch_id = imported.json()["batch_id"]
    # a reply cut at max_tokens is never parsed: it is asked again, live, with a larger
    # budget (as a live grading would); every other call is answered from the batch
    cut = sum(
        json.loads(line)["response"]["body"]["choices"][0]["finish_reason"] == "length"
        for line in results.splitlines()
    )
    assert sum(c.via == f"batch {batch_id}" for c in calls) == ITEMS - cut
    for grading_id in {c.grading_id for c in calls}:
        events = [e for e in await store.gradings.history(grading_id) if e.event == "judge.call"]
        mine = {c.id for c in calls if c.grading_id == grading_id}
        assert {e.payload["call_id"] for e in events} == mine
