"""An operator's judge profiles: per model, what it is sent where no setting says otherwise.

``SRE_JUDGE_JUDGE_PROFILES_FILE`` names a TOML file of ``[[profile]]`` tables (the shipped
file's shape) matched before the shipped profiles; a profile's ``temperature``,
``max_tokens`` and ``context_tokens`` are what its model is sent unless the matching
setting is given. What reaches the model is checked on the wire: the real Ollama client
against respx.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import respx
from pydantic import ValidationError

from api.regrade.estimate import sampling_params
from api.service.grader_factory import asking_choice, grader_for, sampling_for
from api.service.qualification import judge_settings
from api.service.settings import Settings
from judge.backends.ollama import OllamaBackend
from judge.profiles import profile_for_spec, read_profiles
from judge.rubric import load_rubric_dir
from tests.judge.backend_servers import (
    DIGEST,
    OLLAMA_BASE,
    ollama_chat_reply,
    ollama_tags_reply,
    sent_json,
)
from tests.support.judge_server import sregym_reply

MODEL = "acme-judge:7b"
OPERATOR_PROFILES = """
[[profile]]
name = "acme"
models = ["acme-judge:*"]
temperature = 0.2
max_tokens = 3000
context_tokens = 8192
measured = "acme-judge 7b writes 2,000-2,600 reply tokens on the calibration set"

[[profile]]
name = "our-qwen"
models = ["qwen2.5-coder:1.5b*"]
asking = "single"
max_tokens = 700
"""


@pytest.fixture
def profiles_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(OPERATOR_PROFILES, encoding="utf-8")
    return path


@pytest.fixture
def ollama_api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=OLLAMA_BASE, assert_all_called=False) as router:
        yield router


async def _options_sent(settings: Settings, model: str, api: respx.MockRouter) -> dict[str, Any]:
    """Grade once with the service's grader for ``model``: the options Ollama was sent."""
    chat = api.post("/api/chat").mock(return_value=ollama_chat_reply(sregym_reply({"D1-Q1"})))
    api.get("/api/tags").mock(return_value=ollama_tags_reply((model, DIGEST)))
    backend = OllamaBackend(model, base_url=OLLAMA_BASE)
    try:
        rubric = load_rubric_dir()["sregym-rca"]
        await grader_for(settings, backend).grade(rubric, "[fault_spec] x || y", "a diagnosis")
    finally:
        await backend.aclose()
    options: dict[str, Any] = sent_json(chat, 0)["options"]
    return options


async def test_a_profiled_model_is_sent_its_profiles_sampling(
    profiles_file: Path, ollama_api: respx.MockRouter
) -> None:
    settings = Settings(judge_profiles_file=profiles_file)
    options = await _options_sent(settings, MODEL, ollama_api)
    assert (options["temperature"], options["num_predict"], options["num_ctx"]) == (0.2, 3000, 8192)


async def test_a_setting_given_explicitly_wins_over_the_profile(
    profiles_file: Path, ollama_api: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SRE_JUDGE_JUDGE_MAX_TOKENS", "1200")
    monkeypatch.setenv("SRE_JUDGE_JUDGE_TEMPERATURE", "0")
    settings = Settings(judge_profiles_file=profiles_file)
    options = await _options_sent(settings, MODEL, ollama_api)
    # the given settings win; the window the profile sets stays
    assert (options["temperature"], options["num_predict"], options["num_ctx"]) == (0, 1200, 8192)


async def test_a_model_without_a_profile_is_sent_the_settings_defaults(
    profiles_file: Path, ollama_api: respx.MockRouter
) -> None:
    defaults = Settings()
    settings = Settings(judge_profiles_file=profiles_file)
    options = await _options_sent(settings, "llama3.1:8b", ollama_api)
    assert options["temperature"] == defaults.judge_temperature
    assert options["num_predict"] == defaults.judge_max_tokens
    assert options["num_ctx"] != 8192  # estimated from the prompt, as without a profile


def test_the_operators_profiles_are_matched_before_the_shipped_ones(profiles_file: Path) -> None:
    first = read_profiles(profiles_file)
    spec = "ollama:qwen2.5-coder:1.5b@http://127.0.0.1:11434"
    assert profile_for_spec(spec).name == "small-qwen-coder"  # type: ignore[union-attr]
    mine = profile_for_spec(spec, first)
    assert mine is not None and (mine.name, mine.max_tokens) == ("our-qwen", 700)
    # its asking replaces the shipped profile's extraction/compact
    settings = Settings(judge_profiles_file=profiles_file)
    choice = asking_choice(settings, spec, load_rubric_dir()["sregym-rca"])
    assert (choice.asking, choice.reply_format, choice.profile) == ("single", "full", "our-qwen")
    # profiles off: neither the operator's nor the shipped ones
    off = Settings(judge_profiles_file=profiles_file, judge_profile="none")
    assert sampling_for(off, None).max_tokens == off.judge_max_tokens


def test_a_profiled_judge_is_qualified_under_what_it_is_sent(profiles_file: Path) -> None:
    # a calibration run is stored under the sampling its judge really gets, so changing
    # the profile's budget asks for a new calibration
    settings = Settings(judge_profiles_file=profiles_file)
    spec = f"ollama:{MODEL}"
    identity = judge_settings(settings, judge_spec=spec)
    assert (identity["temperature"], identity["max_tokens"]) == (0.2, 3000)
    plain = judge_settings(settings, judge_spec="ollama:llama3.1:8b")
    assert plain == judge_settings(Settings())  # unchanged for every other judge


async def test_the_regrade_estimate_keys_the_cache_as_the_grader_sends(
    profiles_file: Path,
) -> None:
    # the dry run counts cache hits under the sampling the regrade will send: a profile's
    # budget left out of one of them would promise hits the regrade never finds
    settings = Settings(judge_profiles_file=profiles_file)
    backend = OllamaBackend(MODEL, base_url=OLLAMA_BASE)
    try:
        services = SimpleNamespace(settings=settings)  # the estimate reads its settings
        estimated = sampling_params(services, backend)  # type: ignore[arg-type]
        assert estimated == grader_for(settings, backend).params
        assert estimated.max_tokens == 3000
    finally:
        await backend.aclose()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[[profile]]\nname = "x"\nmodels = ["m"]\nmax_token = 10\n', "unknown keys max_token"),
        ('[[profile]]\nname = "x"\nmodels = ["m"]\nmax_tokens = 8\n', "max_tokens"),
        ('[[profile]]\nname = "x"\nmodels = ["m"]\nmax_tokens = "many"\n', "max_tokens"),
        ('[[profile]]\nname = "x"\nmodels = ["m"]\ntemperature = 3\n', "temperature"),
        ('[[profile]]\nname = "x"\nmodels = ["m"]\ncontext_tokens = 100\n', "context_tokens"),
        ('[[profile]]\nname = "x"\nmodels = []\n', "models"),
        ('[[profile]]\nmodels = ["m"]\n', "needs a name"),
        ("profile = 3\n", "[[profile]] tables"),
        ("[[profile]\n", "profiles.toml"),
    ],
)
def test_a_profiles_file_that_cannot_be_used_stops_the_start_saying_why(
    tmp_path: Path, text: str, named: str
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValidationError) as caught:
        Settings(judge_profiles_file=path)
    message = str(caught.value)
    assert named in message and str(path) in message


def test_a_missing_profiles_file_stops_the_start(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(ValidationError, match=r"nowhere\.toml"):
        Settings(judge_profiles_file=missing)
