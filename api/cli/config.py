"""``sre-judge config show``: the effective configuration, secrets masked.

Every setting is listed with its environment variable, its value in effect and whether
it was set, comes from the judge model's profile or is the default; then the judge
clients' own variables. Passwords in URLs and
API keys are masked; files that hold secrets are shown by path, never by content.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import click
from pydantic import SecretStr

from api.cli.edge import load_settings
from api.cli.options import format_option
from api.service.settings import mask_passwords, mask_url
from judge.masking import MASK

if TYPE_CHECKING:
    from api.service.settings import Settings
    from judge.profiles import JudgeProfile

__all__ = ["MASK", "config_group", "effective_config"]

#: the settings a judge model's profile gives when they are unset -> the profile's field
#: (``api.service.grader_factory``)
_PROFILED = {
    "judge_temperature": "temperature",
    "judge_max_tokens": "max_tokens",
    "judge_context_tokens": "context_tokens",
}
#: the judge clients' own variables: name -> whether the value is a secret
CLIENT_ENVIRONMENT = {"OPENAI_API_KEY": True, "OPENAI_BASE_URL": False, "OLLAMA_HOST": False}


def _shown(name: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, SecretStr):
        return MASK
    if name == "database_url":
        return mask_url(str(value))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return mask_passwords(value)
    if isinstance(value, list | tuple):
        return [_shown(name, item) for item in value]
    return value


def _judge_profile(settings: Settings) -> JudgeProfile | None:
    """The judge profile of ``SRE_JUDGE_JUDGE``'s model, or None: none matches, profiles
    are off, or a panel grades (each member is sent its own profile's values)."""
    if settings.panel:
        return None
    from api.service.grader_factory import profile_of_spec  # loads the grader: not at start

    return profile_of_spec(settings, settings.judge)


def _in_effect(settings: Settings, name: str, profile: JudgeProfile | None) -> Any:
    """What a setting is in effect: its value, or what the service makes of it unset
    (the worker count follows the judge's concurrency, checkpoints go to a default file,
    the judge's sampling and context window come from its model's ``profile``)."""
    if name == "workers":
        return settings.worker_count
    if name == "audit_checkpoint":
        from api.service.checkpoints import CHECKPOINTS_OFF, checkpoint_target

        return checkpoint_target(settings) or CHECKPOINTS_OFF
    if name in _PROFILED and profile is not None:
        from api.service.grader_factory import context_tokens_for, sampling_for

        if name == "judge_context_tokens":
            return context_tokens_for(settings, profile)
        return getattr(sampling_for(settings, profile), _PROFILED[name])
    return getattr(settings, name)


def _source(settings: Settings, name: str, profile: JudgeProfile | None) -> str:
    """Where a setting's value in effect comes from: ``set``, the judge profile that
    gives it unset, or ``default``."""
    if name in settings.model_fields_set:
        return "set"
    if name in _PROFILED and profile is not None and getattr(profile, _PROFILED[name]) is not None:
        return f"judge profile {profile.name}"
    return "default"


def effective_config(settings: Settings) -> list[dict[str, Any]]:
    """One row per setting and per judge client variable: name, variable, value in
    effect, source."""
    prefix = settings.model_config.get("env_prefix", "")
    profile = _judge_profile(settings)
    rows = [
        {
            "setting": name,
            "variable": f"{prefix}{name}".upper(),
            "value": _shown(name, _in_effect(settings, name, profile)),
            "source": _source(settings, name, profile),
        }
        for name in type(settings).model_fields
    ]
    for variable, secret in CLIENT_ENVIRONMENT.items():
        value = os.environ.get(variable)
        rows.append(
            {
                "setting": None,
                "variable": variable,
                "value": (MASK if secret else mask_passwords(value)) if value else None,
                "source": "set" if value else "unset",
            }
        )
    return rows


@click.group("config")
def config_group() -> None:
    """The service's configuration.

    \b
    Example:
      sre-judge config show
    """


@config_group.command("show")
@format_option("table", "json", legacy_json=True)
def config_show(fmt: str) -> None:
    """Print the effective configuration with secrets masked.

    JSON is one object, variable -> value.

    \b
    Example:
      SRE_JUDGE_JUDGE=ollama:qwen3:8b sre-judge config show --format json
    """
    settings = load_settings()
    rows = effective_config(settings)
    if fmt == "json":
        click.echo(json.dumps({row["variable"]: row["value"] for row in rows}, indent=2))
        return
    width = max(len(row["variable"]) for row in rows)
    click.echo(f"{'VARIABLE':<{width}}  VALUE  (SOURCE)")
    for row in rows:
        value = "" if row["value"] is None else row["value"]
        click.echo(f"{row['variable']:<{width}}  {value}  ({row['source']})")
