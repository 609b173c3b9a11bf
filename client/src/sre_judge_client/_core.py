"""What the sync and async clients share: requests as data, decoding, the retry policy.

Each client only sends; everything else is defined once here.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn, Protocol, TypeVar

import httpx
from pydantic import BaseModel, ValidationError
from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, stop_before_delay
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from sre_judge_client.errors import (
    ApiError,
    GroundTruthConflict,
    Unavailable,
    error_from_response,
)

__all__ = [
    "DEFAULT_URL",
    "MIN_ATTEMPT_TIMEOUT",
    "SERVER_WAIT_MAX",
    "AsyncSendFor",
    "Call",
    "ModelT",
    "SendFor",
    "attempt_timeout",
    "decode",
    "decode_model",
    "ground_truth_conflict",
    "ground_truth_sha256",
    "idempotency_key",
    "pause_after_failed_look",
    "poll_delay",
    "request_args",
    "resolve",
    "retry_policy",
    "sent_as",
    "submission_call",
    "within_deadline",
]

DEFAULT_URL = "http://127.0.0.1:8000"
#: the longest ``?wait`` the server holds a submission open; a longer wait is polled
SERVER_WAIT_MAX = 300.0
#: statuses after which nothing was stored: always safe to send again
_BUSY = frozenset({429, 503})
#: a gateway's statuses (the server behind it away or slow): safe to send a GET again
_GATEWAY = frozenset({502, 504})
#: the shortest timeout an attempt is sent with, however little of its wait is left
MIN_ATTEMPT_TIMEOUT = 0.05

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class Call:
    """One API request, described before any client sends it."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: a raw body (a file sent as it is) instead of the JSON ``body``
    content: bytes | None = None
    #: sending it twice does no harm (GET, or a POST with an Idempotency-Key)
    idempotent: bool = False
    #: seconds the server may hold the request open on purpose (``?wait``)
    server_wait: float = 0.0
    #: no retry starts later than this many seconds after the first attempt (a caller's
    #: time budget); ``None``: the client's number of retries alone decides
    retry_within: float | None = None
    #: a wait's look (``retry_within``: the wait's time left): when the time left, not the
    #: number of retries, stops its retries, it raises ``TimeoutError`` from the last error
    waiting: bool = False
    #: a wait's end (a ``time.monotonic()`` value): no attempt is given longer than what
    #: is left of it (:func:`attempt_timeout`); ``None``: the client's timeout alone
    deadline: float | None = None


class SendFor(Protocol):
    """A client's typed send: ``call`` sent with its retries, its success read as a
    ``kind`` (:func:`decode_model`), so ``client.scenarios`` and ``client.imports`` read
    answers as the client's own methods do."""

    def __call__(self, kind: type[ModelT], call: Call) -> ModelT: ...


class AsyncSendFor(Protocol):
    """:class:`SendFor` of the async client, awaited."""

    def __call__(self, kind: type[ModelT], call: Call) -> Awaitable[ModelT]: ...


def resolve(base_url: str | None, token: str | None) -> tuple[str, str | None]:
    """The server URL and token: the arguments, else ``SRE_JUDGE_URL`` / ``SRE_JUDGE_TOKEN``.

    The token is taken without surrounding whitespace (one read from a file or a mounted
    secret often ends with a newline); one holding anything else than visible ASCII is a
    ``ValueError`` that does not quote it (an HTTP library's error would), and so is a
    URL no request could be sent to: one without its ``http://`` or ``https://``, one
    that does not parse (a mistyped port, ``:80OO``) or one without a host.
    """
    url = base_url or os.environ.get("SRE_JUDGE_URL") or DEFAULT_URL
    if not url.lower().startswith(("http://", "https://")):  # 127.0.0.1:8000: no request
        raise ValueError("the server URL must start with http:// or https://")
    try:
        host = httpx.URL(url).host
    except httpx.InvalidURL as error:  # its message names the part at fault, never a header
        raise ValueError(f"the server URL does not parse: {error}") from None
    if not host:  # http://:8000: a harness's http://$HOST:8000 with HOST unset
        raise ValueError("the server URL names no host")
    given = (token or os.environ.get("SRE_JUDGE_TOKEN") or "").strip()
    if not all("!" <= c <= "~" for c in given):
        raise ValueError("the token holds a character an HTTP header cannot carry")
    return url.rstrip("/"), given or None


