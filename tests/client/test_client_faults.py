"""Faults the client rides out or reports (respx: the server's misbehaviour on demand).

Why this module is long: every fault is one promise (a server busy, away, silent or
refusing is retried, waited out or reported as the same errors, sync and async), and its
cases share the canned gradings, jobs and the silent server.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx
from sre_judge_client import (
    ApiError,
    AsyncClient,
    Client,
    GroundTruthConflict,
    InvalidRequest,
    Unavailable,
    async_client,
    idempotency_key,
)
from sre_judge_client.client import submit_and_wait
from sre_judge_client.errors import error_from_response

URL = "http://judge.test"


def _grading(status: str = "graded") -> dict[str, Any]:
    submission = {
        "id": "s1", "agent": None, "model": None, "scenario_id": "sc", "run_id": "r",
        "attempt": 1, "metadata": {}, "diagnosis": "d", "ground_truth": None,
        "created_at": "2026-12-01T00:00:00Z",
    }  # fmt: skip
    return {
        "id": "g1", "submission_id": "s1", "status": status, "unscored_reason": None,
        "detail": None, "rubric": {"id": "sregym-rca", "version": "v1"},
        "judge": {"backend": "scripted", "model": "pass"}, "answers": [], "dimensions": [],
        "yes_count": 9, "composite": 1.0, "passed": True, "judge_passed": True,
        "decisive": True, "needs_review": False, "review_reasons": [], "revision": 1,
        "created_at": "2026-12-01T00:00:00Z", "graded_at": None, "submission": submission,
    }  # fmt: skip


def _client(**kwargs: Any) -> Client:
    return Client(URL, "t0ken", max_retry_wait=5, **kwargs)


@respx.mock
def test_429_is_retried_after_the_servers_retry_after() -> None:
    route = respx.post(f"{URL}/v1/submissions").mock(
        side_effect=[
            httpx.Response(429, headers={"Retry-After": "1"}, json={"title": "Too many"}),
            httpx.Response(201, json=_grading()),
        ]
    )
    started = time.monotonic()
    grading = _client().submit("d", scenario_id="sc", run_id="r", attempt=1)
    assert grading.passed is True and route.call_count == 2
    assert time.monotonic() - started >= 0.9  # waited as told, not the 0.5 s backoff


@respx.mock
def test_503_and_dropped_connections_are_retried_with_the_same_idempotency_key() -> None:
    route = respx.post(f"{URL}/v1/submissions").mock(
        side_effect=[
            httpx.Response(503, headers={"Retry-After": "0"}),
            httpx.RemoteProtocolError("server disconnected"),
            httpx.Response(201, json=_grading()),
        ]
    )
    _client().submit("d", scenario_id="sc", run_id="r", attempt=1)
    keys = {call.request.headers["Idempotency-Key"] for call in route.calls}
    assert route.call_count == 3 and len(keys) == 1
    assert keys == {idempotency_key(scenario_id="sc", ground_truth=None, run_id="r", attempt=1)}


@respx.mock
def test_submit_and_wait_tries_an_unanswered_submission_again_only_within_its_wait() -> None:
    """A server that never answers the submission: it is sent again only while the
    wait lasts, so the call gives up (raising) within the wait, not after every retry's
    backoff (0.5 + 1 + 2 + 4 + 8 s)."""
    route = respx.post(f"{URL}/v1/submissions").mock(side_effect=httpx.ReadTimeout("silent"))
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        submit_and_wait(_client(), "d", wait=1, scenario_id="sc", run_id="r", attempt=1)
    # within the wait, give or take a loaded machine: never the 15.5 s of every backoff
    assert time.monotonic() - started < 4
    # waits of 0.25-0.5 s then 0.5-1 s (jittered): a third try may still start in time
    assert 1 <= route.call_count <= 3


@respx.mock
def test_submit_and_wait_without_a_wait_leaves_the_retries_to_the_client() -> None:
    route = respx.post(f"{URL}/v1/submissions").mock(
        side_effect=[
            httpx.Response(503, headers={"Retry-After": "1"}),
            httpx.Response(201, json=_grading()),
        ]
    )
    grading = submit_and_wait(_client(), "d", wait=0, scenario_id="sc", run_id="r", attempt=1)
    assert grading.passed is True and route.call_count == 2


@respx.mock
def test_submit_and_wait_keeps_to_its_wait_while_polling_an_unreachable_server() -> None:
    """The submission is answered at once with a pending grading, then the server goes
    away: the polls are retried only while the wait lasts, and the grading comes back
    pending, a handle for ``wait``, within the wait."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(202, json=_grading("pending"))
    )
    respx.get(f"{URL}/v1/gradings/g1").mock(side_effect=httpx.ConnectError("refused"))
    started = time.monotonic()
    grading = submit_and_wait(_client(), "d", wait=1, scenario_id="sc", run_id="r", attempt=1)
    assert grading.status == "pending" and grading.id == "g1"
    elapsed = time.monotonic() - started
    assert elapsed < 4, f"a 1 s wait took {elapsed:.1f} s"  # never every retry's backoff


