"""What is behind a judge's name: the digest of its model, kept per process, and its changes.

A judge is named ``backend:model``, but the name stays while what it names changes: a
cloud model is updated behind the same id, a local model file is replaced behind the
same Ollama tag or server address. The *digest* says which model answers:

- asked of the server by a backend that can tell (``judge.backends.base.DigestAware``):
  Ollama's digest of the tag, a llama.cpp server's model file (``/props``), an
  OpenAI-compatible server's own description of the model (``/v1/models``);
- else the ``system_fingerprint`` of its completions, once one was seen
  (``fingerprint:<value>``), for a backend whose completions' fingerprint is not the
  digest it reads itself (``judge.backends.base.DIGEST_FINGERPRINTS``: Ollama's is);
- else None: the judge reports nothing, and nothing proves that two of its replies came
  from the same model.

A digest is kept to :data:`DIGEST_CHARACTERS` (what the tables that store it hold): one
longer (a fingerprint near its 256 characters, an odd server's digest) is replaced by
the sha256 of what it names, ``fingerprint:sha256:<hex>`` or ``sha256:<hex>``
(:func:`fitted_digest`); a digest that fits is kept as it is. A panel's digest is its
members', comma-separated (:func:`panel_digest`), kept to
:data:`PANEL_DIGEST_CHARACTERS` (what a grading's column holds) the same way:
``panel:sha256:<hex>`` of the members' digests when they would be longer.

A :class:`DigestTracker` keeps each judge's digest for ``refresh_seconds`` and asks
again after that, after a failed call (:meth:`DigestTracker.stale`) and when a
completion's fingerprint differs from the last one seen (:meth:`DigestTracker.observe`).
Every new digest is told to its listeners (a :class:`DigestChange`; ``previous`` is None
the first time in a process): the service stores it and, when it differs from the one
stored before, announces the change. A listener that could not take it (the database was
busy) is told again at the next use, and the digest is asked again then. Readers of
anything keyed on digests (qualifications) go by the digest learned
(:meth:`DigestTracker.learned`), stored or not, and drop what they cached when
:attr:`DigestTracker.generation` moves: when a new digest is learned, and again once
the listeners were told of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from judge.backends.base import DIGEST_FINGERPRINTS, DigestAware, JudgeBackend
from judge.cache import FINGERPRINT

__all__ = [
    "DIGEST_CHARACTERS",
    "PANEL",
    "PANEL_DIGEST_CHARACTERS",
    "BackendDigest",
    "DigestChange",
    "DigestTracker",
    "fitted_digest",
    "panel_digest",
]

#: the longest digest kept: the ``judge_digest`` columns hold 256 characters
DIGEST_CHARACTERS = 256
#: the longest digest a grading keeps: its ``judge_digest`` column holds 512 characters,
#: room for a panel's members' digests
PANEL_DIGEST_CHARACTERS = 512
#: the kind of a panel's digest hashed to fit (``panel:sha256:<hex>``)
PANEL = "panel:"


def fitted_digest(
    digest: str, *, kind: str | None = None, characters: int = DIGEST_CHARACTERS
) -> str:
    """``digest`` when it fits ``characters``, else the sha256 of what it names under its
    kind: ``fingerprint:sha256:<hex of the fingerprint>`` for one made of a completion's
    fingerprint, ``sha256:<hex of the digest>`` for any other; ``kind`` given (``panel:``)
    prefixes the sha256 of the whole ``digest``."""
    if len(digest) <= characters:
        return digest
    if kind is None:
        kind = FINGERPRINT if digest.startswith(FINGERPRINT) else ""
        digest = digest.removeprefix(kind)
    return f"{kind}sha256:{hashlib.sha256(digest.encode()).hexdigest()}"


def panel_digest(digests: Sequence[str | None]) -> str | None:
    """The digest of a panel (or of one judge) whose members' digests are ``digests``,
    in the panel's order: comma-separated, ``?`` for one unknown; ``panel:sha256:<hex>``
    of that text when it is longer than :data:`PANEL_DIGEST_CHARACTERS`. None when no
    member's is known."""
    if not any(digests):
        return None
    joined = ",".join(d or "?" for d in digests)
    return fitted_digest(joined, kind=PANEL, characters=PANEL_DIGEST_CHARACTERS)


@dataclass(frozen=True, slots=True)
class DigestChange:
    """A judge's digest as newly learned; ``previous`` is the one its listeners took
    before in this process (None: none yet)."""

    backend: str
    model: str
    base_url: str | None
    previous: str | None
    current: str

    @property
    def judge(self) -> str:
        """The judge's name, ``backend:model``, as the digest is stored under it."""
        return f"{self.backend}:{self.model}"


#: told of every new digest (awaited before the digest is used); whether it took it:
#: False (it could not store it) and it is told again at the next use
Listener = Callable[[DigestChange], Awaitable[bool]]


@dataclass
class _Known:
    digest: str | None
    at: float
    fingerprint: str | None = None
    stale: bool = False
    #: the digest the listeners last took (None: none yet in this process)
    told: str | None = None