def within_deadline(call: Call, deadline: float) -> Call:
    """``call`` as a wait sends it: retried only while it can start before ``deadline``
    (a ``time.monotonic()`` value), each attempt given no longer than what is left of it,
    so a server busy, away or silent past it ends the wait with ``TimeoutError`` rather
    than keep it beyond its timeout."""
    remaining = max(0.0, deadline - time.monotonic())
    return replace(call, retry_within=remaining, waiting=True, deadline=deadline)


def attempt_timeout(call: Call, timeout: float) -> float:
    """Seconds one attempt at ``call`` may take: the client's ``timeout`` plus the time
    the server may hold it on purpose, but never past the call's ``deadline`` (at least
    :data:`MIN_ATTEMPT_TIMEOUT`, so a look made at the deadline can still be answered)."""
    full = timeout + call.server_wait
    if call.deadline is None:
        return full
    return min(full, max(MIN_ATTEMPT_TIMEOUT, call.deadline - time.monotonic()))


def request_args(call: Call, timeout: float) -> dict[str, Any]:
    """The arguments of ``httpx`` ``request`` that send one attempt at ``call`` (as
    :func:`sent_as` made it), alike for the client and the async client."""
    return {
        "method": call.method,
        "url": call.path,
        "params": call.params,
        "json": call.body,
        "content": call.content,
        "headers": call.headers,
        "timeout": attempt_timeout(call, timeout),
    }


def sent_as(call: Call, attempt: RetryCallState) -> Call:
    """``call`` as its ``attempt`` sends it: a submission tried again within its
    ``retry_within`` asks the server to hold it (``?wait``) no longer than what is left of
    those seconds (and :func:`attempt_timeout` gives it no longer), so a retry never
    keeps the caller past its wait; the first attempt, and any other call, as built."""
    if attempt.attempt_number == 1 or not call.server_wait or call.retry_within is None:
        return call
    left = call.retry_within - (time.monotonic() - attempt.start_time)
    wait = round(min(max(0.0, left), SERVER_WAIT_MAX), 3)
    return replace(call, params={**call.params, "wait": wait}, server_wait=wait)


def poll_delay(deadline: float, poll: float) -> float | None:
    """Seconds to sleep before the next look at a job, at most ``poll`` and never past
    ``deadline`` (a ``time.monotonic()`` value); None once the deadline has passed, so
    the last look is made at the deadline rather than one poll short of it."""
    remaining = deadline - time.monotonic()
    return None if remaining <= 0 else min(poll, remaining)


def pause_after_failed_look(error: Exception, look: Call, delay: float) -> float:
    """Seconds a wait (or a follow) sleeps before its next look after ``look`` (made by
    :func:`within_deadline`) failed with ``error``, a server busy or away being no
    answer yet: ``delay``, or the server's ``Retry-After`` when longer, but never past
    the wait's end (the last look is made there).

    Raises ``error`` itself when looking again cannot help (a refusal, an unknown id), and
    ``TimeoutError`` from it when the wait has run out or the server asks to be left
    alone past its end (a ``Retry-After`` a look's own retries do not wait out).
    """
    if not _retryable(look, math.inf)(error):
        raise error
    assert look.deadline is not None  # a wait's look
    retry_after = error.retry_after if isinstance(error, ApiError) else None
    remaining = look.deadline - time.monotonic()
    if remaining <= 0 or (retry_after is not None and retry_after > remaining):
        raise _ran_out(look, error) from error
    return min(max(delay, retry_after or 0.0), remaining)


