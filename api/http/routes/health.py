"""Liveness and readiness."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from litestar import Response, get
from litestar.di import NamedDependency
from sqlalchemy import text

from api.service.judging import waiting_code
from api.service.services import Services
from judge.errors import JudgeCallError
from judge.spec import judge_identity

__all__ = ["healthz", "readyz"]

#: a judge probe result stays fresh this long
_PROBE_TTL = timedelta(seconds=15)


@get("/healthz", operation_id="healthz", summary="Liveness", include_in_schema=True)
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


async def _database(services: NamedDependency[Services]) -> dict[str, Any]:
    try:
        async with services.store.engine.connect() as connection:
            await asyncio.wait_for(connection.execute(text("SELECT 1")), timeout=5)
    except Exception as exc:  # any failure means "not ready"; the reason is shown
        return {"ok": False, "reason": type(exc).__name__}
    return {"ok": True}


async def _judge(services: NamedDependency[Services]) -> dict[str, Any]:
    """The default judge's readiness; for a panel, every member must answer."""
    specs = services.settings.panel_specs
    if not specs:
        return await _probe(services, services.settings.judge)
    members = list(await asyncio.gather(*(_probe(services, spec) for spec in specs)))
    failing = [m for m in members if not m["ok"]]
    return {
        "ok": not failing,
        "judge": "panel",
        "reason": failing[0]["reason"] if failing else None,
        "members": members,
    }


async def _probe(services: Services, spec: str) -> dict[str, Any]:
    pool = services.backends
    health = pool.health.get(spec)
    now = datetime.now(UTC)
    if health is None or health.at is None or now - health.at > _PROBE_TTL:
        try:
            await asyncio.wait_for(pool.get(spec).probe(), timeout=5)
            pool.record(spec, ok=True)
        except (JudgeCallError, TimeoutError) as exc:
            failure = exc.code if isinstance(exc, JudgeCallError) else "judge_timeout"
            pool.record(spec, ok=False, reason=waiting_code(failure))
        health = pool.health[spec]
    return {"ok": bool(health.ok), "judge": judge_identity(spec), "reason": health.reason}


@get("/readyz", operation_id="readyz", summary="Readiness: database and judge")
async def readyz(services: NamedDependency[Services]) -> Response[dict[str, Any]]:
    """200 when the database and the default judge answer, else 503 saying which does not.

    Submissions are accepted either way: while the judge is away they stay pending.
    """
    database, judge = await asyncio.gather(_database(services), _judge(services))
    pending, oldest = await services.store.queue.depth()
    ready = database["ok"] and judge["ok"]
    body = {
        "status": "ready" if ready else "not ready",
        "database": database,
        "judge": judge,
        "queue": {"pending": pending, "oldest_pending_at": oldest.isoformat() if oldest else None},
    }
    return Response(body, status_code=200 if ready else 503)