@respx.mock
def test_submit_and_wait_returns_the_pending_handle_when_the_server_stays_busy() -> None:
    """The submission is stored (202, pending), then every look is answered 503 with a
    ``Retry-After`` longer than the client retries for and than the wait: the grading
    comes back pending, a handle for ``wait``, within the wait, never as an exception
    that loses the id of a stored submission."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(202, json=_grading("pending"))
    )
    respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(503, headers={"Retry-After": "120"}, json={"title": "Busy"})
    )
    started = time.monotonic()
    with _client() as judge:
        grading = submit_and_wait(judge, "d", wait=1, scenario_id="sc", run_id="r", attempt=1)
    assert grading.id == "g1" and grading.status == "pending"
    assert time.monotonic() - started < 4


@respx.mock
async def test_the_async_submit_and_wait_polls_an_early_answer_for_the_rest_of_its_wait() -> None:
    """``submit_and_wait`` of ``sre_judge_client.async_client`` is the sync helper awaited:
    a submission answered early (202, pending: a server draining for a restart) is polled
    for the rest of the wait and comes back graded."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(
            202, json=_grading("pending"), headers={"Location": "/v1/gradings/g1"}
        )
    )
    look = respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(200, json=_grading())
    )
    async with AsyncClient(URL, "t0ken", max_retry_wait=5) as judge:
        grading = await async_client.submit_and_wait(
            judge, "d", wait=5, scenario_id="sc", run_id="r", attempt=1
        )
    assert grading.status == "graded" and grading.passed is True and look.call_count == 1


@respx.mock
async def test_the_async_submit_and_wait_returns_the_pending_handle_when_busy() -> None:
    """As the sync helper: every look answered 503 past the wait gives the pending grading
    back within the wait, not an exception that loses the stored submission's id."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(202, json=_grading("pending"))
    )
    respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(503, headers={"Retry-After": "120"}, json={"title": "Busy"})
    )
    started = time.monotonic()
    async with AsyncClient(URL, "t0ken", max_retry_wait=5) as judge:
        grading = await async_client.submit_and_wait(
            judge, "d", wait=1, scenario_id="sc", run_id="r", attempt=1
        )
    assert grading.id == "g1" and grading.status == "pending"
    assert time.monotonic() - started < 4


@respx.mock
def test_submit_and_wait_returns_the_pending_handle_when_the_server_stays_away() -> None:
    """The submission is stored (202, pending), then the server goes away for a wait
    longer than the client's retries of one look (here 2 attempts, about half a second):
    the wait keeps looking until its end and the grading comes back pending."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(202, json=_grading("pending"))
    )
    respx.get(f"{URL}/v1/gradings/g1").mock(side_effect=httpx.ConnectError("refused"))
    with _client(retries=2) as judge:
        grading = submit_and_wait(judge, "d", wait=3, scenario_id="sc", run_id="r", attempt=1)
    assert grading.id == "g1" and grading.status == "pending"


@respx.mock
def test_submit_and_wait_keeps_to_its_wait_when_the_submission_is_retried() -> None:
    """The server is busy a moment (503, ``Retry-After: 1``), then takes the submission
    and holds the answer as long as ``?wait`` asks while the judge is slow: the retry
    asks for what is left of the wait, not the whole wait again, so the call returns
    pending within its wait."""
    held: list[float] = []

    def server(request: httpx.Request) -> httpx.Response:
        if not held:
            held.append(0.0)
            return httpx.Response(503, headers={"Retry-After": "1"}, json={"title": "Busy"})
        wait = float(request.url.params["wait"])
        held.append(wait)
        time.sleep(wait)  # still pending when the server's wait ends
        return httpx.Response(202, json=_grading("pending"))

    respx.post(f"{URL}/v1/submissions").mock(side_effect=server)
    respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(200, json=_grading("pending"))
    )
    with _client() as judge:
        started = time.monotonic()
        grading = submit_and_wait(judge, "d", wait=2, scenario_id="sc", run_id="r", attempt=1)
        took = time.monotonic() - started
    assert grading.status == "pending" and len(held) == 2
    assert 0 < held[1] <= 1.1 and took <= 2.5, (took, held)


