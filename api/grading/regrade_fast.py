"""The cache-hit fast path of regrades: a batch of job items resolved from the judge cache.

A regrade whose judge and rubric are unchanged asks nothing new: every answer is in
the judge cache. Going through the queue one item at a time costs a grader task, a
cache query and a transaction per item; here a batch of claimed items is resolved
set-wise instead:

1. the items are graded together, by the very grader the slow path uses (so the
   grading says exactly what it would say), with a judge that refuses every request
   (nothing reaches the judge) and a cache shared by the batch: the keys the gradings
   ask for in the same turn of the event loop are read in one query (``_SharedLookup``);
2. the verdicts of the items answered wholly from the cache are stored together in one
   transaction (``complete_many``: one statement per table); if that fails, one by one.
   After a database fault, the commit may have gone through unacknowledged: an item
   then refused is asked whether that commit stored it, as the usual path asks
   (``Landed``), and counted stored (its waiters told) or discarded accordingly.

An item with a missing key, a reply that would need the judge, or anything unusual
(unknown rubric, a panel, sampling) is a miss: it goes back to the caller, still
leased, to be graded the usual way. So is a pass the confirming judge
(``SRE_JUDGE_CONFIRM_JUDGE``) could release (held only for reasons that concern its
judge): the usual path asks that second judge, or says in ``detail`` why not, and the
fast path, which asks no judge, would keep the pass held where a queued item is released.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from api.grading.confirmation import confirmable
from api.service.grader_factory import grader_for, profile_of_spec, sampling_for
from api.service.judging import RETRY_LATER
from api.service.services import Services
from judge.backends.base import StandIn
from judge.cache import BatchJudgeCache, DigestKeyedCache
from judge.calls import Completion, JudgeRequest
from judge.errors import JudgeCallError
from judge.rubric import Rubric
from judge.spec import member_specs
from judge.verdict import GradingResult
from storage import Claim, FinishedGrading
from storage.errors import database_fault

__all__ = ["FAST_BATCH", "FastRegrade"]

log = logging.getLogger("sre_judge.workers")

#: regrade items claimed and resolved together
FAST_BATCH = 200

#: adds the review marks of a result: (claim, rubric, result) -> (result, provisional)
Marks = Callable[[Claim, Rubric | None, GradingResult], Awaitable[tuple[GradingResult, bool]]]
#: accounts for a stored (or discarded) result: (result, "completed" | "discarded")
Account = Callable[[GradingResult, str], None]
#: whether a claim's outcome, refused when written again after a database fault, was
#: stored by the faulted write (its commit went through unacknowledged); None: unknown
Landed = Callable[[Claim], Awaitable[bool | None]]


class _NotAsked(JudgeCallError):
    """The fast path never asks the judge: a request it would send makes the item a miss."""

    code = "judge_error"
    retryable = False


class _NoJudge(StandIn):
    """A backend with the identity of the real one that answers nothing."""

    async def complete(self, request: JudgeRequest) -> Completion:
        """Refuse: the answer is not in the cache."""
        raise _NotAsked("not in the judge cache")

    async def probe(self) -> None:
        """Nothing to probe."""


class _SharedLookup:
    """A judge cache for the gradings of a batch: reads, never writes.

    The keys asked for (``get``, ``prefetch``) while the gradings run up to their first
    look-up are read in one query, at the next turn of the event loop; a key asked for
    later (a repair, a late grading) starts another such round.
    """

    def __init__(self, read: Callable[[list[str]], Awaitable[dict[str, Completion]]]) -> None:
        """Read entries with ``read`` (keys -> the entries found)."""
        self._read = read
        self._found: dict[str, Completion] = {}
        #: key -> the round that looks it up (done: looked up)
        self._rounds: dict[str, asyncio.Future[None]] = {}
        self._next: list[str] = []
        self._round: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: queries made
        self.reads = 0

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Look ``keys`` up (with the batch's other keys of this turn)."""
        waits = {self._ask(key) for key in keys}
        for round_ in waits:
            await round_

    async def get(self, key: str) -> Completion | None:
        """The entry of ``key``, looked up with the batch's other keys of this turn."""
        await self._ask(key)
        return self._found.get(key)

    async def put(self, key: str, completion: Completion) -> str | None:
        """Nothing new comes from the fast path: nothing is kept."""
        return None

    def _ask(self, key: str) -> asyncio.Future[None]:
        round_ = self._rounds.get(key)
        if round_ is None:
            if self._round is None:
                self._round = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().call_soon(self._start)
            round_ = self._rounds[key] = self._round
            self._next.append(key)
        return round_

    def _start(self) -> None:
        """Runs after the gradings scheduled so far reached their look-ups."""
        keys, round_ = self._next, self._round
        self._next, self._round = [], None
        assert round_ is not None
        task = asyncio.ensure_future(self._fill(keys, round_))
        self._tasks.add(task)  # referenced until done
        task.add_done_callback(self._tasks.discard)

    async def _fill(self, keys: list[str], round_: asyncio.Future[None]) -> None:
        try:
            self.reads += 1
            self._found.update(await self._read(keys))
        except Exception as exc:  # the gradings waiting for it fail: their items are misses
            round_.set_exception(exc)
        else:
            round_.set_result(None)


