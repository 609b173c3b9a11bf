"""What the routes and workers share: settings, store, rubrics, judge backends, wake-ups."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from api.service.errors import UnknownReference
from api.service.settings import Settings
from judge.backends import EndpointQuirks, JudgeBackend, build_backend
from judge.backends.base import ContextWindowAware, DigestAware
from judge.calls import Completion, JudgeCall, JudgeRequest
from judge.errors import JudgeSpecError
from judge.identity import DigestTracker, panel_digest
from judge.rubric import Rubric, split_rubric_ref
from judge.spec import JudgeSpec, member_specs, parse_judge_spec
from storage import Claim, Store, is_postgres
from storage.judge_failures import CalledJudge

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = [
    "BackendPool",
    "JudgeHealth",
    "LimitedBackend",
    "RubricCatalog",
    "Services",
    "Waiters",
    "intake_at_once",
    "new_worker_id",
]

log = logging.getLogger("sre_judge.judges")


def new_worker_id() -> str:
    """host:pid:random, unique per worker (grading, import, delivery) of this process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class RubricCatalog:
    """Rubrics by id (the files' current versions) and by id and version (history)."""

    def __init__(self, rubrics: Mapping[str, Rubric], store: Store) -> None:
        self.current = dict(rubrics)
        self._store = store
        self._versions = {(r.id, r.version): r for r in rubrics.values()}

    async def resolve(self, rubric_id: str, version: str | None = None) -> Rubric | None:
        """The rubric of that id (current when no version) or None."""
        if version is None or (rubric_id, version) in self._versions:
            return self.resolve_in(None, rubric_id, version)
        return await self._store.db.run_read(self.resolve_in, rubric_id, version)

    def resolve_in(
        self, session: Session | None, rubric_id: str, version: str | None = None
    ) -> Rubric | None:
        """``resolve`` inside a use case's ``session`` (read only when not known yet)."""
        if version is None:
            return self.current.get(rubric_id)
        if (rubric_id, version) not in self._versions:
            if session is None:
                return None
            stored = self._store.catalog.read_rubric(session, rubric_id, version)
            if stored is None:
                return None
            self._versions[(rubric_id, version)] = stored
        return self._versions[(rubric_id, version)]

    async def find(self, text: str) -> Rubric | None:
        """The rubric named ``id`` (current version) or ``id@version``, or None (also for
        ``id@``, whose empty version names none: ``split_rubric_ref``)."""
        try:
            name, version = split_rubric_ref(text)
        except ValueError:
            return None
        return await self.resolve(name, version)

    async def require(self, text: str | None, *, default: str) -> Rubric:
        """As ``find`` (``default`` when None, never for an empty text, which names no
        rubric); ``UnknownReference`` naming ``rubric``."""
        ref = default if text is None else text
        rubric = await self.find(ref)
        if rubric is None:
            raise UnknownReference(f"no rubric {ref!r}", field="rubric", title="Unknown rubric")
        return rubric


@dataclass
class JudgeHealth:
    """What this process last learned of a judge endpoint (from a grading's judge call
    or a probe listing its models), and when.

    A failed call that still stands is not kept here but read from the database
    (``storage.judge_failures``), so that every process answers alike."""

    ok: bool | None = None
    reason: str | None = None
    at: datetime | None = None


class LimitedBackend:
    """A judge backend whose requests wait for a slot of their endpoint's limit.

    Only the request takes a slot: building the prompt, the judge cache, parsing,
    storing and the waits between retries happen outside it, so the endpoint's slots
    are busy with judge calls only and the judge's own limit is what bounds throughput.
    The optional capabilities a caller asks of a backend, its context window and its
    model digest, are passed through explicitly (None when the wrapped backend does not
    report one).
    """

    def __init__(self, backend: JudgeBackend, slots: asyncio.Semaphore) -> None:
        self.backend = backend
        self.name, self.model, self.base_url = backend.name, backend.model, backend.base_url
        self._slots = slots

    async def complete(self, request: JudgeRequest) -> Completion:
        """Send one request once a slot is free."""
        async with self._slots:
            return await self.backend.complete(request)

    async def probe(self) -> None:
        """Probe the wrapped backend (takes no slot)."""
        await self.backend.probe()

    async def aclose(self) -> None:
        """Close the wrapped backend's client."""
        await self.backend.aclose()

    async def context_window(self) -> int | None:
        """The wrapped backend's context window, if it reports one (takes no slot)."""
        if isinstance(self.backend, ContextWindowAware):
            return await self.backend.context_window()
        return None

    async def model_digest(self) -> str | None:
        """The wrapped backend's model digest, if it reports one (takes no slot)."""
        if isinstance(self.backend, DigestAware):
            return await self.backend.model_digest()
        return None