@respx.mock
async def test_waiting_rides_out_a_server_away_or_busy_past_a_looks_retries() -> None:
    """A look that fails after its retries (one here) is no answer yet: the wait looks
    again, no sooner than the server's ``Retry-After``, and gets the grading."""
    route = respx.get(f"{URL}/v1/gradings/g1").mock(
        side_effect=[
            httpx.ConnectError("refused"),
            httpx.Response(503, headers={"Retry-After": "0.5"}, json={"title": "Busy"}),
            httpx.Response(200, json=_grading()),
        ]
    )
    async with AsyncClient(URL, "t0ken", retries=1, max_retry_wait=5) as judge:
        started = time.monotonic()
        grading = await judge.wait("g1", timeout=10)
        elapsed = time.monotonic() - started
    assert grading.status == "graded" and route.call_count == 3
    assert elapsed >= 0.5, f"looked again {elapsed:.2f} s in, before the Retry-After"


@respx.mock
def test_waiting_keeps_to_its_timeout_when_the_server_is_busy() -> None:
    """A server answering 503 with a ``Retry-After`` longer than the time left ends
    ``wait``, ``follow_regrade`` and ``imports.wait`` with ``TimeoutError`` in time,
    never after the retries' waits."""
    busy = httpx.Response(503, headers={"Retry-After": "5"}, json={"title": "Busy"})
    for path in ("gradings/g1", "regrade-jobs/j1", "imports/i1"):
        respx.get(f"{URL}/v1/{path}").mock(return_value=busy)
    started = time.monotonic()
    with _client() as judge:
        with pytest.raises(TimeoutError):
            judge.wait("g1", timeout=1)
        with pytest.raises(TimeoutError):
            list(judge.follow_regrade("j1", timeout=1))
        with pytest.raises(TimeoutError):
            judge.imports.wait("i1", timeout=1)
    elapsed = time.monotonic() - started
    assert elapsed < 4, f"three 1 s waits took {elapsed:.1f} s"


@respx.mock
async def test_the_async_client_keeps_to_its_timeout_when_the_server_is_busy() -> None:
    busy = httpx.Response(503, headers={"Retry-After": "5"}, json={"title": "Busy"})
    for path in ("gradings/g1", "regrade-jobs/j1", "imports/i1"):
        respx.get(f"{URL}/v1/{path}").mock(return_value=busy)
    started = time.monotonic()
    async with AsyncClient(URL, "t0ken", max_retry_wait=5) as judge:
        with pytest.raises(TimeoutError):
            await judge.wait("g1", timeout=1)
        with pytest.raises(TimeoutError):
            [job async for job in judge.follow_regrade("j1", timeout=1)]
        with pytest.raises(TimeoutError):
            await judge.imports.wait("i1", timeout=1)
    elapsed = time.monotonic() - started
    assert elapsed < 4, f"three 1 s waits took {elapsed:.1f} s"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """The URL of a server that accepts connections and reads requests but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_wait_keeps_to_its_timeout_when_the_server_never_answers(silent_server: str) -> None:
    """``wait(timeout=1)`` raises ``TimeoutError`` after about a second against a server
    that takes the request and never answers, however long the client's request timeout
    (here 6 s): no look is given longer than what is left of the wait."""
    judge = Client(silent_server, "t0ken", timeout=6)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        judge.wait("g1", timeout=1)
    elapsed = time.monotonic() - started
    judge.close()
    assert elapsed < 3, f"a 1 s wait took {elapsed:.1f} s"


async def test_the_async_client_keeps_to_its_timeout_when_the_server_never_answers(
    silent_server: str,
) -> None:
    async with AsyncClient(silent_server, "t0ken", timeout=6) as judge:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await judge.wait("g1", timeout=1)
        elapsed = time.monotonic() - started
    assert elapsed < 3, f"a 1 s wait took {elapsed:.1f} s"


def test_following_a_job_keeps_to_its_timeout_when_the_server_never_answers(
    silent_server: str,
) -> None:
    """``follow_regrade`` and ``imports.wait`` keep to their timeout as ``wait`` does."""
    with Client(silent_server, "t0ken", timeout=6) as judge:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            list(judge.follow_regrade("j1", timeout=1))
        with pytest.raises(TimeoutError):
            judge.imports.wait("i1", timeout=1)
        elapsed = time.monotonic() - started
    assert elapsed < 5, f"two 1 s follows took {elapsed:.1f} s"


@respx.mock
def test_a_dropped_override_is_not_sent_twice() -> None:
    route = respx.post(f"{URL}/v1/gradings/g1/overrides").mock(
        side_effect=httpx.RemoteProtocolError("server disconnected")
    )
    with pytest.raises(httpx.RemoteProtocolError):
        _client().override("g1", verdict="fail", reason="wrong", revision=1)
    assert route.call_count == 1
    assert route.calls[0].request.headers["If-Match"] == '"1"'


@respx.mock
def test_a_server_that_stays_busy_raises_unavailable_with_its_retry_after() -> None:
    route = respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(503, headers={"Retry-After": "0"}, json={"title": "Busy"})
    )
    with pytest.raises(Unavailable) as busy:
        _client(retries=3).get("g1")
    assert route.call_count == 3 and busy.value.status == 503 and busy.value.retry_after == 0


@respx.mock
def test_a_problem_becomes_an_exception_naming_the_field() -> None:
    problem = {
        "type": "about:blank", "title": "Invalid request", "status": 422,
        "detail": "attempt: must be >= 0",
        "errors": [{"field": "attempt", "message": "must be >= 0"}],
    }  # fmt: skip
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(
            422, json=problem, headers={"Content-Type": "application/problem+json"}
        )
    )
    with pytest.raises(InvalidRequest) as refused:
        _client().submit("d", scenario_id="sc", attempt=-1)
    assert refused.value.field == "attempt" and "attempt" in str(refused.value)


@respx.mock
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_an_api_error_naming_it_never_followed(status: int) -> None:
    """An ``http://`` URL of a server that redirects to ``https://``: the client does not
    follow (the token goes to the URL given only), and says so with the status and the
    ``Location``, instead of failing to read a grading out of the redirect."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(status, headers={"Location": "https://judge.test/v1/x"})
    )
    with pytest.raises(ApiError) as refused:
        _client().submit("d", scenario_id="sc")
    assert refused.value.status == status
    assert "https://judge.test/v1/x" in str(refused.value) and "redirect" in str(refused.value)


