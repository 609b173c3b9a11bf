"""The cache-hit fast path of regrades: a batch of job items resolved from the judge cache.

A regrade whose judge and rubric are unchanged asks nothing new: every answer is in
the judge cache. Going through the queue one item at a time costs a grader task, a
cache query and a transaction per item; here a batch of claimed items is resolved
set-wise instead:

1. each item is graded once against a cache that only notes the keys asked for, with a
   judge that refuses every request (so nothing reaches the judge);
2. all those keys are read in one query;
3. the items whose keys are all there are graded again, now answered from memory, by
   the very grader the slow path uses (so the grading says exactly what it would say);
4. their verdicts are stored together in one transaction (``complete_many``).

An item with a missing key, a reply that would need the judge, or anything unusual
(unknown rubric, a panel, sampling) is a miss: it goes back to the caller, still
leased, to be graded the usual way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from api.service.grader_factory import grader_for
from api.service.judging import RETRY_LATER
from api.service.services import Services
from judge.backends.base import ContextWindowAware, JudgeBackend
from judge.cache import BatchJudgeCache
from judge.calls import Completion, JudgeRequest
from judge.errors import InputError, JudgeCallError
from judge.rubric import Rubric
from judge.spec import member_specs
from judge.verdict import GradingResult
from storage import Claim, FinishedGrading

__all__ = ["FAST_BATCH", "FastRegrade"]

log = logging.getLogger("sre_judge.workers")

#: regrade items claimed and resolved together
FAST_BATCH = 200

#: adds the review marks of a result: (claim, rubric, result) -> (result, provisional)
Marks = Callable[[Claim, Rubric | None, GradingResult], Awaitable[tuple[GradingResult, bool]]]
#: accounts for a stored (or discarded) result: (result, "completed" | "discarded")
Account = Callable[[GradingResult, str], None]


class _NotAsked(JudgeCallError):
    """The fast path never asks the judge: a request it would send makes the item a miss."""

    code = "judge_error"
    retryable = False


class _NoJudge:
    """A backend with the identity of the real one that answers nothing."""

    def __init__(self, real: JudgeBackend) -> None:
        self.name, self.model, self.base_url = real.name, real.model, real.base_url
        self._real = real

    async def context_window(self) -> int | None:
        """The real judge's window, as the slow path sees it (None: unknown)."""
        if isinstance(self._real, ContextWindowAware):
            return await self._real.context_window()
        return None

    async def complete(self, request: JudgeRequest) -> Completion:
        """Refuse: the answer is not in the cache."""
        raise _NotAsked("not in the judge cache")

    async def probe(self) -> None:
        """Nothing to probe."""

    async def aclose(self) -> None:
        """Nothing to close."""


class _KeyProbe:
    """A judge cache that answers nothing and notes every key asked for."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Note ``keys``."""
        self.keys.extend(keys)

    async def get(self, key: str) -> Completion | None:
        """Note ``key``; no entry."""
        self.keys.append(key)
        return None

    async def put(self, key: str, completion: Completion) -> None:
        """Keep nothing."""


