"""``GET /metrics``: the Prometheus text exposition of the app's registry."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.di import NamedDependency
from prometheus_client import CONTENT_TYPE_LATEST

from api.http.auth import bearer_is_admin
from api.service.metrics import Metrics
from api.service.services import Services

__all__ = ["metrics_endpoint"]

#: Prometheus' media type without its charset: Litestar adds ``charset=utf-8`` to every
#: ``text/*`` type, and a parameter given twice fails Prometheus 3's scrape
_MEDIA_TYPE = CONTENT_TYPE_LATEST.split("; charset=", 1)[0]


@get("/metrics", operation_id="metrics", summary="Prometheus metrics")
async def metrics_endpoint(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[bytes]:
    """The text exposition format; queue gauges are computed now. Open to anyone; the
    judge-call families (calls, retries, attempt durations, tokens) only to an admin's
    bearer token (:meth:`Metrics.exposition`)."""
    metrics: Metrics = request.app.state.metrics
    workers = getattr(request.app.state, "workers", None)
    await metrics.refresh(services, workers.in_flight if workers is not None else 0)
    admin = await bearer_is_admin(request)
    return Response(metrics.exposition(admin=admin), media_type=_MEDIA_TYPE)