@respx.mock
async def test_the_async_client_raises_the_same_for_a_redirect() -> None:
    respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(301, headers={"Location": "https://judge.test/v1/gradings/g1"})
    )
    async with AsyncClient(URL, "t0ken") as judge:
        with pytest.raises(ApiError) as refused:
            await judge.get("g1")
    assert refused.value.status == 301


@respx.mock
def test_a_success_that_is_not_json_is_an_api_error() -> None:
    """``SRE_JUDGE_URL`` pointing at a proxy's sign-in page: an ``ApiError`` naming the
    status and content type, not a validation error of the grading model."""
    respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(
            200, headers={"Content-Type": "text/html"}, text="<html>Sign in</html>"
        )
    )
    with pytest.raises(ApiError) as refused:
        _client().get("g1")
    assert refused.value.status == 200 and "text/html" in str(refused.value)


@respx.mock
def test_a_success_that_is_not_a_grading_is_an_api_error() -> None:
    """A server of another version, or another service, behind the URL answers a
    success whose JSON is not a grading: an ``ApiError`` naming its status and the
    first field at fault, as for a success that is not JSON, not a validation error."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(201, json={"status": "ok", "queued": True})
    )
    with pytest.raises(ApiError) as refused:
        _client().submit("d", scenario_id="sc")
    assert refused.value.status == 201 and refused.value.title == "Not a grading"
    assert "id: Field required" in refused.value.detail


@respx.mock
async def test_the_async_client_raises_the_same_for_a_success_that_is_not_a_grading() -> None:
    respx.get(f"{URL}/v1/regrade-jobs/j1").mock(return_value=httpx.Response(200, json=[1, 2]))
    async with AsyncClient(URL, "t0ken") as judge:
        with pytest.raises(ApiError) as refused:
            await judge.regrade_job("j1")
    assert refused.value.status == 200 and refused.value.title == "Not a regrade job"


@respx.mock
def test_a_page_scenario_or_job_that_is_not_one_is_an_api_error() -> None:
    """Every call reads its answer as the grading is read: a success whose JSON is not
    the page, scenario or job asked for is an ``ApiError`` naming its status and the
    first field at fault, never a ``KeyError`` or a validation error."""
    respx.get(f"{URL}/v1/gradings").mock(
        return_value=httpx.Response(200, json={"results": [], "next": None})
    )
    respx.get(f"{URL}/v1/scenarios/hotel/user-port").mock(
        return_value=httpx.Response(200, json={"status": "ok"})
    )
    respx.get(f"{URL}/v1/imports/i1").mock(return_value=httpx.Response(200, json={"id": "i1"}))
    with _client() as judge:
        with pytest.raises(ApiError) as page:
            list(judge.list())
        with pytest.raises(ApiError) as scenario:
            judge.scenarios.get("hotel/user-port")
        with pytest.raises(ApiError) as job:
            judge.imports.wait("i1", timeout=5)
    assert (page.value.status, page.value.title) == (200, "Not a grading page")
    assert "items: Field required" in page.value.detail
    assert (scenario.value.status, scenario.value.title) == (200, "Not a scenario")
    assert (job.value.status, job.value.title) == (200, "Not an import job")


@respx.mock
async def test_the_async_client_raises_the_same_for_a_page_or_scenario_that_is_not_one() -> None:
    respx.get(f"{URL}/v1/gradings").mock(return_value=httpx.Response(200, json={"items": 1}))
    respx.get(f"{URL}/v1/scenarios").mock(return_value=httpx.Response(200, json=[]))
    async with AsyncClient(URL, "t0ken") as judge:
        with pytest.raises(ApiError) as page:
            _ = [g async for g in judge.list()]
        with pytest.raises(ApiError) as scenarios:
            _ = [s async for s in judge.scenarios.list()]
    assert (page.value.status, page.value.title) == (200, "Not a grading page")
    assert (scenarios.value.status, scenarios.value.title) == (200, "Not a scenario page")


@respx.mock
def test_a_bad_gateway_is_unavailable_and_not_sent_again() -> None:
    """A load balancer in front of a server that is restarting answers 502: the server is
    away (``Unavailable``, as for 503 and 504), and nothing says the request was not
    received, so it is not retried."""
    route = respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(502, text="<html>Bad Gateway</html>")
    )
    with pytest.raises(Unavailable) as away:
        _client().submit("d", scenario_id="sc")
    assert away.value.status == 502 and route.call_count == 1


@respx.mock
def test_a_gateway_blip_while_polling_does_not_end_the_wait() -> None:
    """A GET is safe to send again: a 502/504 of a proxy in front of a restarting
    server, while ``wait`` still has time, is ridden out as a dropped connection is."""
    route = respx.get(f"{URL}/v1/gradings/g1").mock(
        side_effect=[
            httpx.Response(504, text="<html>Gateway Timeout</html>"),
            httpx.Response(502, text="<html>Bad Gateway</html>"),
            httpx.Response(200, json=_grading()),
        ]
    )
    with Client(URL, "t0ken", max_retry_wait=1) as judge:
        grading = judge.wait("g1", timeout=10)
    assert grading.status == "graded" and route.call_count == 3


@respx.mock
async def test_the_async_client_retries_as_the_sync_one() -> None:
    route = respx.post(f"{URL}/v1/submissions").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.Response(202, json=_grading("pending"))]
    )
    async with AsyncClient(URL, "t0ken", max_retry_wait=1) as judge:
        handle = await judge.submit("d", ground_truth="truth", wait=5)
    assert handle.status == "pending" and route.call_count == 2
    assert route.calls[0].request.url.params["wait"] == "5"


def test_the_idempotency_key_is_derived_from_run_attempt_and_scenario() -> None:
    def key(**kw: Any) -> str:
        base = {"scenario_id": "sc", "ground_truth": None, "run_id": "r", "attempt": 1}
        return idempotency_key(**{**base, **kw})

    assert key() == key()
    assert len({key(), key(attempt=2), key(run_id="r2"), key(scenario_id="other")}) == 4
    assert key(scenario_id=None, ground_truth="a") != key(scenario_id=None, ground_truth="b")
    # a rubric named is another request (the service answers its key reused with 409);
    # the keys of calls naming none are what they were
    assert len({key(), key(rubric="lenient"), key(rubric="strict")}) == 3
    # so are two agents' or models' attempts under one run id and number
    agents = {key(agent="a"), key(agent="b"), key(model="m"), key(agent="a", model="m")}
    assert len(agents | {key()}) == 5 and key(agent="a") != key(rubric="a")
    assert key() == "sjc-" + hashlib.sha256(b'["sc",null,"r",1]').hexdigest()[:40]
    # without a run there is nothing to recognise a resubmission by: one key per call
    assert key(run_id=None) != key(run_id=None)


def test_an_idempotency_key_of_a_field_of_another_type_names_the_field() -> None:
    """A ground truth given as an object (a fault spec as a dict), or an attempt given as
    text, is a ``TypeError`` naming the field."""
    run: dict[str, Any] = {"scenario_id": None, "ground_truth": None, "run_id": "r"}
    with pytest.raises(TypeError, match="ground_truth must be a string"):
        idempotency_key(**{**run, "ground_truth": {"component": "geo"}}, attempt=1)
    with pytest.raises(TypeError, match="attempt must be an integer"):
        idempotency_key(**{**run, "scenario_id": "sc"}, attempt="1")


def test_url_and_token_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRE_JUDGE_URL", "http://elsewhere:9/")
    monkeypatch.setenv("SRE_JUDGE_TOKEN", "s3cret")
    with respx.mock:
        route = respx.get("http://elsewhere:9/v1/gradings/g1").mock(
            return_value=httpx.Response(200, json=_grading())
        )
        Client().get("g1")
    assert route.calls[0].request.headers["Authorization"] == "Bearer s3cret"


@respx.mock
def test_a_token_read_with_its_newline_is_sent_without_it() -> None:
    """A token read from a file or a mounted secret often ends with a newline: sent as
    is, the HTTP library refuses the header and its error quotes the token."""
    route = respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(200, json=_grading())
    )
    Client(URL, " s3cret\n").get("g1")
    assert route.calls[0].request.headers["Authorization"] == "Bearer s3cret"


def test_a_server_url_without_its_scheme_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="http://"):
        Client("127.0.0.1:8000", "t0ken")


def test_a_server_url_that_does_not_parse_is_refused_at_once() -> None:
    """A mistyped port is a ``ValueError`` naming it, which does not quote the token."""
    with pytest.raises(ValueError, match="80OO") as refused:
        Client("http://127.0.0.1:80OO", "s3cret")
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("make", [Client, AsyncClient])
def test_a_server_url_without_a_host_is_refused_at_once(make: type[Any]) -> None:
    """``http://:8000`` (a harness's ``http://$HOST:8000`` with ``HOST`` unset) names no
    server: a ``ValueError`` when the client is built, never a failed request later."""
    with pytest.raises(ValueError, match="names no host"):
        make("http://:8000", "t0ken")


@pytest.mark.parametrize("token", ["s3cr et", "s3cr\u00e9t", "s3cr\x00t"])
def test_a_token_no_header_can_carry_is_refused_without_quoting_it(token: str) -> None:
    with pytest.raises(ValueError, match="HTTP header") as refused:
        Client(URL, token)
    assert "s3cr" not in str(refused.value)


def _done_after(seconds: float) -> Any:
    """A server whose grading is pending until ``seconds`` after the first request."""
    start = time.monotonic()

    def handler(request: httpx.Request) -> httpx.Response:
        done = time.monotonic() - start > seconds
        return httpx.Response(200, json=_grading("graded" if done else "pending"))

    return handler


def test_waiting_polls_until_its_timeout_not_short_of_it() -> None:
    """The back-off's next step would pass the deadline at about 0.6 s: the wait sleeps
    to the deadline and looks once more there instead of giving up early."""
    with Client(URL, "t0ken", transport=httpx.MockTransport(_done_after(0.9))) as judge:
        assert judge.wait("g1", timeout=1.2, poll=5.0).status == "graded"
    with (
        Client(URL, "t0ken", transport=httpx.MockTransport(_done_after(60))) as judge,
        pytest.raises(TimeoutError),
    ):
        judge.wait("g1", timeout=0.3, poll=5.0)


async def test_the_async_client_waits_until_its_timeout_too() -> None:
    transport = httpx.MockTransport(_done_after(0.9))
    async with AsyncClient(URL, "t0ken", transport=transport) as judge:
        assert (await judge.wait("g1", timeout=1.2, poll=5.0)).status == "graded"


def _job_done_after(seconds: float, body: Callable[[bool], dict[str, Any]]) -> Any:
    """A server whose job runs until ``seconds`` after the first request."""
    start = time.monotonic()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body(time.monotonic() - start > seconds))

    return handler


def _regrade(done: bool) -> dict[str, Any]:
    return {"id": "j1", "state": "done" if done else "running", "total": 1, "done": int(done)}


def _import(done: bool) -> dict[str, Any]:
    return {
        "id": "i1", "kind": "jsonl", "archive": "x", "state": "done" if done else "running",
        "rubric": None, "strict": False, "total": 1, "done": 0, "report": {}, "errors": [],
        "size": 1, "sha256": "0" * 64, "attempts": 1, "created_by": "t",
        "created_at": "2026-12-01T00:00:00Z", "started_at": None, "finished_at": None,
        "error": None,
    }  # fmt: skip


def test_following_a_job_polls_until_its_timeout_not_short_of_it() -> None:
    """A poll that would pass the deadline: the follow sleeps to the deadline and looks
    once more there (it gave up at once, a poll short of its timeout)."""
    regrade = httpx.MockTransport(_job_done_after(0.9, _regrade))
    with Client(URL, "t0ken", transport=regrade) as judge:
        states = [j.state for j in judge.follow_regrade("j1", poll=5.0, timeout=1.2)]
    assert states[-1] == "done"
    imports = httpx.MockTransport(_job_done_after(0.9, _import))
    with Client(URL, "t0ken", transport=imports) as judge:
        assert judge.imports.wait("i1", poll=5.0, timeout=1.2).state == "done"
    never = httpx.MockTransport(_job_done_after(60, _regrade))
    with Client(URL, "t0ken", transport=never) as judge, pytest.raises(TimeoutError):
        list(judge.follow_regrade("j1", poll=5.0, timeout=0.3))


async def test_the_async_client_follows_a_job_until_its_timeout_too() -> None:
    regrade = httpx.MockTransport(_job_done_after(0.9, _regrade))
    async with AsyncClient(URL, "t0ken", transport=regrade) as judge:
        states = [j.state async for j in judge.follow_regrade("j1", poll=5.0, timeout=1.2)]
    assert states[-1] == "done"
    imports = httpx.MockTransport(_job_done_after(0.9, _import))
    async with AsyncClient(URL, "t0ken", transport=imports) as judge:
        assert (await judge.imports.wait("i1", poll=5.0, timeout=1.2)).state == "done"


@pytest.mark.parametrize("status", [404, 409, 422, 503])
def test_errors_cross_a_process_boundary_as_themselves(status: int) -> None:
    """A harness running attempts in worker processes gets the worker's error pickled."""
    problem = {"title": "T", "detail": "d", "errors": [{"field": "f", "message": "m"}]}
    error = error_from_response(status, problem, {"Retry-After": "3"})
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert (copy.status, copy.field, copy.errors, copy.retry_after) == (
        status, "f", error.errors, error.retry_after,
    )  # fmt: skip
    conflict = GroundTruthConflict("p", stored_sha256="a" * 64, sent_sha256="b" * 64, version=2)
    again = pickle.loads(pickle.dumps(conflict))
    assert (again.scenario_id, again.stored_sha256, again.sent_sha256, again.version) == (
        "p", "a" * 64, "b" * 64, 2,
    )  # fmt: skip
    assert str(again) == str(conflict)


