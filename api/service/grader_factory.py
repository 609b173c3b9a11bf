"""One place that turns the settings into a Grader, for the service and the commands.

What a judge model is sent comes from three places, in this order: a setting given
explicitly (``SRE_JUDGE_JUDGE_TEMPERATURE``, ``_MAX_TOKENS``, ``_CONTEXT_TOKENS``), the
model's judge profile (``judge.profiles``: an operator's file, then the shipped one),
the settings' defaults. Calibration identities, regrade estimates and cache keys use the
same :func:`sampling_for`, so a judge is identified by what it is really sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from api.service.settings import Settings, reply_budget_fault
from judge.backends.base import JudgeBackend
from judge.cache import JudgeCache
from judge.calls import SamplingParams
from judge.errors import JudgeSpecError
from judge.extraction import extraction_calls
from judge.grader import Grader
from judge.panel import PanelGrader, PanelMember
from judge.profiles import (
    AskingChoice,
    JudgeProfile,
    choose_asking,
    profile_for_judge,
    read_profiles,
)
from judge.retry import RetryPolicy
from judge.rubric import Rubric
from judge.spec import judge_identity, member_specs, parse_judge_spec, split_spec

__all__ = [
    "asking_choice",
    "calls_per_item",
    "check_reply_budget",
    "context_tokens_for",
    "grader_for",
    "profile_of_judge",
    "profile_of_spec",
    "sampled",
    "sampling_for",
]


def grader_for(
    settings: Settings, backend: JudgeBackend, *, cache: JudgeCache | None = None
) -> Grader:
    """A grader with the configured sampling, retries, limits and asking mode."""
    profile = profile_of_judge(settings, backend.name, backend.model)
    return Grader(
        backend,
        params=sampling_for(settings, profile, backend=backend.name),
        retry=RetryPolicy(max_attempts=settings.judge_max_attempts),
        max_text_bytes=settings.max_text_bytes,
        context_tokens=context_tokens_for(settings, profile),
        context_overflow=settings.context_overflow,
        ground_truth_budget=settings.ground_truth_budget_chars,
        cache=cache,
        asking=settings.judge_asking,
        reply_format=settings.judge_reply_format,
        ask_as=settings.judge_ask_as,
        profile=profile,
    )


def sampled(settings: Settings, grader: Grader, spec: str) -> Grader | PanelGrader:
    """``grader`` asking as live grading asks one judge: ``SRE_JUDGE_JUDGE_SAMPLES``
    samples at the sample temperature and their majority when more than one (as
    ``api.service.judging.build_grader``), so that calibration and the canary measure the
    judge they name, samples included."""
    if settings.judge_samples == 1:
        return grader
    return PanelGrader(
        [PanelMember(spec, grader)],
        samples=settings.judge_samples,
        sample_temperature=settings.judge_sample_temperature,
    )


def sampling_for(
    settings: Settings, profile: JudgeProfile | None, *, backend: str = ""
) -> SamplingParams:
    """The sampling a judge model is sent (see the module); Ollama also gets the context
    window as ``num_ctx`` (other servers know their own)."""
    window = context_tokens_for(settings, profile)
    return SamplingParams(
        temperature=_knob(settings, "judge_temperature", profile and profile.temperature),
        seed=settings.judge_seed,
        max_tokens=_knob(settings, "judge_max_tokens", profile and profile.max_tokens),
        num_ctx=window if backend == "ollama" else None,
    )


def context_tokens_for(settings: Settings, profile: JudgeProfile | None) -> int | None:
    """The judge model's context window: the setting, its profile's, or unknown (None)."""
    window: int | None = _knob(settings, "judge_context_tokens", profile and profile.context_tokens)
    return window


def check_reply_budget(settings: Settings, specs: Iterable[str]) -> None:
    """Refuse, naming both settings, a judge of ``specs`` whose reply budget is not
    below its context window as it will be sent (the settings, else its profile's):
    no prompt would fit, and every grading would end unscored (``context_overflow``).
    ValueError; a spec that does not parse is left to its own check."""
    for spec in specs:
        profile = profile_of_spec(settings, spec)
        window = context_tokens_for(settings, profile)
        max_tokens = sampling_for(settings, profile).max_tokens
        if window is None or max_tokens < window:
            continue
        given = []  # where each came from when not from the settings, as _knob reads it
        for name in ("max_tokens", "context_tokens"):
            if f"judge_{name}" in settings.model_fields_set:
                continue
            if profile is not None and getattr(profile, name) is not None:
                given.append(f"{name} from judge profile {profile.name}")
            else:
                given.append(f"{name} by default")
        source = f" ({'; '.join(given)})" if given else ""
        raise ValueError(
            reply_budget_fault(max_tokens, window, judge=judge_identity(spec), source=source)
        )


def _knob(settings: Settings, name: str, profiled: Any) -> Any:
    """A setting given explicitly, else the profile's value, else the setting's default."""
    if name in settings.model_fields_set or profiled is None:
        return getattr(settings, name)
    return profiled


def profile_of_spec(settings: Settings, spec_text: str) -> JudgeProfile | None:
    """The profile of a judge spec's model (``judge.profiles``); None for a panel or a
    scripted judge, or when profiles are off (``SRE_JUDGE_JUDGE_PROFILE=none``). The spec
    is read as the grader reads it (``Ollama:m`` is ``ollama:m``), so grading and
    qualification name one identity; a recorded spec that no longer parses as written."""
    try:
        parsed = parse_judge_spec(spec_text)
    except JudgeSpecError:
        return profile_of_judge(settings, *split_spec(spec_text)[:2])
    return profile_of_judge(settings, parsed.backend, parsed.model)


def profile_of_judge(settings: Settings, backend: str, model: str) -> JudgeProfile | None:
    """The profile of ``model`` behind ``backend``, as :func:`profile_of_spec`."""
    if settings.judge_profile != "auto":
        return None
    first = read_profiles(settings.judge_profiles_file) if settings.judge_profiles_file else ()
    return profile_for_judge(backend, model, first)


def asking_choice(settings: Settings, spec_text: str, rubric: Rubric) -> AskingChoice:
    """The asking mode and reply format the service uses for a judge and a rubric."""
    return choose_asking(
        rubric,
        asking=settings.judge_asking,
        reply_format=settings.judge_reply_format,
        profile=profile_of_spec(settings, spec_text),
    )


def calls_per_item(
    settings: Settings, spec_text: str, rubric: Rubric, ground_truth: str | None = None
) -> int:
    """Judge calls one grading takes when every reply is usable, summed over a panel's
    members (``panel:SPEC1,SPEC2``), each asked in its own mode: one per question when
    asked so; with extraction, one for the claims and one per question the claims do
    not answer (every question for a ``ground_truth`` without a header; None: one with
    a header); else one; times the judge's samples."""
    calls = 0
    for member in member_specs(spec_text):
        choice = asking_choice(settings, member, rubric)
        if choice.asking == "per_question":
            calls += len(rubric.questions)
        elif choice.asking == "extraction":
            calls += extraction_calls(rubric, ground_truth)
        else:
            calls += 1
    return calls * settings.judge_samples
