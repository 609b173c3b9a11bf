"""Judge profiles: how a judge model is asked when neither its settings nor the rubric say.

Small local models answer some asking modes far better than others (docs/judges.md, "Judge
quality": Qwen2.5-Coder-1.5B agrees with the labels at kappa 0.31 in ``extraction``
asking with ``compact`` replies and at -0.004 in ``single``). The measured choice per
model lives in ``judge/data/judge_profiles.toml``; :func:`profile_for` finds a model's
profile and :func:`choose_asking` applies the order every caller shares:

1. the judge settings (``SRE_JUDGE_JUDGE_ASKING``, ``SRE_JUDGE_JUDGE_REPLY_FORMAT``);
2. a rubric's own choice, when it differs from the rubric default;
3. the judge's profile;
4. the rubric defaults (``single``, ``full``).

A profile may also set what a model needs sampled differently from the service's
defaults: ``temperature``, ``max_tokens`` (a model that writes long replies) and
``context_tokens`` (its window). A setting given explicitly wins over them, a profile
over the settings' defaults (``api.service.grader_factory``). Operators add profiles of
their own models in a TOML file of the same shape (:func:`read_profiles`), matched
before the shipped ones; each member of a panel gets its own model's profile.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judge.rubric import Rubric
from judge.spec import split_spec
from judge.style import ReplyFormat

__all__ = [
    "AskingChoice",
    "AskingMode",
    "JudgeProfile",
    "choose_asking",
    "load_profiles",
    "profile_for",
    "profile_for_judge",
    "profile_for_spec",
    "read_profiles",
]

AskingMode = Literal["single", "per_question", "extraction"]

_DEFAULT_ASKING: AskingMode = "single"
_DEFAULT_REPLY: ReplyFormat = "full"


@dataclass(frozen=True, slots=True)
class JudgeProfile:
    """The measured default asking of the models matching ``models``."""

    name: str
    models: tuple[str, ...]
    asking: AskingMode | None = None
    reply_format: ReplyFormat | None = None
    #: sampling temperature (0-2), where ``SRE_JUDGE_JUDGE_TEMPERATURE`` is not set
    temperature: float | None = None
    #: the reply's token budget, where ``SRE_JUDGE_JUDGE_MAX_TOKENS`` is not set
    max_tokens: int | None = None
    #: the model's context window, where ``SRE_JUDGE_JUDGE_CONTEXT_TOKENS`` is not set
    context_tokens: int | None = None
    #: the measurement that justifies the profile, for people
    measured: str = ""

    def matches(self, model: str) -> bool:
        """Whether ``model`` (a judge spec's model part) matches one of the patterns."""
        folded = model.casefold()
        return any(fnmatch.fnmatchcase(folded, p.casefold()) for p in self.models)


@dataclass(frozen=True, slots=True)
class AskingChoice:
    """The asking mode and reply format a grading uses, and where each came from."""

    asking: AskingMode
    reply_format: ReplyFormat
    #: the profile that chose at least one of them, if any
    profile: str | None = None
    #: whether the reply format was chosen by a setting or a profile (not the rubric)
    reply_format_chosen: bool = False


class _Entry(BaseModel):
    """One ``[[profile]]`` table as a file may write it (strict: no key or type guessed)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    models: list[str] = Field(min_length=1)
    asking: AskingMode | None = None
    reply_format: ReplyFormat | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=16)
    context_tokens: int | None = Field(default=None, ge=256)
    measured: str = ""


def _problems(exc: ValidationError) -> str:
    """The entry's problems in one line: its unknown keys, then each bad value."""
    errors = exc.errors()
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
    told = [f"unknown keys {', '.join(unknown)}"] if unknown else []
    told += [
        f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}"
        for e in errors
        if e["type"] != "extra_forbidden"
    ]
    return "; ".join(told)


def _profile(entry: Mapping[str, object]) -> JudgeProfile:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a judge profile needs a name")
    try:
        valid = _Entry.model_validate(dict(entry))
    except ValidationError as exc:
        raise ValueError(f"judge profile {name}: {_problems(exc)}") from None
    return JudgeProfile(
        name=valid.name,
        models=tuple(valid.models),
        asking=valid.asking,
        reply_format=valid.reply_format,
        temperature=valid.temperature,
        max_tokens=valid.max_tokens,
        context_tokens=valid.context_tokens,
        measured=valid.measured,
    )


def _parse(text: str) -> tuple[JudgeProfile, ...]:
    document = tomllib.loads(text)
    unknown = sorted(set(document) - {"profile"})
    if unknown:  # a misspelt table ([[profiles]]) would mean no profile at all
        raise ValueError(f"unknown table(s) {', '.join(unknown)}: judge profiles are [[profile]]")
    entries = document.get("profile", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("judge profiles are [[profile]] tables")
    return tuple(_profile(entry) for entry in entries)


@cache
def load_profiles() -> tuple[JudgeProfile, ...]:
    """The profiles that ship with the package, in file order (first match wins)."""
    return _parse(resources.files("judge").joinpath("data/judge_profiles.toml").read_text("utf-8"))


@cache
def read_profiles(path: Path) -> tuple[JudgeProfile, ...]:
    """An operator's profiles file (the shipped file's shape), read once per process.

    Raises ``ValueError`` naming the file for one that cannot be read or is not valid.
    """
    try:
        return _parse(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise ValueError(f"judge profiles file {path}: {exc}") from exc


@lru_cache(maxsize=256)
def profile_for(model: str, first: tuple[JudgeProfile, ...] = ()) -> JudgeProfile | None:
    """The first profile whose patterns match ``model``: among ``first`` (an operator's),
    then the shipped ones; or None."""
    return next((p for p in (*first, *load_profiles()) if p.matches(model)), None)


def profile_for_judge(
    backend: str, model: str, first: tuple[JudgeProfile, ...] = ()
) -> JudgeProfile | None:
    """The profile of a model behind a real backend; a panel or scripted judge has none."""
    return profile_for(model, first) if backend in ("ollama", "openai") else None


def profile_for_spec(spec_text: str, first: tuple[JudgeProfile, ...] = ()) -> JudgeProfile | None:
    """:func:`profile_for_judge` of a judge spec (``ollama:qwen2.5-coder:1.5b@URL``)."""
    backend, model = split_spec(spec_text)[:2]
    return profile_for_judge(backend, model, first)


def choose_asking(
    rubric: Rubric,
    *,
    asking: AskingMode | None = None,
    reply_format: ReplyFormat | None = None,
    profile: JudgeProfile | None = None,
) -> AskingChoice:
    """The asking mode and reply format of a grading, in the order of the module doc."""
    chosen_asking, chosen_reply = asking, reply_format
    used: str | None = None
    if profile is not None and chosen_asking is None and rubric.asking == _DEFAULT_ASKING:
        chosen_asking = profile.asking
        used = profile.name if chosen_asking is not None else None
    if profile is not None and chosen_reply is None and rubric.reply_format == _DEFAULT_REPLY:
        chosen_reply = profile.reply_format
        used = profile.name if chosen_reply is not None else used
    return AskingChoice(
        asking=chosen_asking or rubric.asking,
        reply_format=chosen_reply or rubric.reply_format,
        profile=used,
        reply_format_chosen=chosen_reply is not None,
    )
