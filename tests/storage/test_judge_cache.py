"""The judge cache in the database: many entries looked up in one query."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from judge.calls import Completion
from storage import Store
from storage.judge_cache import DbJudgeCache


def _statements(engine: AsyncEngine) -> list[str]:
    seen: list[str] = []

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "judge_cache" in statement:
            seen.append(statement)

    return seen


async def test_prefetched_keys_answer_from_one_query(store: Store, engine: AsyncEngine) -> None:
    for n in range(2):
        completion = Completion(text=f"reply {n}", model="m")
        await store.cache.put(f"key-{n}", completion, backend="openai", model="m")
    cache = DbJudgeCache(store.cache, backend="openai", model="m")
    seen = _statements(engine)

    await cache.prefetch(["key-0", "key-1", "key-2"])
    hits = [await cache.get(f"key-{n}") for n in range(3)]

    assert [h.text if h else None for h in hits] == ["reply 0", "reply 1", None]
    assert len(seen) == 1  # the misses are known too: no query per key
    assert await cache.get("key-3") is None and len(seen) == 2  # not prefetched: looked up
