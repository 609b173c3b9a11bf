"""The judge cache in the database: completions of deterministic requests by key.

:class:`CacheRepository` reads and writes the ``judge_cache`` table; :class:`DbJudgeCache`
adapts it to the ``judge.cache.JudgeCache`` protocol that the grader consults. Entries
are written once (insert-or-ignore) and never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.calls import Completion
from storage.database import Database
from storage.regrade.tables import JudgeCacheRecord
from storage.tables import JudgeCallRecord

__all__ = ["CacheRepository", "DbJudgeCache", "cache_row", "insert_cache_rows"]

#: keys per ``IN (...)`` query when checking many keys at once
_CHUNK = 500
#: the columns a completion is made of, and the key
_COLUMNS = tuple(
    col(getattr(JudgeCacheRecord, name))
    for name in (
        "key",
        "completion_text",
        "response_model",
        "fingerprint",
        "prompt_tokens",
        "completion_tokens",
        "response_format",
    )
)


class CacheRepository:
    """Reading and writing judge cache entries."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def get(self, key: str) -> Completion | None:
        """The cached completion under ``key``, or None."""
        record = await self._db.run_read(lambda s: s.get(JudgeCacheRecord, key))
        return None if record is None else _completion(record)

    async def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        """The cached completions of those of ``keys`` that have one (one query per 500)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        return await self._db.run_read(_completions, wanted)

    async def put(self, key: str, completion: Completion, *, backend: str, model: str) -> None:
        """Keep ``completion`` under ``key`` unless an entry is there already."""
        values = self.row(key, completion, backend=backend, model=model)
        await self._db.run(insert_cache_rows, [values])

    def row(self, key: str, completion: Completion, *, backend: str, model: str) -> dict[str, Any]:
        """The ``judge_cache`` row keeping ``completion`` under ``key``, stamped now."""
        return cache_row(key, completion, backend=backend, model=model, at=self._db.clock())

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


def _cached_keys(session: Session, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` have a cache entry, one query per 500."""
    found: set[str] = set()
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        query = select(col(JudgeCacheRecord.key)).where(col(JudgeCacheRecord.key).in_(chunk))
        found.update(session.execute(query).scalars())
    return found


def _completions(session: Session, keys: Sequence[str]) -> dict[str, Completion]:
    """The cached completions of those of ``keys`` that have one, one query per 500."""
    found: dict[str, Completion] = {}
    for start in range(0, len(keys), _CHUNK):
        query = select(*_COLUMNS).where(col(JudgeCacheRecord.key).in_(keys[start : start + _CHUNK]))
        # plain rows, not ORM objects: a regrade reads thousands at once
        for row in session.execute(query):
            found[row.key] = _completion(row)
    return found


def _completion(record: Any) -> Completion:
    """The completion of a cache entry (a record, or a row of ``_COLUMNS``)."""
    return Completion(
        text=record.completion_text,
        model=record.response_model,
        fingerprint=record.fingerprint,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        response_format=record.response_format,
    )


def cache_row(
    key: str, completion: Completion, *, backend: str, model: str, at: datetime
) -> dict[str, Any]:
    """The ``judge_cache`` row keeping ``completion`` under ``key``."""
    return {
        "key": key,
        "backend": backend,
        "model": model,
        "completion_text": completion.text,
        "response_model": completion.model,
        "fingerprint": completion.fingerprint,
        "response_format": completion.response_format,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "created_at": at,
    }


def insert_cache_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert cache rows in the caller's transaction; a key already present is left alone."""
    if not rows:
        return
    table = JudgeCacheRecord.__table__  # type: ignore[attr-defined]
    postgres = session.connection().dialect.name == "postgresql"
    dialect = postgresql if postgres else sqlite
    session.connection().execute(dialect.insert(table).on_conflict_do_nothing(), list(rows))


class DbJudgeCache:
    """``judge.cache.JudgeCache`` backed by the store, for one judge backend.

    With ``pending``, ``put`` only appends the row there: the worker stores those rows
    in the transaction that stores the grading, saving a write transaction per call.
    """

    def __init__(
        self,
        cache: CacheRepository,
        *,
        backend: str,
        model: str,
        pending: list[dict[str, Any]] | None = None,
    ) -> None:
        self._cache = cache
        self._backend = backend
        self._model = model
        self._pending = pending
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

    async def put(self, key: str, completion: Completion) -> None:
        """Keep the completion (the first one stored under a key wins)."""
        if self._pending is not None:
            row = self._cache.row(key, completion, backend=self._backend, model=self._model)
            self._pending.append(row)
            return
        await self._cache.put(key, completion, backend=self._backend, model=self._model)