@respx.mock
def test_list_filters_by_time_and_flags_as_the_server_spells_them() -> None:
    route = respx.get(f"{URL}/v1/gradings").mock(
        return_value=httpx.Response(200, json={"items": [], "next_cursor": None})
    )
    since = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    with _client() as judge:
        assert list(judge.list(created_after=since, held=True, agent=None)) == []
    params = route.calls[0].request.url.params
    assert params["created_after"] == "2026-12-01T09:30:00+00:00"  # ISO 8601, with the T
    assert params["held"] == "true" and "agent" not in params


@respx.mock
def test_a_regrade_filter_by_time_is_sent_as_the_list_filter_is() -> None:
    """``start_regrade(filter={"created_after": datetime})`` sends the time as ISO 8601,
    as ``list(created_after=...)`` does; the filter's other values go as they are."""
    route = respx.post(f"{URL}/v1/regrade-jobs").mock(
        return_value=httpx.Response(201, json={"id": "j1", "state": "queued"})
    )
    since = datetime(2026, 1, 1, tzinfo=UTC)
    with _client() as admin:
        admin.start_regrade(filter={"created_after": since, "passed": True}, judge="scripted:fail")
    sent = json.loads(route.calls[0].request.content)
    assert sent["filter"] == {"created_after": "2026-01-01T00:00:00+00:00", "passed": True}