class BackendPool:
    """One backend per judge spec, and a concurrency limit per judge endpoint."""

    def __init__(
        self,
        settings: Settings,
        injected: Mapping[str, JudgeBackend] | None = None,
    ) -> None:
        self._settings = settings
        self._backends: dict[str, JudgeBackend] = dict(injected or {})
        self._limits: dict[tuple[str, str | None], asyncio.Semaphore] = {}
        self._limited: dict[str, LimitedBackend] = {}
        self.health: dict[str, JudgeHealth] = {}
        #: what each judge endpoint refused, learned once for all its specs
        self.quirks = EndpointQuirks()
        #: what model is behind each judge's name (``judge.identity``)
        self.digests = DigestTracker(refresh_seconds=settings.judge_digest_seconds)

    def get(self, spec_text: str) -> JudgeBackend:
        """The backend for a spec, built on first use."""
        if spec_text not in self._backends:
            spec = parse_judge_spec(spec_text)
            self._backends[spec_text] = build_backend(
                spec, limits=self._settings.stream_limits(), quirks=self.quirks
            )
        return self._backends[spec_text]

    def limited(self, spec_text: str) -> LimitedBackend:
        """The backend for a spec, its requests bounded by the endpoint's limit."""
        if spec_text not in self._limited:
            self._limited[spec_text] = LimitedBackend(self.get(spec_text), self.limit(spec_text))
        return self._limited[spec_text]

    def limit(self, spec_text: str) -> asyncio.Semaphore:
        """The semaphore bounding concurrent calls to this spec's endpoint."""
        spec: JudgeSpec = parse_judge_spec(spec_text)
        key = (spec.backend, spec.base_url)
        if key not in self._limits:
            self._limits[key] = asyncio.Semaphore(self._settings.judge_concurrency)
        return self._limits[key]

    def calls_of(self, spec_text: str, calls: Sequence[JudgeCall]) -> list[JudgeCall]:
        """Those of a grading's ``calls`` (a panel's are all its members') that went to
        the judge of ``spec_text``: the calls naming its backend, model and base URL."""
        judge = self.called_judge(spec_text)
        return [call for call in calls if (call.backend, call.model, call.base_url) == judge]

    def called_judge(self, spec_text: str) -> CalledJudge:
        """The judge of ``spec_text`` as its calls record it: ``(backend, model,
        base_url)`` of its backend."""
        backend = self.limited(spec_text)
        return (backend.name, backend.model, backend.base_url)

    async def follow_digests(self, judge_spec: str, calls: Sequence[JudgeCall]) -> None:
        """After a grading by ``judge_spec`` (one judge or a panel): note its calls'
        fingerprints and make sure each judge's digest is known, so that a model
        replaced behind a name is seen whether or not the judge cache was asked.

        A look-up that fails or takes over 10 s (a judge host too slow, a busy database)
        is logged and the digest known before stands: the identity is checked again at
        the judge's next use, and what the calls were made for (a grading, a calibration
        or canary run) is never lost for it."""
        for member in member_specs(judge_spec):
            backend = self.limited(member)
            for call in self.calls_of(member, calls):
                if call.completion is not None and not call.cached:
                    self.digests.observe(backend, call.completion.fingerprint)
            try:
                async with asyncio.timeout(10):
                    await self.digests.current(backend)
            except Exception:
                log.exception("checking the model digest of %s failed", member)

    def digest_of(self, judge_spec: str) -> str | None:
        """The digest of the model behind ``judge_spec`` as last seen (a panel: its
        members', comma-separated, ``?`` for one unknown, ``panel:sha256:<hex>`` of them
        when longer than a grading keeps: ``judge.identity.panel_digest``); None when
        none is known."""
        try:
            digests = [self.digests.known(self.limited(m)) for m in member_specs(judge_spec)]
        except JudgeSpecError:  # a recorded judge that no longer parses: nothing known
            return None
        return panel_digest(digests)

    def record(
        self,
        spec_text: str,
        *,
        ok: bool,
        reason: str | None = None,
    ) -> None:
        """Remember how the last call to a judge or probe of it went in this process:
        readiness probes it again once this is stale.
        A failed call stands against a later probe by the grading it deferred
        (``storage.judge_failures``), not here."""
        self.health[spec_text] = JudgeHealth(ok=ok, reason=reason, at=datetime.now(UTC))
        if not ok and spec_text in self._backends:  # the server may have been replaced
            self.digests.stale(self._backends[spec_text])

    async def aclose(self) -> None:
        """Close every backend's client."""
        for backend in self._backends.values():
            await backend.aclose()


