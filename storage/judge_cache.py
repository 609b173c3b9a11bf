"""The judge cache in the database: completions of deterministic requests by key.

:class:`CacheStore` reads and writes the ``judge_cache`` table; :class:`DbJudgeCache`
adapts it to the ``judge.cache.JudgeCache`` protocol that the grader consults. Entries
are written once (insert-or-ignore) and never changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select
from sqlmodel import col

from judge.calls import Completion
from storage.base import StoreBase
from storage.regrade_tables import JudgeCacheRecord
from storage.tables import JudgeCallRecord

__all__ = ["CacheStore", "DbJudgeCache"]

#: keys per ``IN (...)`` query when checking many keys at once
_CHUNK = 500


class CacheStore(StoreBase):
    """Reading and writing judge cache entries."""

    async def cache_get(self, key: str) -> Completion | None:
        """The cached completion under ``key``, or None."""
        async with self._read() as session:
            record = await session.get(JudgeCacheRecord, key)
        if record is None:
            return None
        return Completion(
            text=record.completion_text,
            model=record.response_model,
            fingerprint=record.fingerprint,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            response_format=record.response_format,
        )

    async def cache_put(
        self, key: str, completion: Completion, *, backend: str, model: str
    ) -> None:
        """Keep ``completion`` under ``key`` unless an entry is there already."""
        values = {
            "key": key,
            "backend": backend,
            "model": model,
            "completion_text": completion.text,
            "response_model": completion.model,
            "fingerprint": completion.fingerprint,
            "response_format": completion.response_format,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "created_at": self._clock(),
        }
        table = JudgeCacheRecord.__table__  # type: ignore[attr-defined]
        async with self._write() as session:
            await self._insert_ignore(session, table, values)

    async def cached_keys(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` have a cache entry."""
        wanted = list(dict.fromkeys(keys))
        found: set[str] = set()
        async with self._read() as session:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                query = select(col(JudgeCacheRecord.key)).where(
                    col(JudgeCacheRecord.key).in_(chunk)
                )
                found.update((await session.execute(query)).scalars())
        return found

    async def average_completion_tokens(self, backend: str, model: str) -> float | None:
        """Mean completion tokens of this judge's real grade calls so far, or None."""
        query = select(func.avg(JudgeCallRecord.completion_tokens)).where(
            col(JudgeCallRecord.backend) == backend,
            col(JudgeCallRecord.model) == model,
            col(JudgeCallRecord.purpose) == "grade",
            col(JudgeCallRecord.cached).is_(False),
            col(JudgeCallRecord.completion_tokens).is_not(None),
        )
        async with self._read() as session:
            value = (await session.execute(query)).scalar_one_or_none()
        return float(value) if value is not None else None


class DbJudgeCache:
    """``judge.cache.JudgeCache`` backed by the store, for one judge backend."""

    def __init__(self, store: CacheStore, *, backend: str, model: str) -> None:
        self._store = store
        self._backend = backend
        self._model = model

    async def get(self, key: str) -> Completion | None:
        """The cached completion, or None."""
        return await self._store.cache_get(key)

    async def put(self, key: str, completion: Completion) -> None:
        """Keep the completion (the first one stored under a key wins)."""
        await self._store.cache_put(key, completion, backend=self._backend, model=self._model)
