"""Whether the configured judge answers, where it was asked, and which setting changes it.

Shared by ``/readyz`` and by ``sre-judge serve``, which says on start which judge it
will use and whether it answered. The address is the endpoint really tried (the spec's
base URL, or the client's default from ``OPENAI_BASE_URL`` / ``OLLAMA_HOST``), without
any user, password, query or fragment: never a secret.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from api.service.judging import waiting_code
from judge.errors import JudgeCallError
from judge.spec import judge_identity, split_spec

if TYPE_CHECKING:
    from api.service.services import Services
    from judge.backends import JudgeBackend

__all__ = ["JUDGE_SETTING", "PANEL_SETTING", "judge_address", "judge_status", "startup_message"]

#: the environment variables that choose the judge (a panel wins over the judge)
JUDGE_SETTING = "SRE_JUDGE_JUDGE"
PANEL_SETTING = "SRE_JUDGE_PANEL"
#: a probe result stays fresh this long
PROBE_TTL = timedelta(seconds=15)
#: the default endpoints of the clients when neither the spec nor the environment sets one
_DEFAULTS = {"ollama": ("OLLAMA_HOST", "http://127.0.0.1:11434")}


def _public(url: str) -> str:
    """``url`` without credentials, query or fragment."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def judge_address(spec: str, backend: JudgeBackend | None = None) -> str | None:
    """The endpoint a judge spec is asked at, credentials removed; None if unknown."""
    kind, _, base_url = split_spec(spec)
    if base_url:
        return _public(base_url)
    endpoint = getattr(backend, "endpoint", None)
    if isinstance(endpoint, str) and endpoint:
        return _public(endpoint)
    if kind in _DEFAULTS:
        variable, default = _DEFAULTS[kind]
        return _public(os.environ.get(variable) or default)
    return None


async def _probe(services: Services, spec: str) -> dict[str, Any]:
    pool = services.backends
    health = pool.health.get(spec)
    if health is None or health.at is None or datetime.now(UTC) - health.at > PROBE_TTL:
        try:
            await asyncio.wait_for(pool.get(spec).probe(), timeout=5)
            pool.record(spec, ok=True)
        except (JudgeCallError, TimeoutError) as exc:
            failure = exc.code if isinstance(exc, JudgeCallError) else "judge_timeout"
            pool.record(spec, ok=False, reason=waiting_code(failure))
        health = pool.health[spec]
    return {
        "ok": bool(health.ok),
        "judge": judge_identity(spec),
        "reason": health.reason,
        "address": judge_address(spec, pool.get(spec)),
    }


async def judge_status(services: Services) -> dict[str, Any]:
    """The default judge's readiness; for a panel, every member must answer."""
    specs = services.settings.panel_specs
    if not specs:
        return {**await _probe(services, services.settings.judge), "setting": JUDGE_SETTING}
    members = list(await asyncio.gather(*(_probe(services, spec) for spec in specs)))
    failing = [m for m in members if not m["ok"]]
    return {
        "ok": not failing,
        "judge": "panel",
        "reason": failing[0]["reason"] if failing else None,
        "members": members,
        "setting": PANEL_SETTING,
    }


def startup_message(status: dict[str, Any]) -> str:
    """One line for ``serve``: the judge, where it was asked, whether it answered."""
    members = status.get("members") or [status]
    parts = []
    for member in members:
        where = f" at {member['address']}" if member.get("address") else ""
        answer = "answered" if member["ok"] else f"did not answer ({member['reason']})"
        parts.append(f"{member['judge']}{where} {answer}")
    judge = "judge panel: " if "members" in status else "judge: "
    advice = "" if status["ok"] else "; submissions wait as pending until it answers"
    return f"{judge}{'; '.join(parts)}{advice} (set {status['setting']} to change it)"
