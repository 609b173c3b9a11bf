"""Retrying judge calls with tenacity, recording every attempt.

Timeouts (a 408 or 409 among them: ``judge.backends.http``), connection errors, 5xx and
429 are retried with exponential backoff and jitter; a 429's or 503's ``Retry-After`` is
honoured (it sets the least wait; a wait that is not finite is none, and one past a day
a day: ``judge.backends.http``). A refused feature (``json_schema``, ``logprobs``) is
retried at once without it; each attempt is told the error of the one before it of the
same request (``judge.backends.http.previous_error``), so that a backend asks that
request, and no other call's, without the refused feature (an empty stream: without
streaming). A call whose every attempt was refused so is a judge that did not answer: it
ends as :class:`~judge.errors.JudgeUnavailable`, tried again later, never as a refused
feature. Requests the server refused (400, 401, 403, 404) are not retried. Attempts and
total time are both bounded; the time bound does not stop a retry that is owed (a
refused feature's, a cut reply's). Any other exception a backend lets through is
recorded and retried as an unavailable judge naming its type, never raised as itself.

A reply that stopped at the ``max_tokens`` budget (``finish_reason`` or ``done_reason``
``length``) is cut: it is never parsed; so is one that ran so far past the budget that
the backend read no further (``judge.backends.streaming.SizeLimit``). It is asked again
once, at once, with a budget ``TRUNCATED_BUDGET_FACTOR`` times larger (the attempt
records the budget it asked for), but no larger than the room the judge's context window
leaves beside the prompt, where the window is known: a request over the window is
refused (vLLM) or has its prompt's start dropped (Ollama). Where that room is no larger
than the budget, the cut reply is not asked again. A cut reply not asked again raises
:class:`~judge.errors.ReplyTruncated`, and the grading is unscored with the reason
``reply_truncated``. A cut reply's text, as the server sent it, and the tokens it
cost, where the server said, are kept on its attempt (``Attempt.reply``;
``JudgeCall.prompt_tokens`` and ``completion_tokens`` count the tokens).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from judge.backends.base import JudgeBackend
from judge.backends.http import bounded_wait, retrying_after
from judge.calls import Attempt, Completion, JudgeRequest
from judge.errors import FeatureRefused, JudgeCallError, JudgeUnavailable, ReplyTruncated

__all__ = [
    "TRUNCATED_BUDGET_FACTOR",
    "TRUNCATED_REASONS",
    "RetryPolicy",
    "complete_with_retries",
    "reply_budget",
]

#: stop reasons that mean the reply was cut at its token budget (OpenAI-compatible
#: servers, llama.cpp and Ollama all say ``length``)
TRUNCATED_REASONS = frozenset({"length"})
#: how much larger the budget of the one retry of a cut reply is
TRUNCATED_BUDGET_FACTOR = 2


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of the retry loop."""

    max_attempts: int = 4
    max_total_seconds: float = 120.0
    initial_wait: float = 0.5
    max_wait: float = 20.0
    jitter: float = 0.5


def _truncations(attempts: list[Attempt]) -> int:
    return sum(a.outcome == ReplyTruncated.code for a in attempts)


def _retry_for(
    attempts: list[Attempt], request: JudgeRequest, room: int | None
) -> Callable[[BaseException], bool]:
    """Retry what is retryable, and a cut reply once (with a larger budget, if the
    context window leaves ``room`` for one)."""

    def retryable(exc: BaseException) -> bool:
        if isinstance(exc, ReplyTruncated):
            larger = _larger_budget(request, room) > request.params.max_tokens
            return larger and _truncations(attempts) == 1
        return isinstance(exc, JudgeCallError) and exc.retryable

    return retryable


def _larger_budget(request: JudgeRequest, room: int | None) -> int:
    """The budget of a cut reply's retry: ``TRUNCATED_BUDGET_FACTOR`` times the request's,
    at most ``room`` (the tokens the context window leaves beside the prompt; None:
    unknown)."""
    larger = request.params.max_tokens * TRUNCATED_BUDGET_FACTOR
    return larger if room is None else min(larger, room)


