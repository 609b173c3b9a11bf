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
from api.http.middleware import RequestContextMiddleware
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
from api.service.bootstrap import ensure_bootstrap_admin, read_token_file
from api.service.metrics import Metrics, metrics_endpoint
from api.service.observability import litestar_logging_config
from api.service.services import BackendPool, RubricCatalog, Services
from api.service.settings import Settings
from api.service.workers import GradingWorkers
from judge.backends import JudgeBackend
from judge.rubric import load_rubric_dir
from judge.vocabulary import load_vocabulary
from storage import Store, make_engine

__all__ = ["LOCAL_HOSTS", "create_app"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _services_of(app: Litestar) -> Services:
    services: Services = app.state.services
    return services


def create_app(
    settings: Settings,
    engine: AsyncEngine | None = None,
    backends: Mapping[str, JudgeBackend] | None = None,
    *,
    start_workers: bool = True,
) -> Litestar:
    """Build the app. The database must already be migrated (``serve`` does it).

    ``engine`` and ``backends`` (judge spec -> backend) are seams for tests; without
    them the app makes its own from the settings.
    """
    if settings.allow_anonymous and settings.host not in LOCAL_HOSTS:
        raise ValueError("allow_anonymous is refused unless the server is bound to 127.0.0.1")
    rubrics = load_rubric_dir(settings.rubric_dir)
    if settings.rubric not in rubrics:
        raise ValueError(f"the default rubric {settings.rubric!r} is not in {settings.rubric_dir}")
    own_engine = engine is None
    db = engine if engine is not None else make_engine(settings.database_url)
    store = Store(db)
    services = Services(
        settings=settings,
        store=store,
        rubrics=RubricCatalog(rubrics, store),
        backends=BackendPool(settings, backends),
    )
    metrics = Metrics()
    limits = SubmissionLimits(settings, store, metrics)
    if settings.bootstrap_admin_token_file is not None:
        read_token_file(settings.bootstrap_admin_token_file)  # fail now, not at startup

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        if settings.bootstrap_admin_token_file is not None:
            await ensure_bootstrap_admin(store, settings.bootstrap_admin_token_file)
        for rubric in rubrics.values():
            await store.save_rubric(rubric)
        await store.ensure_vocabulary(load_vocabulary(settings.failure_tags_file))
        workers = GradingWorkers(services, count=settings.worker_count, metrics=metrics)
        if start_workers and settings.worker_count > 0:
            workers.start()
        app.state.workers = workers
        try:
            yield
        finally:
            await workers.stop()
            await services.backends.aclose()
            if own_engine:
                await db.dispose()

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
    return app
