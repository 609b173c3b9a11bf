"""The judge cache in the database: completions of deterministic requests by key.

An entry is the judge call that brought the completion: a ``judge_call`` row whose
``cache_key`` is set (``judge.caller.JudgeCaller.remember`` sets it on the calls of a
usable conversation, and they are stored with their grading, in its transaction). The
``judge_cache`` table holds the entries made before calls carried their key: read, never
written. Where several rows hold one key, the oldest wins, as the first entry under a key
did when entries were inserted once and never changed.

An entry keeps what its reply's confidences are read from (the answer tokens'
log-probabilities, ``judge.confidence.confidence_tokens``: :func:`entry_logprobs`), so
a replay grades with the confidences the live reply gave. Entries made before they were
kept, and the old table's, replay without log-probabilities.

:class:`CacheRepository` reads entries; :class:`DbJudgeCache` adapts it to the
``judge.cache.JudgeCache`` protocol that the grader consults.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import JSON, func, literal, null, select, type_coerce, union_all
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.calls import Completion, JudgeCall, TokenLogprob
from judge.confidence import confidence_tokens
from storage.database import Database
from storage.regrade.tables import JudgeCacheRecord
from storage.tables import JudgeCallRecord

__all__ = ["CacheRepository", "DbJudgeCache", "entry_logprobs"]

#: keys per ``IN (...)`` query when checking many keys at once
_CHUNK = 500
#: a completion's fields, and the columns holding them: in the calls, in the old table
_FIELDS = (
    "text",
    "model",
    "fingerprint",
    "prompt_tokens",
    "completion_tokens",
    "response_format",
)
#: then the log-probabilities (``entry_logprobs``), which the old table never held
_CALL_COLUMNS = (
    *(
        col(getattr(JudgeCallRecord, name))
        for name in ("cache_key", "response_text", "response_model", *_FIELDS[2:])
    ),
    col(JudgeCallRecord.logprobs),
)
_OLD_COLUMNS = (
    *(
        col(getattr(JudgeCacheRecord, name))
        for name in ("key", "completion_text", "response_model", *_FIELDS[2:])
    ),
    type_coerce(null(), JSON).label("logprobs"),
)


def entry_logprobs(call: JudgeCall) -> list[dict[str, Any]] | None:
    """What the ``judge_call`` row of ``call`` keeps of its reply's log-probabilities:
    for a cache entry (``cache_key`` set) what its confidences are read from
    (``judge.confidence.confidence_tokens``), as ``[{"token", "logprob", "top"}]``;
    None for any other call, or a reply without them.

    A log-probability that JSON cannot hold (an infinity, NaN) is kept as its ``repr``.
    """
    completion = call.completion
    if call.cache_key is None or completion is None or not completion.logprobs:
        return None
    tokens = confidence_tokens(completion.logprobs)
    return [
        {
            "token": t.token,
            "logprob": _number(t.logprob),
            "top": [[alt, _number(logprob)] for alt, logprob in t.top],
        }
        for t in tokens
    ] or None


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)


def _logprobs(stored: list[dict[str, Any]] | None) -> tuple[TokenLogprob, ...] | None:
    """The log-probabilities :func:`entry_logprobs` kept, or None."""
    if not stored:
        return None
    return tuple(
        TokenLogprob(
            token=t["token"],
            logprob=float(t["logprob"]),
            top=tuple((alt, float(logprob)) for alt, logprob in t["top"]),
        )
        for t in stored
    )


class CacheRepository:
    """Reading judge cache entries (the calls keep them: see the module)."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def get(self, key: str) -> Completion | None:
        """The cached completion under ``key``, or None."""
        return (await self.get_many([key])).get(key)

    async def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        """The cached completions of those of ``keys`` that have one (one query per 500)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        return await self._db.run_read(_completions, wanted)

    async def cached_keys(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` have a cache entry."""
        wanted = list(dict.fromkeys(keys))
        return await self._db.run_read(_cached_keys, wanted) if wanted else set()

    async def average_completion_tokens(self, backend: str, model: str) -> float | None:
        """Mean completion tokens of this judge's real grade calls so far, or None."""
        query = select(func.avg(JudgeCallRecord.completion_tokens)).where(
            col(JudgeCallRecord.backend) == backend,
            col(JudgeCallRecord.model) == model,
            col(JudgeCallRecord.purpose) == "grade",
            col(JudgeCallRecord.cached).is_(False),
            col(JudgeCallRecord.completion_tokens).is_not(None),
        )
        value = await self._db.run_read(lambda s: s.execute(query).scalar_one_or_none())
        return float(value) if value is not None else None


def _entries(keys: Sequence[str], width: int) -> Any:
    """The entries under ``keys``, oldest first (the old table's before any call's), as
    rows of the first ``width`` columns of ``_CALL_COLUMNS`` (or ``_OLD_COLUMNS``), then
    the columns they are ordered by."""
    calls = select(
        *_CALL_COLUMNS[:width],
        literal(1).label("origin"),
        col(JudgeCallRecord.created_at),
        col(JudgeCallRecord.position),
    ).where(col(JudgeCallRecord.cache_key).in_(keys))
    old = select(
        *_OLD_COLUMNS[:width],
        literal(0).label("origin"),
        col(JudgeCacheRecord.created_at),
        literal(0).label("position"),
    ).where(col(JudgeCacheRecord.key).in_(keys))
    return union_all(old, calls).order_by("origin", "created_at", "position")


def _cached_keys(session: Session, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` have a cache entry, one query per 500."""
    found: set[str] = set()
    for start in range(0, len(keys), _CHUNK):
        found.update(row[0] for row in session.execute(_entries(keys[start : start + _CHUNK], 1)))
    return found


def _completions(session: Session, keys: Sequence[str]) -> dict[str, Completion]:
    """The cached completions of those of ``keys`` that have one, one query per 500."""
    found: dict[str, Completion] = {}
    width = len(_CALL_COLUMNS)
    for start in range(0, len(keys), _CHUNK):
        # plain rows, not ORM objects: a regrade reads thousands at once
        for row in session.execute(_entries(keys[start : start + _CHUNK], width)):
            if row[0] not in found:  # the oldest entry under a key wins
                fields = dict(zip(_FIELDS, row[1 : width - 1], strict=True))
                found[row[0]] = Completion(**fields, logprobs=_logprobs(row[width - 1]))
    return found


class DbJudgeCache:
    """``judge.cache.JudgeCache`` backed by the store.

    ``put`` writes nothing: the completion's call carries the key it returns
    (``JudgeCall.cache_key``) and is stored with its grading, in the grading's
    transaction. A call that is never stored (a batch engine rendering requests) leaves
    no entry.
    """

    def __init__(self, cache: CacheRepository) -> None:
        self._cache = cache
        #: keys looked up by ``prefetch``: their completion, or None for a miss
        self._fetched: dict[str, Completion | None] = {}

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Look up ``keys`` in one query; ``get`` of them then answers from memory."""
        found = await self._cache.get_many(k for k in keys if k not in self._fetched)
        self._fetched.update({k: found.get(k) for k in keys if k not in self._fetched})

    async def get(self, key: str) -> Completion | None:
        """The cached completion, or None."""
        if key in self._fetched:
            return self._fetched[key]
        return await self._cache.get(key)

    async def put(self, key: str, completion: Completion) -> str | None:
        """The key: the completion is kept once its call is stored."""
        return key
