"""Liveness and readiness, each answering ``GET`` and ``HEAD`` (probes and uptime
checkers send ``HEAD``: the status without the body, and without a ``Content-Length``,
which would have to be the length of the body ``GET`` sends)."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Request, Response, get, head
from litestar.di import NamedDependency
from litestar.response.base import ASGIResponse
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.http.auth import bearer_is_admin
from api.service.judge_status import judge_status, pending_status, waiting_reason
from api.service.services import Services
from storage.engine import read_only

__all__ = ["healthz", "healthz_head", "readyz", "readyz_head"]


class _StatusOnly(Response[None]):
    """An answer to ``HEAD``: the status and ``GET``'s Content-Type, no body and no
    Content-Length (RFC 9110 8.6: it would have to equal ``GET``'s, whose body is not
    made; a plain response states the length of ``null``)."""

    def __init__(self, status_code: int = 200) -> None:
        super().__init__(
            None, status_code=status_code, headers={"Content-Type": "application/json"}
        )

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        """The response, sent as an answer to ``HEAD``."""
        return super().to_asgi_response(*args, **{**kwargs, "is_head_response": True})


@get("/healthz", operation_id="healthz", summary="Liveness", include_in_schema=True)
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@head("/healthz", operation_id="healthz_head", summary="Liveness, status only")
async def healthz_head() -> Response[None]:
    """The process is up: 200 without a body."""
    return _StatusOnly()


def _ping(engine: Engine) -> None:
    with read_only(engine).connect() as connection:
        connection.execute(text("SELECT 1"))


async def _database(services: NamedDependency[Services]) -> dict[str, Any]:
    try:
        # a plain thread, not a use case: a hung database must not hold the answer
        async with asyncio.timeout(5):
            await asyncio.to_thread(_ping, services.store.engine)
    except Exception as exc:  # any failure means "not ready"; the reason is shown
        return {"ok": False, "reason": type(exc).__name__}
    return {"ok": True}


@get("/readyz", operation_id="readyz", summary="Readiness: database, judge and pending work")
async def readyz(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[dict[str, Any]]:
    """200 when the database and the default judge answer and every pending grading can
    progress, else 503 saying why (``reason``); see :func:`readiness`."""
    body = await readiness(request, services)
    return Response(body, status_code=200 if body["status"] == "ready" else 503)


@head("/readyz", operation_id="readyz_head", summary="Readiness, status only")
async def readyz_head(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[None]:
    """200 or 503 as ``GET /readyz`` answers, without the body."""
    body = await readiness(request, services)
    return _StatusOnly(200 if body["status"] == "ready" else 503)


async def readiness(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    """What ``/readyz`` says: ``status`` ready when the database and the default judge
    answer and every pending grading can progress, else not ready saying why (``reason``).

    ``judge`` names the judge and the setting that changes it (``SRE_JUDGE_JUDGE``, or
    ``SRE_JUDGE_PANEL`` for a panel); ``queue.by_judge`` counts live pending gradings by
    the judge they wait for, whether it is the configured one and whether it answers.
    Reasons are codes, never a judge's own words. The judges' addresses (and recorded
    specs) are shown to an admin's bearer token only. Submissions are accepted either
    way: while the judge is away they stay pending.
    """
    admin = await bearer_is_admin(request)  # a database failure is said below
    database, judge = await asyncio.gather(
        _database(services), judge_status(services, addresses=admin)
    )
    pending, oldest, by_judge = None, None, []
    if database["ok"]:  # the queue is read from the database
        try:
            pending, oldest = await services.store.queue.depth()
            by_judge = await pending_status(services, judge, addresses=admin)
        except Exception as exc:  # answered the ping, then failed: still not ready
            database = {"ok": False, "reason": type(exc).__name__}
            pending, oldest, by_judge = None, None, []
    waiting = waiting_reason(by_judge)
    ready = database["ok"] and judge["ok"] and waiting is None
    reasons = [f"the database does not answer ({database['reason']})"] if not database["ok"] else []
    if not judge["ok"] and not any(e["configured"] for e in by_judge):  # else said by waiting
        reasons.append(f"the judge {judge['judge']} does not answer ({judge['reason']})")
    reasons += [waiting] if waiting else []
    body = {
        "status": "ready" if ready else "not ready",
        "reason": "; ".join(reasons) or None,
        "database": database,
        "judge": judge,
        "queue": {
            "pending": pending,
            "oldest_pending_at": oldest.isoformat() if oldest else None,
            "by_judge": by_judge,
        },
    }
    return body
