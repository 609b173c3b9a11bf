"""A judge that is down or refuses its key: gradings wait, pending, and readiness says why."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import respx
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.grading.workers import GradingWorkers
from api.service.judge_status import judge_status, startup_message
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import OpenAIBackend
from judge.backends.scripted import ScriptedBackend
from judge.calls import ChatMessage, Completion, JudgeRequest
from judge.errors import JudgeAuthError, JudgeRateLimited, JudgeUnavailable
from judge.retry import complete_with_retries
from storage import GradingRecord, JudgeCallRecord
from storage.gradings import GradingReads
from tests.grading.test_internal_error import _metric
from tests.judge.backend_servers import (
    DIGEST,
    OLLAMA_BASE,
    OLLAMA_MODEL,
    OPENAI_BASE,
    OPENAI_MODEL,
    latin1_page,
    ollama_tags_reply,
    openai_error,
)
from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, first_set


async def test_a_judge_outage_keeps_submissions_pending_and_readyz_says_why(
    api_client: Any, tokens: Any
) -> None:
    headers = await tokens("submitter")
    down = ScriptedBackend(
        [JudgeUnavailable("connection refused") for _ in range(50)], model="down"
    )
    spec = "openai:down@http://127.0.0.1:9/v1"
    async with api_client(judge=spec, backends={spec: down}, judge_max_attempts=1) as client:
        response = await client.post(
            "/v1/submissions?wait=0.2",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=headers,
        )
        assert response.status_code == 202  # still pending once the wait is over
        grading = await first_set(client, response.headers["location"], headers, "pending_reason")
        assert grading["status"] == "pending"
        assert grading["pending_reason"].startswith("judge_unavailable")
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["judge"]["ok"] is False
        assert ready.json()["database"]["ok"] is True
        assert ready.json()["queue"]["pending"] == 1


async def test_readyz_and_serve_say_an_ollama_address_serving_a_latin1_page_does_not_answer(
    api_client: Any,
) -> None:
    """A router's or web UI's page in Latin-1 at the Ollama judge's address lists no
    models: ``/readyz`` answers 503 naming ``judge_unavailable`` and ``serve``'s start-up
    line says the judge did not answer."""
    spec = f"ollama:{OLLAMA_MODEL}@{OLLAMA_BASE}"
    with respx.mock(base_url=OLLAMA_BASE, assert_all_called=True) as router:
        router.get("/api/tags").mock(return_value=latin1_page())
        backend = OllamaBackend(OLLAMA_MODEL, base_url=OLLAMA_BASE)
        async with api_client(judge=spec, backends={spec: backend}, start_workers=False) as client:
            ready = await client.get("/readyz")
            status = await judge_status(client.app.state.services)
    assert ready.status_code == 503, ready.text
    assert ready.json()["judge"]["reason"] == "judge_unavailable"
    assert "did not answer (judge_unavailable)" in startup_message(status)


class _TrippingProbe(ScriptedBackend):
    """A judge whose client trips over the listing it was answered with."""

    async def probe(self) -> None:
        raise KeyError("models")


async def test_readyz_says_judge_unavailable_whatever_a_backends_probe_lets_through(
    api_client: Any,
) -> None:
    """A probe failing with anything but a judge error (a client tripping over an answer
    it never expected) is an unavailable judge, as for a judge call: ``/readyz`` answers
    503 naming it, never a 500."""
    spec = "openai:odd@http://127.0.0.1:9/v1"
    backend = _TrippingProbe.for_mode("pass")
    async with api_client(judge=spec, backends={spec: backend}, start_workers=False) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503, ready.text
    assert ready.json()["judge"]["reason"] == "judge_unavailable"


class _Switchable(ScriptedBackend):
    """A judge that answers (``pass``) and reports its model digest until it is taken
    down (``up = False``)."""

    up = True

    async def model_digest(self) -> str | None:
        return self.digest if self.up else None  # unreachable: none reported

    async def complete(self, request: JudgeRequest) -> Completion:
        if not self.up:
            raise JudgeUnavailable("connection refused")
        return await super().complete(request)

    async def probe(self) -> None:
        if not self.up:
            raise JudgeUnavailable("connection refused")


async def test_readyz_says_a_downed_judge_is_away_after_a_grading_answered_from_the_cache(
    api_client: Any, tokens: Any
) -> None:
    """A grading answered wholly from the judge cache never reaches the judge, so it says
    nothing of the judge's health: once the judge is down, ``/readyz`` keeps answering
    503 however many gradings the cache answers meanwhile."""
    spec = "scripted:pass"
    judge = _Switchable(model="pass", digest=DIGEST)  # its replies are cached
    agent = await tokens("submitter")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client(judge=spec, backends={spec: judge}, judge_max_attempts=1) as client:
        first = await client.post("/v1/submissions?wait=20", json=body, headers=agent)
        assert first.status_code == 201, first.text  # graded by the live judge: cached
        judge.up = False
        client.app.state.services.backends.health.clear()  # the last probe is stale
        down = await client.get("/readyz")
        assert down.status_code == 503, down.text
        again = await client.post("/v1/submissions?wait=20", json=body, headers=agent)
        assert again.status_code == 201, again.text  # answered from the cache alone
        after = await client.get("/readyz")
    assert after.status_code == 503, after.text
    assert after.json()["judge"]["ok"] is False


class _ListsButCannotAnswer(ScriptedBackend):
    """Its server lists its models (the probe passes); every chat call fails (HTTP 503)
    until it ``answers`` (then it passes every question)."""

    answers = False

    async def probe(self) -> None:
        return None

    async def complete(self, request: JudgeRequest) -> Completion:
        self.requests.append(request)
        if self.answers:
            return await ScriptedBackend.for_mode("pass").complete(request)
        raise JudgeUnavailable("openai-compatible server answered 503", status_code=503)


async def test_readyz_stays_not_ready_while_a_judge_that_lists_its_models_fails_every_call(
    api_client: Any, tokens: Any
) -> None:
    """A judge whose server lists its models but fails every completion (a proxy in front
    of a model server that is down; Ollama listing a model that does not fit in memory)
    keeps the grading pending, and ``/readyz`` keeps answering 503 after the probe's
    15 s have passed: a model listing does not clear the grading's failed call, only a
    later call that succeeds does (the 15 s are stood in for by making what the process
    learned stale; no retry comes meanwhile)."""
    spec = "openai:behind-proxy@http://127.0.0.1:9/v1"
    judge = _ListsButCannotAnswer(model="behind-proxy")
    agent = await tokens("submitter")
    async with api_client(judge=spec, backends={spec: judge}, judge_max_attempts=1) as client:
        response = await client.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=agent
        )
        location = response.headers["location"]
        waiting = await first_set(client, location, agent, "pending_reason")
        assert waiting["pending_reason"].startswith("judge_unavailable")
        first = await client.get("/readyz")
        assert first.status_code == 503, first.text
        _stale(client, spec)
        later = await client.get("/readyz")
        still = (await client.get(location, headers=agent)).json()
    assert still["status"] == "pending" and still["pending_reason"].startswith("judge_unavailable")
    assert len(judge.requests) == 1  # the judge was not asked again meanwhile
    assert later.status_code == 503, later.text
    assert later.json()["judge"]["ok"] is False


def _stale(client: Any, spec: str) -> None:
    """What the app's process last learned of the judge of ``spec`` is older than a
    probe's 15 s: the next readiness check probes it again."""
    health = client.app.state.services.backends.health
    health[spec].at = datetime.now(UTC) - timedelta(seconds=16)