def _busy(retry_after: str) -> httpx.Response:
    return httpx.Response(503, headers={"Retry-After": retry_after}, json={"title": "Busy"})


@respx.mock
def test_following_a_job_rides_out_a_server_away_or_busy_past_a_looks_retries() -> None:
    """A look at a regrade or import job that fails after its retries (a server
    restarting: connection refused; a server busy for longer than ``max_retry_wait``)
    is no answer yet: the follow looks again, no sooner than the ``Retry-After``, and
    goes on to the job's end."""
    for path, body in (("regrade-jobs/j1", _regrade), ("imports/i1", _import)):
        respx.get(f"{URL}/v1/{path}").mock(
            side_effect=[
                httpx.Response(200, json=body(False)),
                httpx.ConnectError("refused"),
                _busy("0.5"),
                httpx.Response(200, json=body(True)),
            ]
        )
    with Client(URL, "t0ken", retries=1, max_retry_wait=0.1) as admin:
        started = time.monotonic()
        states = [job.state for job in admin.follow_regrade("j1", poll=0.05, timeout=10)]
        assert states == ["running", "done"]
        assert admin.imports.wait("i1", poll=0.05, timeout=10).state == "done"
        elapsed = time.monotonic() - started
    assert elapsed >= 1.0, f"looked again {elapsed:.2f} s in, before the Retry-After"


