"""Retrying judge calls with tenacity, recording every attempt.

Timeouts, connection errors, 5xx and 429 are retried with exponential backoff and
jitter; a 429's or 503's ``Retry-After`` is honoured (it sets the least wait). A refused
feature (``json_schema``, ``logprobs``) is retried at once without it. Requests the
server refused (400, 401, 403, 404) are not retried. Attempts and total time are
both bounded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from judge.backends.base import JudgeBackend
from judge.calls import Attempt, Completion, JudgeRequest
from judge.errors import FeatureRefused, JudgeCallError

__all__ = ["RetryPolicy", "complete_with_retries"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of the retry loop."""

    max_attempts: int = 4
    max_total_seconds: float = 120.0
    initial_wait: float = 0.5
    max_wait: float = 20.0
    jitter: float = 0.5


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, JudgeCallError) and exc.retryable


def _wait_for(policy: RetryPolicy):  # type: ignore[no-untyped-def]
    backoff = wait_exponential_jitter(
        multiplier=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter
    )

    def wait(state: RetryCallState) -> float:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, FeatureRefused):
            return 0.0  # the next attempt asks differently: nothing to wait for
        delay = backoff(state)
        if isinstance(exc, JudgeCallError) and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, policy.max_wait * 3))
        return delay

    return wait


#: refused features a call may learn of (``json_schema``, ``logprobs``, and the empty
#: stream that hides which: asked again once unstreamed): each is noted for the endpoint
MAX_FEATURE_REFUSALS = 3


def _stop_for(policy: RetryPolicy, attempts: list[Attempt]) -> stop_base:
    """Stop after ``max_attempts`` failures; a refused feature is negotiation, not a
    failure of the judge, and does not count (at most MAX_FEATURE_REFUSALS of them)."""

    class _Stop(stop_base):
        def __call__(self, state: RetryCallState) -> bool:
            refused = sum(a.outcome == FeatureRefused.code for a in attempts)
            failed = len(attempts) - refused
            return failed >= policy.max_attempts or refused > MAX_FEATURE_REFUSALS

    return _Stop()


async def complete_with_retries(
    backend: JudgeBackend,
    request: JudgeRequest,
    *,
    policy: RetryPolicy | None = None,
) -> tuple[Completion, list[Attempt]]:
    """Call ``backend`` until it answers or the policy gives up.

    Returns the completion and every attempt. On failure the last ``JudgeCallError``
    is raised with ``attempts`` filled in.
    """
    policy = policy or RetryPolicy()
    attempts: list[Attempt] = []
    retrying = AsyncRetrying(
        stop=_stop_for(policy, attempts) | stop_after_delay(policy.max_total_seconds),
        wait=_wait_for(policy),
        retry=retry_if_exception(_is_retryable),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                completion = await _one_attempt(backend, request, attempts)
    except JudgeCallError as exc:
        exc.attempts = list(attempts)
        raise
    return completion, attempts


async def _one_attempt(
    backend: JudgeBackend, request: JudgeRequest, attempts: list[Attempt]
) -> Completion:
    started_at = datetime.now(UTC)
    start = time.perf_counter()
    number = len(attempts) + 1
    try:
        completion = await backend.complete(request)
    except JudgeCallError as exc:
        attempts.append(
            Attempt(
                number=number,
                started_at=started_at,
                latency_ms=(time.perf_counter() - start) * 1000,
                outcome=exc.code,
                status_code=exc.status_code,
                error=str(exc)[:500],
                retry_after=exc.retry_after,
            )
        )
        raise
    attempts.append(
        Attempt(
            number=number,
            started_at=started_at,
            latency_ms=(time.perf_counter() - start) * 1000,
            outcome="ok",
        )
    )
    return completion