class _Found:
    """A judge cache answering from entries read beforehand (and nothing else)."""

    def __init__(self, found: dict[str, Completion]) -> None:
        self._found = found

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Already read."""

    async def get(self, key: str) -> Completion | None:
        """The entry read beforehand, or None."""
        return self._found.get(key)

    async def put(self, key: str, completion: Completion) -> None:
        """Nothing new comes from the fast path."""


assert isinstance(_KeyProbe(), BatchJudgeCache) and isinstance(_Found({}), BatchJudgeCache)


@dataclass
class _Item:
    claim: Claim
    rubric: Rubric
    keys: list[str]


class FastRegrade:
    """Resolves batches of regrade items from the judge cache; the misses go back."""

    def __init__(self, services: Services, marks: Marks, account: Account) -> None:
        """Grade with ``services``; ``marks`` and ``account`` as in the slow path."""
        self.services = services
        self._marks = marks
        self._account = account
        #: after finding no item, look again only from then on (one probe per poll)
        self._idle_until = 0.0
        #: the next batch at least (grows while batches are all hits)
        self._batch = 0

    def eligible(self, spec: str) -> bool:
        """Whether items graded by ``spec`` can be answered from the cache at all."""
        settings = self.services.settings
        single = len(member_specs(spec)) == 1 and settings.judge_samples == 1
        return single and settings.judge_temperature == 0

    async def run(self, worker_id: str, free: int = FAST_BATCH) -> tuple[list[Claim], bool]:
        """Claim a batch of regrade items and store those answered by the cache.

        The batch is ``free`` items (the worker's free slots) and doubles, up to
        ``FAST_BATCH``, while every item is a hit: misses never take more items than
        the slots could grade, so a job the cache cannot answer is shared out among
        workers as before. Returns the claims still to grade the usual way (the misses,
        leased to ``worker_id``) and whether the batch was full (more may wait).
        """
        if time.monotonic() < self._idle_until:  # live gradings pay no extra query
            return [], False
        settings = self.services.settings
        limit = max(free, self._batch)
        claims = await self.services.store.queue.claim_pending(
            worker_id, limit=limit, lease_seconds=settings.lease_seconds, regrade=True
        )
        if not claims:
            self._idle_until = time.monotonic() + settings.poll_seconds
        try:
            misses = await self._resolve(worker_id, claims)
        except Exception:  # nothing stored: every item goes the usual way
            log.exception("resolving %d regrade items from the cache failed", len(claims))
            misses = claims
        if claims:
            self._batch = 0 if misses else min(FAST_BATCH, 2 * limit)
        return misses, len(claims) == limit

    async def _resolve(self, worker_id: str, claims: list[Claim]) -> list[Claim]:
        """Store the claims answered by the cache; the misses."""
        if not claims:
            return []
        items, misses = await self._probe(claims)
        keys = [key for item in items for key in item.keys]
        found = await self.services.store.cache.get_many(keys)
        hits: list[tuple[Claim, FinishedGrading]] = []
        for item in items:
            result = await self._answer(item, found)
            if result is None:
                misses.append(item.claim)
                continue
            result, provisional = await self._marks(item.claim, item.rubric, result)
            finished = FinishedGrading(item.claim.grading_id, worker_id, result, provisional)
            hits.append((item.claim, finished))
        for grading_id in await self._store(hits, misses):
            self.services.waiters.completed(grading_id)
        return misses

    async def _store(
        self, hits: list[tuple[Claim, FinishedGrading]], misses: list[Claim]
    ) -> list[str]:
        """Store the hits in one transaction; if that fails, they become misses."""
        if not hits:
            return []
        try:
            done = await self.services.store.queue.complete_many([f for _, f in hits])
        except Exception:
            log.exception("storing %d cached regrade verdicts failed; the usual way", len(hits))
            misses.extend(claim for claim, _ in hits)
            return []
        for (_, item), ok in zip(hits, done, strict=True):
            self._account(item.result, "completed" if ok else "discarded")
        return [f.grading_id for (_, f), ok in zip(hits, done, strict=True) if ok]

    async def _probe(self, claims: Sequence[Claim]) -> tuple[list[_Item], list[Claim]]:
        """The cache keys each claim's grading asks for; claims that cannot be probed."""
        items: list[_Item] = []
        misses: list[Claim] = []
        for claim in claims:
            rubric = await self.services.rubrics.resolve(claim.rubric_id, claim.rubric_version)
            if rubric is None or not self.eligible(claim.judge_spec):
                misses.append(claim)
                continue
            probe = _KeyProbe()
            try:
                await self._grade(claim, rubric, probe)
            except Exception:  # a bad spec or input: the slow path says why
                misses.append(claim)
                continue
            items.append(_Item(claim, rubric, probe.keys))
        return items, misses

    async def _answer(self, item: _Item, found: dict[str, Completion]) -> GradingResult | None:
        """The grading from cached answers only; None when it needs the judge."""
        if not item.keys or any(key not in found for key in item.keys):
            return None
        try:
            result = await self._grade(item.claim, item.rubric, _Found(found))
        except InputError:
            return None
        if not result.calls or not all(call.cached for call in result.calls):
            return None
        if result.status == "unscored" and result.unscored_reason in RETRY_LATER:
            return None
        return result

    async def _grade(
        self, claim: Claim, rubric: Rubric, cache: _KeyProbe | _Found
    ) -> GradingResult:
        """Grade ``claim`` as the slow path does, with ``cache`` and no judge behind it."""
        real = self.services.backends.limited(claim.judge_spec)
        grader = grader_for(self.services.settings, _NoJudge(real), cache=cache)
        return await grader.grade(rubric, claim.ground_truth, claim.diagnosis)
