"""The API's routes, one module per resource (a feature package's ``routes`` module for the
features that have one, as ``api.webhooks.routes``); ``ROUTE_HANDLERS`` is what the app serves."""

from __future__ import annotations

from litestar.handlers import HTTPRouteHandler

from api.adjudication.override_routes import create_override, grading_history
from api.adjudication.review_routes import claim_review, finish_review, label_grading, review_queue
from api.adjudication.tag_routes import add_tag, define_tag, list_vocabulary, remove_tag
from api.grading.grading_routes import get_grading, list_gradings, move_gradings_judge
from api.grading.submission_routes import create_submission
from api.http.metrics import metrics_endpoint
from api.http.routes.health import healthz, readyz
from api.http.routes.rubrics import get_rubric, list_rubrics
from api.imports.routes import create_import, get_import
from api.regrade.routes import (
    cancel_regrade_job,
    create_regrade_job,
    get_regrade_flips,
    get_regrade_job,
    pause_regrade_job,
    resume_regrade_job,
)
from api.reports.agreement_routes import get_agreement
from api.reports.export_routes import export_gradings
from api.reports.routes import (
    get_attempts,
    get_comparison,
    get_dimension_failures,
    get_failure_tags,
    get_pass_rates,
    get_question_rates,
)
from api.scenarios.routes import (
    create_scenario,
    get_scenario,
    list_scenario_page,
    load_scenario_file,
    put_scenario,
)
from api.tokens.routes import create_token, list_tokens, revoke_token
from api.webhooks.routes import create_webhook, list_deliveries, list_webhooks, redeliver

__all__ = ["ROUTE_HANDLERS"]

ROUTE_HANDLERS: list[HTTPRouteHandler] = [
    healthz,
    readyz,
    metrics_endpoint,
    create_submission,
    get_grading,
    list_gradings,
    move_gradings_judge,
    create_scenario,
    list_scenario_page,
    load_scenario_file,
    get_scenario,
    put_scenario,
    list_rubrics,
    get_rubric,
    get_pass_rates,
    get_comparison,
    get_question_rates,
    get_dimension_failures,
    get_failure_tags,
    get_attempts,
    get_agreement,
    export_gradings,
    create_import,
    get_import,
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
    create_webhook,
    list_webhooks,
    list_deliveries,
    redeliver,
]
