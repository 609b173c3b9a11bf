"""The judge cache in the database: its entries are the stored calls that carry a key.

A reply the cache keeps is stored once, in its judge call, with its grading; the entries
of the ``judge_cache`` table (made before calls carried their key) are still found. An
entry replays its reply with the confidences it gave live (its log-probabilities).
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from judge.calls import Completion, TokenLogprob
from judge.confidence import answer_token_confidences
from storage import JudgeCacheRecord, JudgeCallRecord, Store
from storage.judge_cache import DbJudgeCache
from tests.conftest import Clock
from tests.storage.helpers import graded_result, judge_call, submit
from tests.support.statements import statements


async def _store_reply(
    store: Store,
    key: str | None,
    text: str,
    *,
    run: str,
    logprobs: tuple[TokenLogprob, ...] | None = None,
) -> None:
    """Grade a new submission with one call answered ``text`` (with ``logprobs``), kept
    under ``key``."""
    outcome = await submit(store, idempotency_key=run)
    [claim] = await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    assert claim.grading_id == outcome.grading.id
    call = judge_call()
    assert call.completion is not None
    completion = call.completion.model_copy(update={"text": text, "logprobs": logprobs})
    call = call.model_copy(update={"completion": completion, "cache_key": key})
    result = graded_result().model_copy(update={"calls": (call,)})
    assert await store.queue.complete(claim.grading_id, "w1", result)


async def test_a_stored_call_with_a_key_is_an_entry(store: Store, clock: Clock) -> None:
    await _store_reply(store, "key-a", "first reply", run="r1")
    clock.advance(1)
    await _store_reply(store, "key-a", "a later reply", run="r2")  # a concurrent miss
    await _store_reply(store, None, "not kept", run="r3")
    found = await store.cache.get_many(["key-a", "key-b"])
    assert list(found) == ["key-a"]
    assert found["key-a"] == Completion(
        text="first reply",  # the oldest call under a key wins
        model="judge-model-2025",
        fingerprint="fp_1",
        prompt_tokens=900,
        completion_tokens=300,
        response_format="json_schema",
    )
    assert await store.cache.cached_keys(["key-a", "key-b"]) == {"key-a"}
    assert await store.cache.get("key-b") is None


async def test_entries_made_before_calls_carried_keys_are_found(
    store: Store, engine: Engine, clock: Clock
) -> None:
    with engine.begin() as connection:
        connection.execute(
            insert(JudgeCacheRecord.__table__),  # type: ignore[attr-defined]
            {
                "key": "old",
                "backend": "openai",
                "model": "judge-model",
                "completion_text": "an old reply",
                "response_model": "judge-model-2024",
                "created_at": clock(),
            },
        )
    clock.advance(1)
    await _store_reply(store, "old", "a newer reply under the same key", run="r1")
    await _store_reply(store, "new", "a reply kept in its call", run="r2")
    found = await store.cache.get_many(["old", "new"])
    assert found["old"] == Completion(text="an old reply", model="judge-model-2024")
    assert found["new"].text == "a reply kept in its call"
    assert await store.cache.cached_keys(["old", "new", "none"]) == {"old", "new"}


def _one_token_a_character(text: str) -> tuple[TokenLogprob, ...]:
    """``text`` as one token a character, but each answer value one token where the judge
    was unsure (P(yes) 0.4, P(no) 0.6, "maybe" impossible: a log-probability of -inf)."""
    tokens: list[TokenLogprob] = []
    at = 0
    while at < len(text):
        word = next((w for w in ("yes", "no") if text.startswith(f'"{w}"', at - 1)), None)
        if word is None or not text.endswith('"answer": ', 0, at - 1):
            tokens.append(TokenLogprob(token=text[at], logprob=-0.01))
            at += 1
            continue
        top = (("yes", math.log(0.4)), ("no", math.log(0.6)), ("maybe", -math.inf))
        tokens.append(TokenLogprob(token=word, logprob=dict(top)[word], top=top))
        at += len(word)
    return tuple(tokens)


async def test_an_entry_replays_the_confidences_its_reply_gave_live(
    store: Store, engine: Engine
) -> None:
    """A reply's confidences are read from its answer tokens' log-probabilities: its
    entry keeps those (and the text between them as one token each), so the reply
    served from the cache gives the same confidence to every question, and the entry
    stays about the size of the reply. A call that is no entry keeps none. The audit log
    covers the calls with what they keep (the store fixture verifies it)."""
    text = '{"D1-Q1": {"answer": "yes"}, "D1-Q2": {"answer": "no"}}'
    live = _one_token_a_character(text)
    await _store_reply(store, "key-lp", text, run="r1", logprobs=live)
    await _store_reply(store, None, text, run="r2", logprobs=live)
    found = await store.cache.get_many(["key-lp"])
    replayed = found["key-lp"].logprobs
    assert replayed is not None and len(replayed) == 5  # 2 answers, 3 texts around them
    assert answer_token_confidences(replayed) == answer_token_confidences(live)
    assert answer_token_confidences(replayed) == pytest.approx({"D1-Q1": 0.4, "D1-Q2": 0.4})
    assert "".join(t.token for t in replayed) == text
    with engine.connect() as connection:
        query = select(col(JudgeCallRecord.cache_key), col(JudgeCallRecord.logprobs))
        rows = {key: logprobs for key, logprobs in connection.execute(query)}
    assert rows[None] is None and rows["key-lp"] is not None


async def test_prefetched_keys_answer_from_one_query(store: Store, engine: Engine) -> None:
    for n in range(2):
        await _store_reply(store, f"key-{n}", f"reply {n}", run=f"r{n}")
    cache = DbJudgeCache(store.cache)
    with statements(engine) as seen:
        await cache.prefetch(["key-0", "key-1", "key-2"])
        hits = [await cache.get(f"key-{n}") for n in range(3)]
        assert [h.text if h else None for h in hits] == ["reply 0", "reply 1", None]
        assert _cache_reads(seen) == 1  # the misses are known too: no query per key
        assert await cache.get("key-3") is None  # not prefetched: looked up
        assert _cache_reads(seen) == 2


async def test_keeping_a_reply_writes_nothing_until_its_call_is_stored(
    store: Store, engine: Engine
) -> None:
    cache = DbJudgeCache(store.cache)
    with statements(engine) as seen:
        assert await cache.put("key-x", Completion(text="reply", model="m")) == "key-x"
    assert seen == []
    assert await store.cache.get("key-x") is None


def _cache_reads(seen: list[str]) -> int:
    return sum("judge_cache" in statement for statement in seen)