def _key(backend: JudgeBackend) -> tuple[str, str, str | None]:
    return (backend.name, backend.model, backend.base_url)


def _name(backend: JudgeBackend) -> str:
    return f"{backend.name}:{backend.model}"


class DigestTracker:
    """Every judge's digest in this process, asked again when it may have changed."""

    def __init__(
        self, *, refresh_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Keep a digest ``refresh_seconds`` (0: ask on every use)."""
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._known: dict[tuple[str, str, str | None], _Known] = {}
        self._locks: dict[tuple[str, str, str | None], asyncio.Lock] = {}
        self._listeners: list[Listener] = []
        #: the digest last learned behind each judge's name, whatever its address
        self._learned: dict[str, str] = {}
        #: moves when a new digest is learned and again once its listeners were told:
        #: a reader of anything keyed on digests (qualifications) drops what it cached
        #: when this moves
        self.generation = 0

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every new digest."""
        self._listeners.append(listener)

    def known(self, backend: JudgeBackend) -> str | None:
        """The digest last learned of ``backend``'s judge, without asking."""
        entry = self._known.get(_key(backend))
        return None if entry is None else entry.digest

    def learned(self, judge_name: str) -> str | None:
        """The digest last learned behind ``judge_name`` (``backend:model``, the name
        digests are stored and calibration runs are kept under), at any of its
        addresses, without asking; stored or not. None: none learned in this process."""
        return self._learned.get(judge_name)

    def stale(self, backend: JudgeBackend) -> None:
        """Ask again on next use (a call failed: the server may have been replaced)."""
        entry = self._known.get(_key(backend))
        if entry is not None:
            entry.stale = True

    def observe(self, backend: JudgeBackend, fingerprint: str | None) -> bool:
        """Note a completion's fingerprint; True when it differs from the last one seen
        (the digest is asked again on next use)."""
        if fingerprint is None:
            return False
        key = _key(backend)
        entry = self._known.setdefault(key, _Known(digest=None, at=float("-inf"), stale=True))
        changed = entry.fingerprint is not None and entry.fingerprint != fingerprint
        if entry.fingerprint != fingerprint:
            entry.stale = True
        entry.fingerprint = fingerprint
        return changed

    async def current(self, backend: JudgeBackend) -> str | None:
        """The judge's digest, asked of the server when not known recently (kept to
        :data:`DIGEST_CHARACTERS`: :func:`fitted_digest`); None when the judge reports
        none."""
        key = _key(backend)
        if self._fresh(key):
            return self._known[key].digest
        async with self._locks.setdefault(key, asyncio.Lock()):
            if self._fresh(key):
                return self._known[key].digest
            digest = await backend.model_digest() if isinstance(backend, DigestAware) else None
            entry = self._known.get(key)
            probed = (
                entry is not None
                and entry.digest is not None
                and not entry.digest.startswith(FINGERPRINT)
            )
            # a judge with no digest of its own is known by its replies' fingerprint; one
            # whose digest could not be read just now (server away) has not changed, and
            # neither has one whose replies carry the very digest it reads (Ollama's)
            stands_in = not probed and backend.name not in DIGEST_FINGERPRINTS
            if digest is None and entry is not None and entry.fingerprint and stands_in:
                digest = FINGERPRINT + entry.fingerprint
            await self._learn(backend, None if digest is None else fitted_digest(digest))
            return self._known[key].digest

    def _fresh(self, key: tuple[str, str, str | None]) -> bool:
        entry = self._known.get(key)
        return (
            entry is not None
            and not entry.stale
            and self._clock() - entry.at < self.refresh_seconds
        )

    async def _learn(self, backend: JudgeBackend, digest: str | None) -> None:
        key = _key(backend)
        entry = self._known.get(key)
        if entry is None:
            entry = self._known[key] = _Known(digest=None, at=0.0)
        entry.at, entry.stale = self._clock(), False
        if digest is None:  # not reported now (or unreachable): what was known stands
            return
        if digest != entry.digest:  # readers go by the digest learned from now on
            self.generation += 1
        entry.digest = self._learned[_name(backend)] = digest
        if digest != entry.told:
            change = DigestChange(backend.name, backend.model, backend.base_url, entry.told, digest)
            taken = [await listener(change) for listener in self._listeners]
            if all(taken):
                entry.told = digest
            else:  # told again, and the digest asked again, at the next use
                entry.stale = True
            self.generation += 1  # what was read while the listeners ran is dropped too

    def of(self, backend: JudgeBackend) -> BackendDigest:
        """``backend``'s digest source, as a judge cache asks for it."""
        return BackendDigest(self, backend)


@dataclass(frozen=True, slots=True)
class BackendDigest:
    """One judge's digest: what ``judge.cache.DigestKeyedCache`` keys its entries on."""

    tracker: DigestTracker
    backend: JudgeBackend

    async def digest(self) -> str | None:
        """The judge's current digest (see :meth:`DigestTracker.current`)."""
        return await self.tracker.current(self.backend)

    def observe(self, fingerprint: str | None) -> bool:
        """Note a completion's fingerprint; True when it shows a change."""
        return self.tracker.observe(self.backend, fingerprint)