def reply_budget(
    request: JudgeRequest, attempts: list[Attempt], *, room: int | None = None
) -> JudgeRequest:
    """``request`` as the next attempt sends it: after a cut reply, with a larger budget
    (at most ``room``, the tokens the context window leaves beside the prompt)."""
    if not _truncations(attempts):
        return request
    larger = _larger_budget(request, room)
    return request.model_copy(
        update={"params": request.params.model_copy(update={"max_tokens": larger})}
    )


def _wait_for(policy: RetryPolicy):  # type: ignore[no-untyped-def]
    backoff = wait_exponential_jitter(
        multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter
    )

    def wait(state: RetryCallState) -> float:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, FeatureRefused | ReplyTruncated):
            return 0.0  # the next attempt asks differently: nothing to wait for
        delay = backoff(state)
        if isinstance(exc, JudgeCallError) and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, _longest_wait(policy)))
        return delay

    return wait


def _longest_wait(policy: RetryPolicy) -> float:
    """The longest this loop waits between two attempts (a judge's ``Retry-After``
    beyond it ends the loop instead)."""
    return policy.max_wait * 3


#: refused features a call may learn of (``json_schema`` and ``logprobs``, noted for the
#: endpoint, and the empty stream that hides which: that request asked again unstreamed)
MAX_FEATURE_REFUSALS = 3


#: outcomes whose retry is owed: the next attempt asks differently, at once
_OWED = frozenset({FeatureRefused.code, ReplyTruncated.code})


def _stop_for(policy: RetryPolicy, attempts: list[Attempt]) -> stop_base:
    """Stop after ``max_attempts`` failures or ``max_total_seconds``; a refused feature
    is negotiation, not a failure of the judge, and does not count (at most
    MAX_FEATURE_REFUSALS of them), nor does a cut reply (asked again once, with a larger
    budget). Neither is stopped by the time bound: a slow judge's cut reply comes after
    it, and its one retry is owed."""

    class _Stop(stop_base):
        def __call__(self, state: RetryCallState) -> bool:
            refused = sum(a.outcome == FeatureRefused.code for a in attempts)
            failed = len(attempts) - refused - _truncations(attempts)
            # a Retry-After longer than this loop waits: asked again only once it passed
            # (the grading is deferred at least that long), never sooner
            later = bool(attempts) and (attempts[-1].retry_after or 0) > _longest_wait(policy)
            owed = bool(attempts) and attempts[-1].outcome in _OWED
            elapsed = state.seconds_since_start or 0.0
            late = not owed and elapsed >= policy.max_total_seconds
            return failed >= policy.max_attempts or refused > MAX_FEATURE_REFUSALS or later or late

    return _Stop()


