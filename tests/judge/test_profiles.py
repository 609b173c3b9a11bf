"""Judge profiles (issue 18, item 5): a small local judge is asked the way measured best
for it (extraction asking, compact replies for Qwen2.5-Coder-1.5B) unless its settings or
the rubric choose, and profiles can be turned off. The real ``openai`` client talks to
the local test judge server, so what is checked is what the judge was actually asked.
"""

from __future__ import annotations

import json

import pytest

from api.service.grader_factory import asking_choice, grader_for
from api.service.qualification import identity_of
from api.service.settings import Settings
from judge.backends.openai import OpenAIBackend
from judge.backends.streaming import StreamLimits
from judge.profiles import JudgeProfile, choose_asking, load_profiles, profile_for, profile_for_spec
from judge.rubric import Rubric, load_rubric_dir
from tests.judge.test_extraction import CODED, DIAGNOSIS, TRUTH, claims
from tests.support.judge_server import running_judge_server, sregym_reply

QWEN = "qwen2.5-coder:1.5b"
PROFILE = JudgeProfile("small", ("small*",), asking="extraction", reply_format="compact")


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


@pytest.mark.parametrize(
    "model",
    [QWEN, "qwen2.5-coder:1.5b-instruct-q4_K_M", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf"],
)
def test_the_measured_small_model_has_its_profile(model: str) -> None:
    found = profile_for(model)
    assert found is not None and found.asking == "extraction"
    assert found.reply_format == "compact" and "kappa" in found.measured


@pytest.mark.parametrize("model", ["qwen2.5-coder:7b", "qwen3:8b", "gpt-4o-mini", "llama3.1:8b"])
def test_models_not_measured_have_none(model: str) -> None:
    assert profile_for(model) is None


def test_only_real_model_backends_have_profiles() -> None:
    assert profile_for_spec(f"ollama:{QWEN}@http://127.0.0.1:11434") is not None
    assert profile_for_spec(f"openai:{QWEN}") is not None
    assert profile_for_spec(f"scripted:{QWEN}") is None
    assert profile_for_spec(f"panel:ollama:{QWEN},openai:gpt-4o") is None


def test_every_shipped_profile_is_complete() -> None:
    profiles = load_profiles()
    assert profiles and len({p.name for p in profiles}) == len(profiles)
    assert all(p.models and p.measured and (p.asking or p.reply_format) for p in profiles)


def test_settings_then_the_rubrics_own_choice_then_the_profile(rubric: Rubric) -> None:
    plain = choose_asking(rubric, profile=PROFILE)
    assert (plain.asking, plain.reply_format, plain.profile) == ("extraction", "compact", "small")
    assert plain.reply_format_chosen
    set_by_hand = choose_asking(rubric, asking="per_question", reply_format="full", profile=PROFILE)
    assert (set_by_hand.asking, set_by_hand.reply_format, set_by_hand.profile) == (
        "per_question",
        "full",
        None,
    )
    own = rubric.model_copy(update={"asking": "per_question"})
    mixed = choose_asking(own, profile=PROFILE)
    assert (mixed.asking, mixed.reply_format) == ("per_question", "compact")
    none = choose_asking(rubric)
    assert (none.asking, none.reply_format, none.profile) == ("single", "full", None)
    assert not none.reply_format_chosen


async def _asked(settings: Settings, rubric: Rubric, replies: list[str]) -> list[dict]:
    with running_judge_server(replies=replies) as server:
        backend = OpenAIBackend(
            QWEN, base_url=server.openai_url, limits=StreamLimits(5, 5, None), logprobs=False
        )
        try:
            result = await grader_for(settings, backend).grade(rubric, TRUTH, DIAGNOSIS)
        finally:
            await backend.aclose()
    assert result.status == "graded", result.detail
    return server.requests


async def test_the_service_asks_a_profiled_judge_its_way(rubric: Rubric) -> None:
    settings = Settings(judge=f"openai:{QWEN}")
    rest = [
        json.dumps({"answer": "yes", "quote": "sets USER_PORT=9999"})
        if rubric.question(q.id).requires_quote
        else json.dumps({"answer": "yes"})
        for q in rubric.questions
        if q.id not in CODED
    ]
    requests = await _asked(settings, rubric, [claims(), *rest])
    assert "write down what it claims" in requests[0]["messages"][0]["content"]
    # compact replies ("quote", no reasoning) parsed: a full-format parser refuses them
    assert len(requests) == 1 + len(rest)


async def test_profiles_off_or_a_setting_ask_as_configured(rubric: Rubric) -> None:
    one_call = sregym_reply({q.id for q in rubric.questions}, evidence="sets USER_PORT=9999")
    for settings in (
        Settings(judge=f"openai:{QWEN}", judge_profile="none"),
        Settings(judge=f"openai:{QWEN}", judge_asking="single", judge_reply_format="full"),
    ):
        requests = await _asked(settings, rubric, [one_call])
        assert len(requests) == 1 and "write down what it claims" not in json.dumps(requests)


def test_a_profiled_judge_is_qualified_under_its_own_asking(rubric: Rubric) -> None:
    profiled = identity_of(Settings(judge=f"ollama:{QWEN}"), f"ollama:{QWEN}", rubric)
    assert profiled["asking_mode"] == "extraction"
    assert profiled["judge_settings"]["reply_format"] == "compact"
    off = Settings(judge=f"ollama:{QWEN}", judge_profile="none")
    plain = identity_of(off, f"ollama:{QWEN}", rubric)
    assert plain["asking_mode"] == "single" and "reply_format" not in plain["judge_settings"]
    assert asking_choice(off, f"ollama:{QWEN}", rubric).profile is None
