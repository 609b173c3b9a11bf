"""The judge cache in the database: many entries looked up in one query."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from judge.calls import Completion
from storage import Store
from storage.judge_cache import DbJudgeCache
from tests.support.statements import statements


async def test_prefetched_keys_answer_from_one_query(store: Store, engine: Engine) -> None:
    for n in range(2):
        completion = Completion(text=f"reply {n}", model="m")
        await store.cache.put(f"key-{n}", completion, backend="openai", model="m")
    cache = DbJudgeCache(store.cache, backend="openai", model="m")
    with statements(engine) as seen:
        await cache.prefetch(["key-0", "key-1", "key-2"])
        hits = [await cache.get(f"key-{n}") for n in range(3)]
        assert [h.text if h else None for h in hits] == ["reply 0", "reply 1", None]
        assert _cache_reads(seen) == 1  # the misses are known too: no query per key
        assert await cache.get("key-3") is None  # not prefetched: looked up
        assert _cache_reads(seen) == 2


def _cache_reads(seen: list[str]) -> int:
    return sum("judge_cache" in statement for statement in seen)