async def complete_with_retries(
    backend: JudgeBackend,
    request: JudgeRequest,
    *,
    policy: RetryPolicy | None = None,
    room: int | None = None,
) -> tuple[Completion, list[Attempt]]:
    """Call ``backend`` until it answers or the policy gives up.

    ``room``: the tokens the judge's context window leaves beside the prompt (None:
    unknown); the retry of a cut reply asks for no more, and is not asked where that is
    no more than the request's budget.

    Returns the completion and every attempt. On failure the last ``JudgeCallError``
    is raised with ``attempts`` filled in: the last real failure where refused features
    came after it, and JudgeUnavailable where every attempt was refused a feature.
    """
    policy = policy or RetryPolicy()
    attempts: list[Attempt] = []
    errors: list[JudgeCallError] = []
    retrying = AsyncRetrying(
        stop=_stop_for(policy, attempts),
        wait=_wait_for(policy),
        retry=retry_if_exception(_retry_for(attempts, request, room)),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                try:
                    with retrying_after(errors[-1] if errors else None):
                        completion = await _one_attempt(
                            backend, reply_budget(request, attempts, room=room), attempts
                        )
                except JudgeCallError as exc:
                    errors.append(exc)
                    raise
    except JudgeCallError as exc:
        final = _final_error(exc, errors, attempts)
        final.attempts = list(attempts)
        if final is not exc:
            raise final from exc
        raise
    return completion, attempts


def _final_error(
    exc: JudgeCallError, errors: list[JudgeCallError], attempts: list[Attempt]
) -> JudgeCallError:
    """The error a loop that gave up on ``exc`` ends with.

    Refusals used up between real failures (a 200 with an empty stream, then a 503 asked
    plainly: an overloaded judge): the judge is away, no feature was refused, and the
    last real failure says so. Refusals and nothing else (streams that kept coming back
    empty, each retry refused another feature): the judge answered none of the requests,
    an unavailable judge, tried again later.
    """
    if not isinstance(exc, FeatureRefused):
        return exc
    failed = [e for e in errors if not isinstance(e, FeatureRefused | ReplyTruncated)]
    if failed:
        return failed[-1]
    return JudgeUnavailable(
        f"the judge answered none of {len(attempts)} attempts, each refused a feature "
        f"(the last: {exc})",
        status_code=exc.status_code,
    )


def _truncated(request: JudgeRequest, completion: Completion) -> ReplyTruncated | None:
    """The error of a reply cut at its budget, or None for a whole reply."""
    if completion.finish_reason not in TRUNCATED_REASONS:
        return None
    used = "" if completion.completion_tokens is None else f" after {completion.completion_tokens}"
    return ReplyTruncated(
        f"the judge's reply was cut at its max_tokens budget of {request.params.max_tokens}"
        f"{used} tokens (finish reason {completion.finish_reason!r}, {len(completion.text)} "
        "characters): a cut reply is never parsed"
    )


async def _complete(backend: JudgeBackend, request: JudgeRequest) -> Completion:
    """``backend.complete(request)``, failing with judge errors only.

    A backend translates its client's errors (``JudgeBackend``); whatever else escapes it
    (a client tripping over a reply of a shape it never expected) is the judge's odd
    answer, not a fault of the grading: an unavailable judge, named by the exception's
    type (its message may quote anything), recorded and retried as one. Cancellation is
    no failure and passes through.
    """
    try:
        return await backend.complete(request)
    except JudgeCallError:
        raise
    except Exception as exc:
        raise JudgeUnavailable(f"the {backend.name} backend failed ({type(exc).__name__})") from exc


async def _one_attempt(
    backend: JudgeBackend, request: JudgeRequest, attempts: list[Attempt]
) -> Completion:
    started_at = datetime.now(UTC)
    start = time.perf_counter()
    number = len(attempts) + 1
    #: the budget, recorded where it is not the request's own (a cut reply's retry)
    budget = request.params.max_tokens if _truncations(attempts) else None
    #: the reply read, whole or cut (a cut one is never parsed, but kept on its attempt
    #: with the tokens it cost)
    reply: Completion | None = None
    try:
        completion = reply = await _complete(backend, request)
        cut = _truncated(request, completion)
        if cut is not None:
            raise cut
    except JudgeCallError as exc:
        exc.retry_after = bounded_wait(exc.retry_after)  # as honoured, and as JSON holds it
        attempts.append(
            Attempt(
                number=number,
                started_at=started_at,
                latency_ms=(time.perf_counter() - start) * 1000,
                outcome=exc.code,
                status_code=exc.status_code,
                error=str(exc)[:500],
                retry_after=exc.retry_after,
                max_tokens=budget,
                prompt_tokens=reply.prompt_tokens if reply else None,
                completion_tokens=reply.completion_tokens if reply else None,
                reply=reply.text if reply else None,
            )
        )
        raise
    attempts.append(
        Attempt(
            number=number,
            started_at=started_at,
            latency_ms=(time.perf_counter() - start) * 1000,
            outcome="ok",
            max_tokens=budget,
        )
    )
    return completion