@dataclass
class Waiters:
    """In-process wake-ups: workers when work arrives, requests when a grading ends."""

    work: asyncio.Event = field(default_factory=asyncio.Event)
    #: set when an import job is queued (``api.imports.jobs``)
    imports: asyncio.Event = field(default_factory=asyncio.Event)
    #: set when a regrade job with a batch engine is made (``api.regrade.batch_runner``)
    batches: asyncio.Event = field(default_factory=asyncio.Event)
    #: bumped whenever regrade items become claimable in this process (``regrade_queued``)
    regrades: int = 0
    _done: dict[str, asyncio.Event] = field(default_factory=dict)

    def regrade_queued(self) -> None:
        """Regrade items became claimable (a job made or resumed, a batch's results
        imported): wake the workers, and have them look for regrade items at once even
        if they found none a moment ago (``api.grading.regrade_fast``)."""
        self.regrades += 1
        self.work.set()

    def event_for(self, grading_id: str) -> asyncio.Event:
        """The event set when that grading is completed in this process."""
        return self._done.setdefault(grading_id, asyncio.Event())

    def completed(self, grading_id: str) -> None:
        """Wake whoever waits for that grading."""
        event = self._done.pop(grading_id, None)
        if event is not None:
            event.set()

    def forget(self, grading_id: str) -> None:
        """Stop tracking a grading nobody waits for any more."""
        self._done.pop(grading_id, None)


def intake_at_once(store: Store) -> int:
    """How many submissions one process stores at once: 2 on SQLite, 4 on PostgreSQL.

    Intake shares the event loop with the grading workers. Under a flood of
    submissions, each several database round trips, every one being stored puts more
    steps in the loop's queue, each worker step waits behind them, and the judge sits
    idle between calls (it ran at 15-16 of its 40 calls/s while 32 clients submitted at
    full speed). The submissions waiting their turn cost nothing. On SQLite (one
    writer) ``bench/throughput.py`` and ``bench/overhead.py`` chose two: one at a time
    kept the judge busiest but stored submissions evenly spaced, so each was claimed and
    completed in a transaction of its own (a quarter more CPU per grading); two keep
    intake's bursts, which claims and group commits batch.
    """
    return 4 if is_postgres(store.engine) else 2


class Handoff(Protocol):
    """Workers that take a new grading straight from intake, leased in the submission's
    own transaction, instead of claiming it from the queue afterwards."""

    def reserve(self) -> tuple[str, float] | None:
        """``(worker id, lease seconds)`` holding a free slot, or None (no slot free,
        claimable work already waiting, or shutting down)."""

    def take(self, claim: Claim | None) -> None:
        """Grade the grading leased with the reserved slot, or (None) free the slot."""

    def give_back(self, grading_id: str) -> None:
        """Free the reserved slot of a store that did not answer; ``grading_id``, should it
        be stored leased with the slot, is released so that any worker claims it."""


@dataclass
class Services:
    """Everything the app wires together, kept in ``app.state.services``."""

    settings: Settings
    store: Store
    rubrics: RubricCatalog
    backends: BackendPool
    waiters: Waiters = field(default_factory=Waiters)
    #: this process's grading workers while they take work handed over at intake
    handoff: Handoff | None = None
    #: bumped when a judge's qualification changes in this process (a drift canary
    #: demoted it): qualification lookups cached here are dropped at once
    qualification_changes: int = 0
    #: submissions being stored now, at most ``intake_at_once(store)``
    intake: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.intake = asyncio.Semaphore(intake_at_once(self.store))
