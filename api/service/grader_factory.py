"""One place that turns the settings into a Grader, for the service and the commands."""

from __future__ import annotations

from api.service.settings import Settings
from judge.backends.base import JudgeBackend
from judge.cache import JudgeCache
from judge.calls import SamplingParams
from judge.grader import Grader
from judge.profiles import AskingChoice, JudgeProfile, choose_asking, profile_for_judge
from judge.retry import RetryPolicy
from judge.rubric import Rubric
from judge.spec import split_spec

__all__ = ["asking_choice", "grader_for", "profile_of_spec"]


def grader_for(
    settings: Settings, backend: JudgeBackend, *, cache: JudgeCache | None = None
) -> Grader:
    """A grader with the configured sampling, retries, limits and asking mode."""
    return Grader(
        backend,
        params=SamplingParams(
            temperature=settings.judge_temperature,
            seed=settings.judge_seed,
            max_tokens=settings.judge_max_tokens,
            # Ollama gets the configured window as num_ctx; other servers know their own
            num_ctx=settings.judge_context_tokens if backend.name == "ollama" else None,
        ),
        retry=RetryPolicy(max_attempts=settings.judge_max_attempts),
        max_text_bytes=settings.max_text_bytes,
        context_tokens=settings.judge_context_tokens,
        context_overflow=settings.context_overflow,
        ground_truth_budget=settings.ground_truth_budget_chars,
        cache=cache,
        asking=settings.judge_asking,
        reply_format=settings.judge_reply_format,
        ask_as=settings.judge_ask_as,
        profile=_profile(settings, backend.name, backend.model),
    )


def profile_of_spec(settings: Settings, spec_text: str) -> JudgeProfile | None:
    """The profile of a judge spec's model (``judge.profiles``); None for a panel or a
    scripted judge, or when profiles are off (``SRE_JUDGE_JUDGE_PROFILE=none``)."""
    return _profile(settings, *split_spec(spec_text)[:2])


def _profile(settings: Settings, backend: str, model: str) -> JudgeProfile | None:
    return profile_for_judge(backend, model) if settings.judge_profile == "auto" else None


def asking_choice(settings: Settings, spec_text: str, rubric: Rubric) -> AskingChoice:
    """The asking mode and reply format the service uses for a judge and a rubric."""
    return choose_asking(
        rubric,
        asking=settings.judge_asking,
        reply_format=settings.judge_reply_format,
        profile=profile_of_spec(settings, spec_text),
    )