@respx.mock
async def test_the_async_client_rides_out_a_server_away_or_busy_while_following() -> None:
    for path, body in (("regrade-jobs/j1", _regrade), ("imports/i1", _import)):
        respx.get(f"{URL}/v1/{path}").mock(
            side_effect=[
                httpx.ConnectError("refused"),
                _busy("0.3"),
                httpx.Response(200, json=body(True)),
            ]
        )
    async with AsyncClient(URL, "t0ken", retries=1, max_retry_wait=0.1) as admin:
        states = [j.state async for j in admin.follow_regrade("j1", poll=0.05, timeout=10)]
        assert states == ["done"]
        assert (await admin.imports.wait("i1", poll=0.05, timeout=10)).state == "done"


@respx.mock
def test_following_a_job_the_server_stays_away_from_ends_at_its_timeout() -> None:
    """A server away past a look's retries (two attempts, about half a second) for the
    whole follow: ``TimeoutError`` from the connection error at the timeout, neither
    before nor a poll after it (the job goes on on the server; the caller may follow it
    again)."""
    respx.get(f"{URL}/v1/regrade-jobs/j1").mock(side_effect=httpx.ConnectError("refused"))
    respx.get(f"{URL}/v1/imports/i1").mock(side_effect=httpx.ConnectError("refused"))
    with Client(URL, "t0ken", retries=2, max_retry_wait=5) as admin:
        for follow in (
            lambda: list(admin.follow_regrade("j1", poll=5.0, timeout=1.5)),
            lambda: admin.imports.wait("i1", poll=5.0, timeout=1.5),
        ):
            started = time.monotonic()
            with pytest.raises(TimeoutError) as ran_out:
                follow()
            elapsed = time.monotonic() - started
            assert isinstance(ran_out.value.__cause__, httpx.ConnectError)
            assert 1.4 <= elapsed < 4, f"a 1.5 s follow ended after {elapsed:.1f} s"


