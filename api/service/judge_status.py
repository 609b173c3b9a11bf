"""Whether the configured judge answers, where it was asked, and which setting changes it.

Shared by ``/readyz`` and by ``sre-judge serve``, which says on start which judge it
will use and whether it answered. The address is the endpoint really tried (the spec's
base URL, or the endpoint the judge's client asks: ``OPENAI_BASE_URL`` / ``OLLAMA_HOST``
as the client reads them, else its default), without any user, password, query or
fragment: never a secret.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from api.service.judging import waiting_code
from judge.errors import JudgeCallError, JudgeSpecError, JudgeUnavailable
from judge.masking import mask_passwords
from judge.spec import judge_identity, member_specs, parse_judge_spec
from storage.judge_failures import standing_failure

if TYPE_CHECKING:
    from api.service.services import Services
    from judge.backends import JudgeBackend

__all__ = [
    "JUDGE_SETTING",
    "PANEL_SETTING",
    "judge_address",
    "judge_status",
    "pending_status",
    "startup_message",
    "waiting_reason",
]

#: the environment variables that choose the judge (a panel wins over the judge)
JUDGE_SETTING = "SRE_JUDGE_JUDGE"
PANEL_SETTING = "SRE_JUDGE_PANEL"
#: a probe result stays fresh this long
PROBE_TTL = timedelta(seconds=15)


def _public(url: str) -> str:
    """``url`` without credentials, query or fragment; a port that is no port is shown as
    written (its address is reported, never refused, here)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:  # "Port could not be cast", "Port out of range"
        netloc = parts.netloc.rpartition("@")[2]
    else:
        netloc += f":{port}" if port is not None else ""
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def judge_address(spec: str, backend: JudgeBackend | None = None) -> str | None:
    """The endpoint a judge spec is asked at, credentials removed; None if unknown.

    The spec is read as its backend is built (``parse_judge_spec``: blanks around it
    dropped, the backend in any case); without a base URL it is the endpoint the
    backend's client asks (``endpoint``: ``OPENAI_BASE_URL``, ``OLLAMA_HOST`` as the
    client reads it, or the client's default)."""
    try:
        base_url = parse_judge_spec(spec).base_url
    except JudgeSpecError:
        return None
    if base_url:
        return _public(base_url)
    endpoint = getattr(backend, "endpoint", None)
    if isinstance(endpoint, str) and endpoint:
        return _public(endpoint)
    return None


async def _probe(services: Services, spec: str, *, addresses: bool = True) -> dict[str, Any]:
    """Whether the judge of ``spec`` answers: it lists its models (probed at most every
    ``PROBE_TTL`` since it was last called or probed in this process), and no failed
    call of it stands (:func:`_failed_call`).

    A backend raises judge errors; anything else it lets through (its client tripping
    over an answer it never expected) is an unavailable judge, as for a judge call
    (``judge.retry``): readiness says so, it never fails with it."""
    pool = services.backends
    health = pool.health.get(spec)
    if health is None or health.at is None or datetime.now(UTC) - health.at > PROBE_TTL:
        backend = pool.get(spec)  # a spec that does not parse: JudgeSpecError, the caller's
        try:
            async with asyncio.timeout(5):
                await backend.probe()
            pool.record(spec, ok=True)
        except (JudgeCallError, TimeoutError) as exc:
            failure = exc.code if isinstance(exc, JudgeCallError) else "judge_timeout"
            pool.record(spec, ok=False, reason=waiting_code(failure))
        except Exception:
            pool.record(spec, ok=False, reason=waiting_code(JudgeUnavailable.code))
        health = pool.health[spec]
    ok, reason = bool(health.ok), health.reason
    failed = await _failed_call(services, spec)
    if failed is not None:
        ok, reason = False, failed
    status = {"ok": ok, "judge": judge_identity(spec), "reason": reason}
    if addresses:
        status["address"] = judge_address(spec, pool.get(spec))
    return status


async def _failed_call(services: Services, spec: str) -> str | None:
    """The waiting code of a failed call to the judge of ``spec`` that still stands, or
    None (also when the database does not answer: readiness says that apart).

    Listing its models is not enough for a judge whose call failed: the failure stands
    until a later call to it succeeds, or until the retry wait and ``PROBE_TTL`` have
    passed with no call failing again (when the gradings it deferred were not asked
    again meanwhile, nothing here waits on the judge: the probe decides again). It is
    read from the database (``storage.judge_failures``), not from this process's
    memory, so that every process of a deployment answers alike."""
    db = services.store.db
    retry = timedelta(seconds=services.settings.judge_retry_seconds)
    since = db.clock() - retry - PROBE_TTL
    judge = services.backends.called_judge(spec)
    try:
        async with asyncio.timeout(5):  # a hung database must not hold the answer
            code = await db.run_read(standing_failure, judge, since=since)
    except Exception:
        return None
    return None if code is None else waiting_code(code)


