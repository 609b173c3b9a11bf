"""``create_app``: the one place where settings, storage, judges and routes are wired."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin
from sqlalchemy.ext.asyncio import AsyncEngine

from api.http.auth import current_principal
from api.http.limits import SubmissionLimits
from api.http.metrics import metrics_endpoint
from api.http.middleware import RequestContextMiddleware
from api.http.observability import litestar_logging_config
from api.http.problems import exception_handlers
from api.http.routes.agreement import get_agreement
from api.http.routes.exports import export_gradings
from api.http.routes.gradings import get_grading, list_gradings
from api.http.routes.health import healthz, readyz
from api.http.routes.overrides import create_override, grading_history
from api.http.routes.regrade import (
    cancel_regrade_job,
    create_regrade_job,
    get_regrade_flips,
    get_regrade_job,
    pause_regrade_job,
    resume_regrade_job,
)
from api.http.routes.review import claim_review, finish_review, label_grading, review_queue
from api.http.routes.rubrics import get_rubric, list_rubrics
from api.http.routes.scenarios import create_scenario, get_scenario
from api.http.routes.stats import (
    get_comparison,
    get_dimension_failures,
    get_failure_tags,
    get_pass_rates,
    get_question_rates,
)
from api.http.routes.submissions import create_submission
from api.http.routes.tags import add_tag, define_tag, list_vocabulary, remove_tag
from api.http.routes.tokens import create_token, list_tokens, revoke_token
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends import JudgeBackend

__all__ = ["LOCAL_HOSTS", "create_app"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def create_app(
    settings: Settings,
    engine: AsyncEngine | None = None,
    backends: Mapping[str, JudgeBackend] | None = None,
    *,
    start_workers: bool = True,
) -> Litestar:
    """Build the app. The database must already be migrated (``serve`` does it).

    ``engine`` and ``backends`` (judge spec -> backend) are seams for tests; without
    them the runtime makes its own from the settings.
    """
    if settings.allow_anonymous and settings.host not in LOCAL_HOSTS:
        raise ValueError("allow_anonymous is refused unless the server is bound to 127.0.0.1")
    runtime = Runtime(settings, engine=engine, backends=backends, workers=start_workers)
    services, metrics = runtime.services, runtime.metrics
    limits = SubmissionLimits(settings, services.store, metrics)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with runtime:
            yield

    app = Litestar(
        route_handlers=[
            healthz,
            readyz,
            metrics_endpoint,
            create_submission,
            get_grading,
            list_gradings,
            create_scenario,
            get_scenario,
            list_rubrics,
            get_rubric,
            get_pass_rates,
            get_comparison,
            get_question_rates,
            get_dimension_failures,
            get_failure_tags,
            get_agreement,
            export_gradings,
            create_override,
            grading_history,
            review_queue,
            claim_review,
            finish_review,
            label_grading,
            list_vocabulary,
            define_tag,
            add_tag,
            remove_tag,
            create_token,
            list_tokens,
            revoke_token,
            create_regrade_job,
            get_regrade_job,
            get_regrade_flips,
            pause_regrade_job,
            resume_regrade_job,
            cancel_regrade_job,
        ],
        dependencies={
            "services": Provide(lambda: services, sync_to_thread=False),
            "principal": Provide(current_principal),
            "limits": Provide(lambda: limits, sync_to_thread=False),
            "metrics": Provide(lambda: metrics, sync_to_thread=False),
        },
        exception_handlers=exception_handlers,
        middleware=[RequestContextMiddleware(metrics)],
        logging_config=litestar_logging_config(),
        openapi_config=OpenAPIConfig(
            title="sre-judge",
            version="1",
            path="/schema",
            render_plugins=[ScalarRenderPlugin()],
        ),
        request_max_body_size=settings.max_body_bytes,
        lifespan=[lifespan],
    )
    app.state.services = services
    app.state.metrics = metrics
    app.state.workers = runtime.workers
    return app