@respx.mock
async def test_the_async_client_follows_a_busy_server_until_its_timeout_too() -> None:
    """A server that asks to be left alone past the follow's end (``Retry-After`` 120):
    ``TimeoutError`` from its ``Unavailable`` at once, never the bare ``Unavailable``."""
    respx.get(f"{URL}/v1/regrade-jobs/j1").mock(return_value=_busy("120"))
    respx.get(f"{URL}/v1/imports/i1").mock(side_effect=httpx.ConnectError("refused"))
    async with AsyncClient(URL, "t0ken", retries=2, max_retry_wait=5) as admin:
        started = time.monotonic()
        with pytest.raises(TimeoutError) as busy:
            [job async for job in admin.follow_regrade("j1", timeout=1)]
        assert isinstance(busy.value.__cause__, Unavailable)
        assert time.monotonic() - started < 0.5
        with pytest.raises(TimeoutError) as away:
            await admin.imports.wait("i1", poll=0.1, timeout=1.5)
        assert isinstance(away.value.__cause__, httpx.ConnectError)


@respx.mock
@pytest.mark.parametrize("status", [401, 403, 404])
async def test_following_a_job_raises_a_refusal_at_once(status: int) -> None:
    """A refusal (a token not allowed, an unknown job) is no server busy or away: the
    follow raises it at the first look, sync and async."""
    problem = httpx.Response(status, json={"title": "Refused"})
    regrade = respx.get(f"{URL}/v1/regrade-jobs/j1").mock(return_value=problem)
    imports = respx.get(f"{URL}/v1/imports/i1").mock(return_value=problem)
    with Client(URL, "t0ken") as admin:
        with pytest.raises(ApiError) as refused:
            list(admin.follow_regrade("j1", timeout=10))
        assert refused.value.status == status
        with pytest.raises(ApiError):
            admin.imports.wait("i1", timeout=10)
    async with AsyncClient(URL, "t0ken") as admin:
        with pytest.raises(ApiError):
            [job async for job in admin.follow_regrade("j1", timeout=10)]
        with pytest.raises(ApiError):
            await admin.imports.wait("i1", timeout=10)
    assert regrade.call_count == 2 and imports.call_count == 2
