"""Liveness and readiness."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Response, get
from litestar.di import NamedDependency
from sqlalchemy import text

from api.service.judge_status import judge_status
from api.service.services import Services

__all__ = ["healthz", "readyz"]


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


@get("/readyz", operation_id="readyz", summary="Readiness: database and judge")
async def readyz(services: NamedDependency[Services]) -> Response[dict[str, Any]]:
    """200 when the database and the default judge answer, else 503 saying which does not.

    ``judge`` names the judge, the address it was asked at (no credentials) and the
    setting that changes it (``SRE_JUDGE_JUDGE``, or ``SRE_JUDGE_PANEL`` for a panel).
    Submissions are accepted either way: while the judge is away they stay pending.
    """
    database, judge = await asyncio.gather(_database(services), judge_status(services))
    pending, oldest = await services.store.queue.depth()
    ready = database["ok"] and judge["ok"]
    body = {
        "status": "ready" if ready else "not ready",
        "database": database,
        "judge": judge,
        "queue": {"pending": pending, "oldest_pending_at": oldest.isoformat() if oldest else None},
    }
    return Response(body, status_code=200 if ready else 503)