async def _identity(services: Services, spec: str) -> dict[str, Any]:
    """The model digest behind a judge's name (``judge.identity``) and its last change.

    ``digest``: as the judge reports it now (None: it reports none); when it does not
    tell within 5 s, the digest known before stands (a slow answer is no change of
    model); ``changed``: the latest change stored for the name (``{"previous_digest",
    "digest", "at"}``) or None.
    """
    pool = services.backends
    digest: str | None = None
    try:
        backend = pool.get(spec)
    except JudgeSpecError:  # a spec that does not parse names no model
        backend = None
    if backend is not None:
        try:
            async with asyncio.timeout(5):
                digest = await pool.digests.current(backend)
        except TimeoutError:
            digest = pool.digests.known(backend)
    try:
        row = await services.store.judge_digests.current(judge_identity(spec))
    except Exception:  # the database's own state is reported apart
        row = None
    changed = None
    if row is not None and row.changed:
        changed = {
            "previous_digest": row.previous_digest,
            "digest": row.digest,
            "at": row.seen_at.isoformat(),
        }
    return {"digest": digest, "changed": changed}


async def judge_status(services: Services, *, addresses: bool = True) -> dict[str, Any]:
    """The default judge's readiness; for a panel, every member must answer.

    ``addresses``: say where each judge was asked (for the operator and admins; an
    internal address is not for anyone who can reach ``/readyz``). Each judge also says
    what model is behind its name (``digest``) and when that last changed (``changed``).
    """
    specs = services.settings.panel_specs
    if not specs:
        spec = services.settings.judge
        status = await _probe(services, spec, addresses=addresses)
        if status["ok"]:
            status.update(await _identity(services, spec))
        return {**status, "setting": JUDGE_SETTING}

    async def member(spec: str) -> dict[str, Any]:
        status = await _probe(services, spec, addresses=addresses)
        return {**status, **(await _identity(services, spec))} if status["ok"] else status

    probes = (member(spec) for spec in specs)
    members = list(await asyncio.gather(*probes))
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


async def _answers(services: Services, spec: str) -> dict[str, Any]:
    """Whether the judge of a recorded spec (one, or a panel's members) answers now."""
    try:
        members = await asyncio.gather(
            *(_probe(services, m, addresses=False) for m in member_specs(spec))
        )
    except JudgeSpecError:  # its gradings end unscored (judge_spec_invalid): they progress
        return {"ok": True, "reason": None}
    failing = [m for m in members if not m["ok"]]
    return {"ok": not failing, "reason": failing[0]["reason"] if failing else None}


async def pending_status(
    services: Services, configured: dict[str, Any], *, addresses: bool = False
) -> list[dict[str, Any]]:
    """Live pending gradings by the judge they wait for, and whether that judge answers.

    ``configured`` is ``judge_status`` of the configured judge. With
    ``SRE_JUDGE_PENDING_JUDGE=follow`` every live grading waits for the configured
    judge (one bound to another moves to it when claimed); with ``pin`` each waits for
    its own, asked here (results are kept for 15 s). Regrade job items are left out:
    their job's state tells their progress. ``addresses`` adds the recorded ``spec``
    (with its base URL, the credentials in it masked), which an admin's move names.
    """
    settings = services.settings
    current = settings.grading_judge()[0]
    counts: dict[str, int] = {}
    for row in await services.store.pending_judges.by_judge():
        if row.live:
            waits_for = current if settings.pending_judge == "follow" else row.judge_spec
            counts[waits_for] = counts.get(waits_for, 0) + row.count
    others = [spec for spec in counts if spec != current]
    answers = await asyncio.gather(*(_answers(services, s) for s in others))
    states = dict(zip(others, answers, strict=True))
    states[current] = {"ok": configured["ok"], "reason": configured["reason"]}
    entries = []
    for spec, count in sorted(counts.items(), key=lambda item: -item[1]):
        entry = {"judge": judge_identity(spec), "pending": count, "configured": spec == current}
        shown = {"spec": mask_passwords(spec)} if addresses else {}
        entries.append({**entry, **states[spec], **shown})
    return entries


def waiting_reason(entries: list[dict[str, Any]]) -> str | None:
    """One sentence on the pending gradings that cannot progress, or None when all can."""
    stuck = []
    for entry in entries:
        if entry["ok"]:
            continue
        unconfigured = "" if entry["configured"] else "is no longer configured and "
        count = entry["pending"]
        gradings = (
            f"{count} pending grading waits" if count == 1 else f"{count} pending gradings wait"
        )
        stuck.append(
            f"{gradings} for {entry['judge']}, which {unconfigured}does not answer "
            f"({entry['reason']})"
        )
        if not entry["configured"]:
            stuck[-1] += (
                ": move them to the configured judge with `sre-judge gradings move-judge` "
                "or POST /v1/gradings:move-judge"
            )
    return "; ".join(stuck) or None
