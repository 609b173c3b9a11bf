"""The judge cache in the grader: identical deterministic requests reach the judge once."""

from __future__ import annotations

import pytest

from judge import grader as grader_module
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.cache import MemoryJudgeCache, cache_key
from judge.calls import JudgeRequest, SamplingParams
from judge.grader import Grader, GradingFailed
from judge.prompt import build_messages, build_reply_schema
from judge.rubric import Rubric, load_rubric_dir

TRUTH = "[fault_spec] component=deployment/geo; namespace=hotel || wrong image tag"
DIAGNOSIS = "The geo deployment in hotel runs a wrong image tag and crashes at start."


def _rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


async def test_a_second_identical_grading_is_answered_from_the_cache() -> None:
    backend = ScriptedBackend(model="pass")
    cache = MemoryJudgeCache()
    grader = Grader(backend, cache=cache)
    first = await grader.grade(_rubric(), TRUTH, DIAGNOSIS)
    second = await grader.grade(_rubric(), TRUTH, DIAGNOSIS)
    assert len(backend.requests) == 1
    assert [c.cached for c in first.calls] == [False]
    assert [c.cached for c in second.calls] == [True]
    assert second.calls[0].attempts == ()
    assert second.answers == first.answers and second.outcome == first.outcome


async def test_a_different_diagnosis_or_model_is_not_a_hit() -> None:
    cache = MemoryJudgeCache()
    await Grader(ScriptedBackend(model="pass"), cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS)
    other_text = ScriptedBackend(model="pass")
    await Grader(other_text, cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS + " Really.")
    other_model = ScriptedBackend(model="fail")
    await Grader(other_model, cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS)
    assert len(other_text.requests) == 1 and len(other_model.requests) == 1


async def test_a_sampled_judge_is_never_cached() -> None:
    backend = ScriptedBackend(model="pass")
    cache = MemoryJudgeCache()
    grader = Grader(backend, params=SamplingParams(temperature=0.7), cache=cache)
    await grader.grade(_rubric(), TRUTH, DIAGNOSIS)
    await grader.grade(_rubric(), TRUTH, DIAGNOSIS)
    assert len(backend.requests) == 2 and cache.entries == {}


async def test_unusable_replies_are_not_cached_but_a_repaired_conversation_is() -> None:
    cache = MemoryJudgeCache()
    garbage = ScriptedBackend(["not json", "still not json"])
    unscored = await Grader(garbage, cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS)
    assert unscored.status == "unscored" and cache.entries == {}
    repaired = ScriptedBackend(["not json", scripted_reply])
    graded = await Grader(repaired, cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS)
    assert graded.status == "graded" and len(cache.entries) == 2
    again = ScriptedBackend([])
    replay = await Grader(again, cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS)
    assert again.requests == [] and [c.cached for c in replay.calls] == [True, True]


def test_the_key_covers_the_judge_identity() -> None:
    backend = ScriptedBackend(model="pass")
    grader = Grader(backend)
    request = JudgeRequest(
        messages=tuple(build_messages(_rubric(), TRUTH, DIAGNOSIS)),
        reply_schema=build_reply_schema(_rubric()),
        params=grader.params,
    )
    keys = {
        cache_key(request, backend="openai", model="m", base_url=None),
        cache_key(request, backend="openai", model="m", base_url="http://h/v1"),
        cache_key(request, backend="ollama", model="m", base_url=None),
        cache_key(request, backend="openai", model="m2", base_url=None),
    }
    assert len(keys) == 4 and None not in keys


async def test_calls_a_failed_grading_brings_carry_the_keys_their_replies_are_kept_under(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A grading that fails after its usable reply went to the cache brings the call
    with the key it is kept under, as a grading that ends does (stored with the call,
    the key keeps the entry)."""

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a fault after the reply was cached")

    monkeypatch.setattr(grader_module, "graded_result", broken)
    cache = MemoryJudgeCache()
    with pytest.raises(GradingFailed) as info:
        await Grader(ScriptedBackend(model="pass"), cache=cache).grade(_rubric(), TRUTH, DIAGNOSIS)
    [call] = info.value.calls
    assert call.cache_key is not None and call.cache_key in cache.entries