def _age_judge_calls(engine: Engine, seconds: float) -> None:
    """Every stored judge call made ``seconds`` earlier than it was."""
    with engine.begin() as connection:
        rows = connection.execute(select(JudgeCallRecord.id, JudgeCallRecord.created_at)).all()
        for call_id, created_at in rows:
            connection.execute(
                update(JudgeCallRecord)
                .where(col(JudgeCallRecord.id) == call_id)
                .values(created_at=created_at - timedelta(seconds=seconds))
            )


async def test_a_failed_call_no_retry_followed_no_longer_outweighs_the_listing(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A failed judge call stands against the model listing only while a grading it
    deferred would have been asked again (the retry wait, and 15 s after it): with no
    call since, nothing waits on the judge (no worker asked again), and the listing
    decides again, so the service is not kept out of rotation for ever."""
    spec = "openai:behind-proxy@http://127.0.0.1:9/v1"
    judge = _ListsButCannotAnswer(model="behind-proxy")
    agent = await tokens("submitter")
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 60}
    async with api_client(judge=spec, backends={spec: judge}, **settings) as client:
        response = await client.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=agent
        )
        await first_set(client, response.headers["location"], agent, "pending_reason")
        _age_judge_calls(engine, 70)  # within 60 s + 15 s
        _stale(client, spec)
        within = await client.get("/readyz")
        _age_judge_calls(engine, 6)
        _stale(client, spec)
        past = await client.get("/readyz")
    assert within.json()["judge"]["ok"] is False
    assert past.json()["judge"]["ok"] is True, past.text


async def test_every_process_on_the_database_says_a_judge_whose_call_failed_does_not_answer(
    api_client: Any, tokens: Any
) -> None:
    """Processes sharing one database (``serve --processes N``, ``sre-judge worker`` on
    other machines) answer ``/readyz`` alike: after a grading's judge call failed in one
    process, another, whose own probe finds the judge listing its models, answers 503
    naming the failure; once a later grading's call succeeds, in whichever process, each
    answers 200."""
    spec = "openai:behind-proxy@http://127.0.0.1:9/v1"
    judge = _ListsButCannotAnswer(model="behind-proxy")
    probed = _ListsButCannotAnswer(model="behind-proxy")  # the other process's own client
    agent = await tokens("submitter")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 60}
    async with api_client(judge=spec, backends={spec: judge}, **settings) as grading:
        response = await grading.post("/v1/submissions", json=body, headers=agent)
        await first_set(grading, response.headers["location"], agent, "pending_reason")
        async with api_client(
            judge=spec, backends={spec: probed}, start_workers=False, **settings
        ) as other:
            failed = await other.get("/readyz")
            judge.answers = True  # the model server is back
            again = await grading.post("/v1/submissions?wait=20", json=body, headers=agent)
            assert again.status_code == 201, again.text
            recovered = await other.get("/readyz")
    assert failed.status_code == 503, failed.text
    assert failed.json()["judge"]["ok"] is False
    assert failed.json()["judge"]["reason"] == "judge_unavailable"
    assert probed.requests == []  # it asked the judge nothing: it read what was stored
    assert recovered.json()["judge"]["ok"] is True, recovered.text


async def test_a_refused_judge_key_keeps_gradings_pending_until_it_is_fixed(
    api_client: Any, tokens: Any
) -> None:
    headers, admin = await tokens("submitter"), await tokens("admin")
    refusing = [JudgeAuthError("openai answered 401: invalid api key", status_code=401)] * 2
    judge = ScriptedBackend([*refusing, sregym_reply(set(IDS), evidence="USER_PORT=9999")])
    spec = "openai:rotated@http://127.0.0.1:9/v1"
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 0.2}
    async with api_client(judge=spec, backends={spec: judge}, **settings) as client:
        response = await client.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=headers
        )
        waiting = await first_set(client, response.headers["location"], headers, "pending_reason")
        ready = (await client.get("/readyz")).json()
        as_admin = (await client.get("/readyz", headers=admin)).json()
        graded = await first_set(client, response.headers["location"], headers, "passed")
    assert waiting["status"] == "pending" and waiting["unscored_reason"] is None
    # a code and the kind of failure; what the judge answered stays with the judge call
    refused = "judge_auth_failed: judge refused the service's key (HTTP 401)"
    assert waiting["pending_reason"] == refused
    assert ready["judge"] == {
        "ok": False,
        "judge": "openai:rotated",
        "reason": "judge_auth_failed",
        "setting": "SRE_JUDGE_JUDGE",
    }
    assert as_admin["judge"]["address"] == "http://127.0.0.1:9/v1"
    assert graded["status"] == "graded" and graded["passed"] is True  # no regrade needed


async def test_a_judge_asking_to_wait_is_asked_again_only_once_its_wait_is_over(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retry-After is honoured: within the retry loop up to the loop's longest wait; a
    longer one ends the loop, and the grading, deferred, waits at least as long (it was
    deferred by SRE_JUDGE_JUDGE_RETRY_SECONDS, and the loop asked again after 60 s)."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def no_sleep(seconds: float, *args: Any, **kwargs: Any) -> None:
        waits.append(seconds)
        await real_sleep(0)

    request = JudgeRequest(messages=(ChatMessage(role="user", content="hi"),), reply_schema={})
    with monkeypatch.context() as patched:
        patched.setattr(asyncio, "sleep", no_sleep)
        soon = JudgeRateLimited("429: slow down", status_code=429, retry_after=30)
        _, attempts = await complete_with_retries(ScriptedBackend([soon, "{}"]), request)
        assert [a.outcome for a in attempts] == ["judge_rate_limited", "ok"] and waits[0] >= 30
        later = JudgeRateLimited("429: slow down", status_code=429, retry_after=120)
        with pytest.raises(JudgeRateLimited) as stopped:
            await complete_with_retries(ScriptedBackend([later, "{}"]), request)
        assert len(stopped.value.attempts) == 1  # not asked again before 120 s

    headers = await tokens("submitter")
    quota = [JudgeRateLimited("429: quota", status_code=429, retry_after=3600)] * 20
    spec = "openai:limited@http://127.0.0.1:9/v1"
    judge = ScriptedBackend(quota, model="limited")
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 1}
    async with api_client(judge=spec, backends={spec: judge}, **settings) as client:
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
        sent = await client.post("/v1/submissions", json=body, headers=headers)
        grading = await first_set(client, sent.headers["location"], headers, "pending_reason")
        assert grading["pending_reason"].startswith("judge_rate_limited")
    with engine.connect() as connection:
        query = select(GradingRecord.not_before).where(GradingRecord.id == grading["id"])
        not_before = connection.execute(query).scalar_one()
    assert (not_before - datetime.now(UTC)).total_seconds() > 3500


@pytest.mark.parametrize("retry_after", ["1e12", "1e400"], ids=["year-33000", "infinite"])
async def test_a_judge_asking_to_wait_for_ages_leaves_the_grading_rate_limited(
    api_client: Any, tokens: Any, engine: Engine, retry_after: str
) -> None:
    """A ``Retry-After`` beyond any date, or infinite, is no fault of the service: the
    grading waits, pending, at most a day (an infinite one says no wait, and is retried
    as any 429)."""
    headers = await tokens("submitter")
    spec = f"openai:{OPENAI_MODEL}@{OPENAI_BASE}"
    limited = openai_error(429, "rate limited", headers={"retry-after": retry_after})
    with respx.mock(base_url=OPENAI_BASE, assert_all_called=False) as router:
        router.post("/chat/completions").mock(return_value=limited)
        router.get("/models").mock(return_value=httpx.Response(200, json={"data": []}))
        backend = OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="sk-test")
        settings = {"judge_max_attempts": 1, "judge_retry_seconds": 1}
        async with api_client(judge=spec, backends={spec: backend}, **settings) as client:
            sent = await client.post(
                "/v1/submissions",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
                headers=headers,
            )
            grading = await first_set(client, sent.headers["location"], headers, "pending_reason")
    assert grading["status"] == "pending"
    assert grading["pending_reason"] == "judge_rate_limited: judge rate limited (HTTP 429)"
    with engine.connect() as connection:
        query = select(GradingRecord.not_before).where(GradingRecord.id == grading["id"])
        not_before = connection.execute(query).scalar_one()
    assert (not_before - datetime.now(UTC)).total_seconds() <= 86400


@pytest.mark.parametrize(
    ("retry_after", "least", "most"),
    [(1e12, 86000, 86400), (math.inf, 0, 5)],
    ids=["year-33000", "infinite"],
)
async def test_a_grading_waits_at_most_a_day_whatever_its_judge_asked(
    api_client: Any, tokens: Any, engine: Engine, retry_after: float, least: int, most: int
) -> None:
    """Whatever a backend reports: a wait past a day is taken as a day, one that is not
    finite as none (the grading is retried after SRE_JUDGE_JUDGE_RETRY_SECONDS)."""
    headers = await tokens("submitter")
    quota = [JudgeRateLimited("429: quota", status_code=429, retry_after=retry_after)] * 20
    spec = "openai:limited@http://127.0.0.1:9/v1"
    judge = ScriptedBackend(quota, model="limited")
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 1}
    async with api_client(judge=spec, backends={spec: judge}, **settings) as client:
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
        sent = await client.post("/v1/submissions", json=body, headers=headers)
        grading = await first_set(client, sent.headers["location"], headers, "pending_reason")
    assert grading["pending_reason"].startswith("judge_rate_limited")
    with engine.connect() as connection:
        query = select(GradingRecord.not_before).where(GradingRecord.id == grading["id"])
        not_before = connection.execute(query).scalar_one()
    assert least <= (not_before - datetime.now(UTC)).total_seconds() <= most


async def test_a_busy_ollama_answering_a_json_string_leaves_the_grading_pending(
    api_client: Any, tokens: Any
) -> None:
    """An overloaded Ollama behind a proxy answering 503 ``"overloaded"``: the judge is
    unavailable, so the grading waits (``judge_unavailable ... (HTTP 503)``), its judge
    call kept."""
    headers, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    spec = f"ollama:{OLLAMA_MODEL}@{OLLAMA_BASE}"
    with respx.mock(base_url=OLLAMA_BASE, assert_all_called=False) as router:
        router.post("/api/chat").mock(return_value=httpx.Response(503, json="overloaded"))
        router.get("/api/tags").mock(return_value=ollama_tags_reply((OLLAMA_MODEL, DIGEST)))
        backend = OllamaBackend(OLLAMA_MODEL, base_url=OLLAMA_BASE)
        settings = {"judge_max_attempts": 1}
        async with api_client(judge=spec, backends={spec: backend}, **settings) as client:
            sent = await client.post(
                "/v1/submissions",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
                headers=headers,
            )
            location = sent.headers["location"]
            grading = await first_set(client, location, headers, "pending_reason")
            history = await client.get(f"{location}/history", headers=adjudicator)
    assert grading["status"] == "pending"
    assert grading["pending_reason"] == "judge_unavailable: judge unreachable (HTTP 503)"
    assert "judge_unavailable" in history.text  # the failed call is on record


async def test_a_wait_on_a_grading_deferred_by_a_judge_outage_polls_instead_of_spinning(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge outage defers the grading (still pending) and wakes its waiters: a waiting
    request then goes on polling every 0.25 s, never re-reading the grading back to back
    for its whole wait (up to 300 s a request), which would load the database exactly
    while the judge is down."""
    reads = 0
    original = GradingReads.get

    async def counted(self: GradingReads, grading_id: str) -> Any:
        nonlocal reads
        reads += 1
        return await original(self, grading_id)

    monkeypatch.setattr(GradingReads, "get", counted)
    headers = await tokens("submitter")
    down = ScriptedBackend(
        [JudgeUnavailable("connection refused") for _ in range(50)], model="down"
    )
    spec = "openai:down@http://127.0.0.1:9/v1"
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 60}
    async with api_client(judge=spec, backends={spec: down}, **settings) as client:
        started = time.monotonic()
        response = await client.post(
            "/v1/submissions?wait=2",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=headers,
        )
        took = time.monotonic() - started
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "pending"
    assert took >= 1.9
    # polling every 0.25 s over 2 s is about 8 reads (a few more for wake-ups)
    assert reads <= 20, f"{reads} reads of the grading in a 2 s wait"