assert isinstance(_SharedLookup(None), BatchJudgeCache)  # type: ignore[arg-type]


class FastRegrade:
    """Resolves batches of regrade items from the judge cache; the misses go back."""

    def __init__(self, services: Services, marks: Marks, account: Account, landed: Landed) -> None:
        """Grade with ``services``; ``marks``, ``account`` and ``landed`` as in the slow
        path (``landed`` reads the outcomes of the worker whose id ``run`` is given)."""
        self.services = services
        self._marks = marks
        self._account = account
        self._landed = landed
        #: after finding no item, look again only from then on (one probe per poll), or
        #: once regrade items are queued in this process (``Waiters.regrades`` moved on)
        self._idle_until = 0.0
        self._idle_at = -1
        #: the next batch at least (grows while batches are all hits)
        self._batch = 0

    def eligible(self, spec: str) -> bool:
        """Whether items graded by ``spec`` can be answered from the cache at all."""
        settings = self.services.settings
        single = len(member_specs(spec)) == 1 and settings.judge_samples == 1
        return single and sampling_for(settings, profile_of_spec(settings, spec)).temperature == 0

    async def run(self, worker_id: str, free: int = FAST_BATCH) -> tuple[list[Claim], bool]:
        """Claim a batch of regrade items and store those answered by the cache.

        The batch is ``free`` items (the worker's free slots, after live work) and
        doubles, up to ``FAST_BATCH``, while every item is a hit: at most ``free``
        misses come back (those past them are given back at once), so a job the cache
        cannot answer is shared out among workers and never takes a live grading's slot.
        Returns the claims still to grade the usual way (the misses,
        leased to ``worker_id``) and whether the batch was full (more may wait).
        """
        queued = self.services.waiters.regrades
        if time.monotonic() < self._idle_until and queued == self._idle_at:
            return [], False  # live gradings pay no extra query
        settings = self.services.settings
        limit = max(free, self._batch)
        if limit <= 0:
            return [], False
        claims = await self.services.store.queue.claim_pending(
            worker_id, limit=limit, lease_seconds=settings.lease_seconds, regrade=True
        )
        if not claims:
            self._idle_until, self._idle_at = time.monotonic() + settings.poll_seconds, queued
        try:
            misses = await self._resolve(worker_id, claims)
        except Exception:  # nothing stored: every item goes the usual way
            log.exception("resolving %d regrade items from the cache failed", len(claims))
            misses = claims
        if claims:
            self._batch = 0 if misses else min(FAST_BATCH, 2 * limit)
        if len(misses) > free:  # a batch grown on hits: the slots grade ``free`` of them
            spare = misses[max(free, 0) :]
            misses = misses[: max(free, 0)]
            try:
                await self.services.store.queue.release_leases(
                    [claim.grading_id for claim in spare], worker_id
                )
            except Exception:  # the spares' leases lapse; the slots still get their misses
                log.exception("giving back %d spare regrade items failed", len(spare))
        return misses, len(claims) == limit

    async def _resolve(self, worker_id: str, claims: list[Claim]) -> list[Claim]:
        """Store the claims answered by the cache; the misses."""
        if not claims:
            return []
        lookup = _SharedLookup(self.services.store.cache.get_many)
        results = await asyncio.gather(*(self._answer(claim, lookup) for claim in claims))
        hits: list[tuple[Claim, FinishedGrading]] = []
        misses: list[Claim] = []
        for claim, answered in zip(claims, results, strict=True):
            if answered is None:
                misses.append(claim)
                continue
            rubric, result = answered
            result, provisional = await self._marks(claim, rubric, result)
            if confirmable(self.services.settings.confirm_judge, result):
                misses.append(claim)  # the confirming judge has its say the usual way
                continue
            digest = self.services.backends.digest_of(claim.judge_spec)
            finished = FinishedGrading(
                claim.grading_id,
                worker_id,
                result,
                provisional,
                judge_digest=digest,
                claim_count=claim.claim_count,
            )
            hits.append((claim, finished))
        for grading_id in await self._store(hits, misses):
            self.services.waiters.completed(grading_id)
        return misses

    async def _store(
        self, hits: list[tuple[Claim, FinishedGrading]], misses: list[Claim]
    ) -> list[str]:
        """Store the hits in one transaction; if that fails, one by one (those that fail
        alone become misses; those refused after a database fault, which the batch's
        commit may have stored unacknowledged, are asked whether it did). The ids of the
        gradings stored."""
        if not hits:
            return []
        queue, current = self.services.store.queue, self.services.rubrics.current
        done: list[bool | None] = []
        try:
            done.extend(await queue.complete_many([f for _, f in hits], current=current))
        except Exception as exc:
            log.exception("storing %d cached regrade verdicts failed; one by one", len(hits))
            faulted = database_fault(exc)
            done.clear()
            for claim, finished in hits:
                try:
                    [alone] = await queue.complete_many([finished], current=current)
                except Exception:
                    log.exception("storing grading %s failed; the usual way", claim.grading_id)
                    misses.append(claim)
                    done.append(None)
                    continue
                done.append(alone or (faulted and await self._landed_quietly(claim)))
        stored = []
        for (_, finished), ok in zip(hits, done, strict=True):
            if ok is not None:
                self._account(finished.result, "completed" if ok else "discarded")
            if ok:
                stored.append(finished.grading_id)
        return stored

    async def _landed_quietly(self, claim: Claim) -> bool:
        """Whether ``claim``'s refused verdict was stored by the faulted batch (``landed``);
        False, counted discarded, when that is not known."""
        try:
            return bool(await self._landed(claim))
        except Exception:
            log.exception("whether grading %s was stored could not be read", claim.grading_id)
            return False

    async def _answer(
        self, claim: Claim, lookup: _SharedLookup
    ) -> tuple[Rubric, GradingResult] | None:
        """The claim's rubric and grading from cached answers only; None when it needs the
        judge or anything unusual (unknown rubric, a panel, sampling, a bad input)."""
        rubric = await self.services.rubrics.resolve(claim.rubric_id, claim.rubric_version)
        if rubric is None or not self.eligible(claim.judge_spec):
            return None
        try:
            real = self.services.backends.limited(claim.judge_spec)
            # keyed on the judge's digest and the ground truth's source as the slow path
            # is (a regrade: unverified too)
            digest = self.services.backends.digests.of(real)
            keyed = DigestKeyedCache(
                lookup, digest, unverified=True, namespace=claim.cache_namespace
            )
            grader = grader_for(self.services.settings, _NoJudge(real), cache=keyed)
            result = await grader.grade(
                rubric, claim.ground_truth, claim.diagnosis, screening=claim.screened()
            )
        except Exception:  # a bad spec, input or cache read: the slow path says why
            return None
        if not result.calls or not all(call.cached for call in result.calls):
            return None
        if result.status == "unscored" and result.unscored_reason in RETRY_LATER:
            return None
        return rubric, result