def ground_truth_sha256(text: str) -> str:
    """SHA-256 of a ground truth's UTF-8 text in hex, as the server's ``ground_truth_sha256``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ground_truth_conflict(
    scenario_id: str, stored: str, version: int | None, sent: str
) -> GroundTruthConflict | None:
    """The conflict between a scenario's ``stored`` ground truth and one ``sent`` for the
    same id, or None when they are the same text."""
    if stored == sent:
        return None
    return GroundTruthConflict(
        scenario_id,
        stored_sha256=ground_truth_sha256(stored),
        sent_sha256=ground_truth_sha256(sent),
        version=version,
    )


def idempotency_key(
    *,
    scenario_id: str | None,
    ground_truth: str | None,
    run_id: str | None,
    attempt: int | None,
    rubric: str | None = None,
    agent: str | None = None,
    model: str | None = None,
) -> str:
    """The ``Idempotency-Key`` of a submission.

    With a ``run_id`` it is derived from run, attempt and scenario (or the inline ground
    truth's hash), and the rubric, agent and model when named, so a harness that crashes
    and submits the same attempt again gets the first grading back instead of a second
    one, one attempt graded by two rubrics is two submissions, and so are two agents'
    (or models') attempts under one run id and number (the service answers a key used
    again for another request with 409). Without a run id it is random per call
    (retries of that call still share it). With one, a field of another type than the
    signature's raises ``TypeError`` naming it.
    """
    if run_id is None:
        return f"sjc-{uuid.uuid4().hex}"
    texts = {"scenario_id": scenario_id, "ground_truth": ground_truth, "run_id": run_id}
    texts.update(rubric=rubric, agent=agent, model=model)
    for name, value in texts.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a string or None, not {type(value).__name__}")
    if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int)):
        raise TypeError(f"attempt must be an integer or None, not {type(attempt).__name__}")
    truth = ground_truth_sha256(ground_truth) if ground_truth is not None else None
    parts: list[Any] = [scenario_id, truth, run_id, attempt]
    if rubric is not None:  # keys of calls naming none stay what they were
        parts.append(rubric)
    who = {name: value for name, value in (("agent", agent), ("model", model)) if value is not None}
    if who:  # likewise; an object, never taken for a rubric's name
        parts.append(who)
    identity = json.dumps(parts, separators=(",", ":"))
    return "sjc-" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def submission_call(
    diagnosis: str,
    *,
    scenario_id: str | None,
    ground_truth: str | None,
    wait: float | None,
    idempotency_key_: str | None,
    retry_within: float | None = None,
    **fields: Any,
) -> Call:
    """``POST /v1/submissions`` with the fields given (``None`` ones left out)."""
    body = {"diagnosis": diagnosis, "scenario_id": scenario_id, "ground_truth": ground_truth}
    body.update(fields)
    body = {k: v for k, v in body.items() if v is not None}
    key = idempotency_key_ or idempotency_key(
        scenario_id=scenario_id,
        ground_truth=ground_truth,
        run_id=fields.get("run_id"),
        attempt=fields.get("attempt"),
        rubric=fields.get("rubric"),
        agent=fields.get("agent"),
        model=fields.get("model"),
    )
    params = {"wait": wait} if wait else {}
    return Call(
        "POST",
        "/v1/submissions",
        params=params,
        body=body,
        headers={"Idempotency-Key": key},
        idempotent=True,
        server_wait=float(wait or 0),
        retry_within=retry_within,
    )


def decode(response: httpx.Response) -> Any:
    """The JSON body of a success, or the :class:`ApiError` of any other answer, raised.

    A ``4xx``/``5xx`` raises its problem's error. A ``3xx`` raises an :class:`ApiError`
    naming its status and ``Location``: redirects are not followed, so the token is never
    sent to another address than the one given. A ``2xx`` whose body is not JSON (a
    proxy's sign-in page) raises one naming its status and content type; only a ``204``
    has no body (None).
    """
    status = response.status_code
    if status >= 400:
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        raise error_from_response(status, body, response.headers)
    if not 200 <= status < 300:
        location = response.headers.get("Location")
        to = f" to {location}" if location else ""
        raise ApiError(
            status,
            "Redirect not followed" if 300 <= status < 400 else f"HTTP {status}",
            f"the server answered {status}{to}; the client does not follow redirects, so "
            "the token never goes to another address: give the server's final URL",
        )
    if status == 204:
        return None
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("Content-Type") or "no content type"
        raise ApiError(
            status,
            "Not JSON",
            f"the server answered {status} with {kind} where JSON was expected: "
            "is the URL that of an sre-judge server?",
        ) from None


def decode_model(response: httpx.Response, kind: type[ModelT]) -> ModelT:
    """The ``kind`` object a success holds, or the :class:`ApiError` of any other answer
    (:func:`decode`), raised. A success whose JSON is not a ``kind`` (a server of another
    version, another service behind the URL) raises an :class:`ApiError` naming its
    status and the first field at fault, as one that is not JSON does."""
    body = decode(response)
    try:
        return kind.model_validate(body)
    except ValidationError as error:
        what = re.sub(r"(?<!^)(?=[A-Z])", " ", kind.__name__).lower()  # RegradeJob: regrade job
        article = "an" if what[0] in "aeiou" else "a"
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise ApiError(
            response.status_code,
            f"Not {article} {what}",
            f"the server answered {response.status_code} with JSON that is not {article} "
            f"{what} ({where}: {first['msg']}): is the URL that of an sre-judge server of "
            "a version this client reads?",
        ) from None


class _RetryAfterWait(wait_base):
    """The server's ``Retry-After`` when it gave one, else exponential backoff with jitter."""

    def __init__(self, *, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = maximum

    def __call__(self, retry_state: Any) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, ApiError) and error.retry_after is not None:
            return min(error.retry_after, self.maximum)
        backoff = self.initial * 2 ** (retry_state.attempt_number - 1)
        return float(min(self.maximum, backoff) * random.uniform(0.5, 1.0))


def _retryable(call: Call, max_wait: float):  # type: ignore[no-untyped-def]
    def check(error: BaseException) -> bool:
        if isinstance(error, Unavailable):
            # a server asking for a longer wait than a retry would make (an attempt
            # limit's hour) would refuse the retry too: give up at once
            too_long = error.retry_after is not None and error.retry_after > max_wait
            # a gateway's 502/504 may follow a request the server received: only a GET
            # is surely harmless to send again
            safe = error.status in _BUSY or (
                error.status in _GATEWAY and call.method == "GET" and call.idempotent
            )
            return safe and not too_long
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
            return True  # never reached the server
        return isinstance(error, httpx.TransportError) and call.idempotent

    return check


def _out_of_time(call: Call, attempts: int) -> Callable[[RetryCallState], NoReturn]:
    """How a wait's look gives up: ``TimeoutError`` from the last error when the wait's
    time left stopped its retries (or has run out), the last error itself when their
    number did."""

    def give_up(state: RetryCallState) -> NoReturn:
        error = state.outcome.exception() if state.outcome is not None else None
        assert error is not None  # only failures are retried
        ran_out = call.deadline is not None and time.monotonic() >= call.deadline
        if state.attempt_number < attempts or ran_out:
            raise _ran_out(call, error) from error
        raise error

    return give_up


def _ran_out(call: Call, error: BaseException) -> TimeoutError:
    """The ``TimeoutError`` of a wait whose look at ``call`` still failed with ``error``."""
    return TimeoutError(f"{call.method} {call.path} failed when the wait ran out: {error}")


def retry_policy(call: Call, *, attempts: int, max_wait: float) -> dict[str, Any]:
    """Keyword arguments of tenacity's ``Retrying`` / ``AsyncRetrying`` for ``call``.

    Retries 429 and 503 (nothing was stored), and a gateway's 502 and 504 of a GET,
    unless their ``Retry-After`` exceeds ``max_wait``; connection failures; and any
    transport error of an idempotent request (a POST's 502 or 504 is not retried: the
    server may have received it). Gives up after ``attempts``, or when the next try would
    start past the call's ``retry_within``, and raises the last error (a wait's look
    stopped by the time left: ``TimeoutError`` from it).
    """
    attempts = max(1, attempts)
    stop: stop_base = stop_after_attempt(attempts)
    if call.retry_within is not None:
        stop = stop | stop_before_delay(call.retry_within)
    policy: dict[str, Any] = {
        "stop": stop,
        "wait": _RetryAfterWait(initial=0.5, maximum=max_wait),
        "retry": retry_if_exception(_retryable(call, max_wait)),
        "reraise": True,
    }
    if call.waiting:
        policy["retry_error_callback"] = _out_of_time(call, attempts)
    return policy