async def test_an_item_of_a_cancelled_regrade_job_meeting_a_judge_outage_is_cancelled(
    api_client: Any, tokens: Any
) -> None:
    """An item of a regrade job cancelled while its worker was with the judge, which turns
    out to be away, is cancelled when the worker gives it back, not kept pending: nothing
    retries it, and ``/metrics`` counts the judge call made but no grading deferred (nor a
    result discarded)."""
    agent, admin = await tokens("submitter"), await tokens("admin")
    async with api_client() as client:
        sent = await client.post(
            "/v1/submissions?wait=20",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        assert sent.status_code == 201, sent.text
    spec = "openai:down@http://127.0.0.1:9/v1"
    down = ScriptedBackend([JudgeUnavailable("connection refused") for _ in range(5)], model="down")
    settings = {"start_workers": False, "judge_max_attempts": 1}
    async with api_client(backends={spec: down}, **settings) as client:
        created = await client.post(
            "/v1/regrade-jobs", json={"judge": spec, "mode": "shadow"}, headers=admin
        )
        assert created.status_code == 201, created.text
        job = created.json()["id"]
        services = client.app.state.services
        [claim] = await services.store.queue.claim_pending(
            "w-1", limit=1, lease_seconds=60, regrade=True
        )
        cancelled = await client.post(f"/v1/regrade-jobs/{job}/cancel", headers=admin)
        assert cancelled.status_code == 200, cancelled.text
        workers = GradingWorkers(
            services, count=1, worker_id="w-1", metrics=client.app.state.metrics
        )
        await workers.process(claim)  # the judge is away: the worker gives the item back
        item = (await client.get(f"/v1/gradings/{claim.grading_id}", headers=admin)).json()
        scrape = (await client.get("/metrics", headers=admin)).text
    assert item["status"] == "cancelled"
    assert _metric(scrape, "sre_judge_judge_calls_total", outcome="judge_unavailable") == 1
    assert _metric(scrape, "sre_judge_gradings_deferred_total") == 0
    assert _metric(scrape, "sre_judge_grading_results_discarded_total") == 0
