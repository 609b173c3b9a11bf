"""Limits on submissions: a token bucket per API token, and a ceiling on the pending queue.

The rate limit is in-process: with several ``serve`` processes each enforces it on its
own (put the limit per process, or a proxy in front, when that matters). The queue
ceiling is read from the database, so it holds across processes, give or take the
submissions that race past the check at the same moment.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from api.http.problems import ApiProblem
from api.service.metrics import Metrics
from api.service.settings import Settings
from storage import Store
from storage.attempts import is_replay_in

__all__ = ["QUEUE_FULL_RETRY_SECONDS", "SubmissionLimits", "TokenBucket"]

#: what a 503 for a full queue tells clients to wait
QUEUE_FULL_RETRY_SECONDS = 30


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBucket:
    """``per_minute`` requests a minute per key, in bursts of up to ``per_minute``."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str) -> float | None:
        """Take one token for ``key``: None when allowed, else seconds until one is free."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(tokens=self.capacity, updated=now)
        bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / self.rate

    def give_back(self, key: str) -> None:
        """Return the token ``take`` took for ``key`` (what it was taken for stored nothing)."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(self.capacity, bucket.tokens + 1)


class SubmissionLimits:
    """What ``POST /v1/submissions`` checks before storing anything."""

    def __init__(self, settings: Settings, store: Store, metrics: Metrics) -> None:
        self._max_pending = settings.max_pending
        self._store = store
        self._metrics = metrics
        per_minute = settings.rate_limit_per_minute
        self._bucket = TokenBucket(per_minute) if per_minute > 0 else None

    async def admit(self, principal_id: str, idempotency_key: str | None = None) -> bool:
        """Raise a 429 or 503 problem (with ``Retry-After``) when a limit is reached; both
        let through the replay of a submission already stored (the token's
        ``idempotency_key`` used before), which stores nothing.

        The rate limit counts submissions stored: returns whether a rate-limit token was
        taken, which the caller gives back (:meth:`not_stored`) when the request stored
        nothing (refused, or a replay)."""
        taken = False
        if self._bucket is not None:
            wait = self._bucket.take(principal_id)
            taken = wait is None
            if wait is not None and not await self._stored(principal_id, idempotency_key):
                self._metrics.submissions_rejected.labels("rate_limited").inc()
                raise ApiProblem(
                    429,
                    "Too many requests",
                    "this token submits faster than the rate limit allows",
                    headers={"Retry-After": str(max(1, math.ceil(wait)))},
                )
        if self._max_pending > 0:
            pending, _ = await self._store.queue.depth()
            if pending >= self._max_pending and not await self._stored(
                principal_id, idempotency_key
            ):
                if taken:
                    self.not_stored(principal_id)
                self._metrics.submissions_rejected.labels("queue_full").inc()
                raise ApiProblem(
                    503,
                    "Queue full",
                    f"{pending} gradings are pending, the limit is {self._max_pending}; "
                    "nothing was stored",
                    headers={"Retry-After": str(QUEUE_FULL_RETRY_SECONDS)},
                )
        return taken

    def not_stored(self, principal_id: str) -> None:
        """The admitted request stored nothing (refused as invalid, over a limit, or the
        replay of a stored one): its rate-limit token is given back."""
        if self._bucket is not None:
            self._bucket.give_back(principal_id)

    async def _stored(self, principal_id: str, idempotency_key: str | None) -> bool:
        """Whether the token stored a submission under ``idempotency_key`` already."""
        if idempotency_key is None:
            return False
        return await self._store.db.run_read(is_replay_in, principal_id, idempotency_key)
