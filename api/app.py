"""The features the service is made of, and what each brings to the wiring.

One place lists them: :func:`route_handlers` for the HTTP app (``api.http.app``),
:func:`page_handlers` for the workbench (``api.web.plugin``) and :func:`commands` for the
``sre-judge`` click group (``api.cli.main``); the loops each feature runs are started by
the runtime (``api.service.runtime``). A new feature is added here. Each list is built on
call, so the command line loads neither the web framework nor a feature's use cases
until a command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click
    from litestar.handlers import HTTPRouteHandler

__all__ = ["commands", "page_handlers", "route_handlers"]


def route_handlers() -> list[HTTPRouteHandler]:
    """Every route the API serves, in the OpenAPI document's order.

    Why this function is long: it is the one list of the routes, each feature's imported
    where it is used, so that the command line does not load the HTTP edge."""
    from api.adjudication.override_routes import create_override, grading_history
    from api.adjudication.review_routes import (
        assign_review,
        claim_review,
        finish_review,
        label_grading,
        review_queue,
        skip_review,
    )
    from api.adjudication.tag_routes import add_tag, define_tag, list_vocabulary, remove_tag
    from api.grading.grading_routes import get_grading, list_gradings, move_gradings_judge
    from api.grading.submission_routes import create_submission
    from api.http.metrics import metrics_endpoint
    from api.http.routes.health import healthz, healthz_head, readyz, readyz_head
    from api.http.routes.rubrics import get_rubric, list_rubrics
    from api.imports.routes import create_import, get_import
    from api.judges.routes import list_canary_runs, start_canary_run
    from api.regrade.routes import (
        cancel_regrade_job,
        create_regrade_job,
        get_batch_requests,
        get_regrade_flips,
        get_regrade_job,
        pause_regrade_job,
        post_batch_results,
        resume_regrade_job,
    )
    from api.reports.agreement_routes import get_agreement
    from api.reports.export_routes import export_gradings
    from api.reports.routes import (
        get_attempts,
        get_comparison,
        get_dimension_failures,
        get_evaluation_table,
        get_evaluation_table_csv,
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

    return [
        start_canary_run,
        list_canary_runs,
        healthz,
        healthz_head,
        readyz,
        readyz_head,
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
        get_evaluation_table,
        get_evaluation_table_csv,
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
        skip_review,
        assign_review,
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
        get_batch_requests,
        post_batch_results,
        create_webhook,
        list_webhooks,
        list_deliveries,
        redeliver,
    ]


def page_handlers() -> list[HTTPRouteHandler]:
    """Every page of the workbench."""
    from api.adjudication.grading_pages import grading_list, grading_page, override_from_page
    from api.adjudication.label_pages import label_form, label_saved, label_submit
    from api.adjudication.queue_pages import (
        assign_from_page,
        finish_from_page,
        home,
        next_item,
        queue_page,
        skip_from_page,
    )
    from api.adjudication.tag_pages import tag_from_page, untag_from_page
    from api.adjudication.versus_pages import versus_page
    from api.judges.pages import judges_page
    from api.regrade.pages import (
        regrade_action,
        regrade_flips_csv,
        regrade_page,
        regrade_progress,
        regrades_page,
    )
    from api.reports.pages import (
        agreement_page,
        compare_page,
        evaluation_csv_page,
        evaluation_page,
        reports_page,
    )
    from api.tokens.pages import login_form, login_submit, logout

    return [
        home,
        login_form,
        login_submit,
        logout,
        queue_page,
        next_item,
        finish_from_page,
        skip_from_page,
        assign_from_page,
        grading_list,
        grading_page,
        versus_page,
        override_from_page,
        label_form,
        label_submit,
        label_saved,
        tag_from_page,
        untag_from_page,
        reports_page,
        compare_page,
        evaluation_page,
        evaluation_csv_page,
        agreement_page,
        regrades_page,
        regrade_page,
        regrade_progress,
        regrade_flips_csv,
        regrade_action,
        judges_page,
    ]


def commands() -> list[click.Command]:
    """The features' commands and command groups, in ``sre-judge --help``'s order."""
    import api.reports.agreement_cli  # noqa: F401  (registers `report agreement`)
    from api.cli.audit import audit_group
    from api.cli.config import config_group
    from api.cli.serve import migrate_command, serve_command, worker_command
    from api.grading.grade_cli import grade_command
    from api.grading.gradings_cli import gradings_group
    from api.grading.submit_cli import submit_command
    from api.imports.cli import import_group
    from api.judges.cli import calibrate_command, judges_group
    from api.regrade.cli import regrade_group
    from api.reports.cli import report_command
    from api.reports.export_cli import export_command
    from api.scenarios.cli import scenarios_group
    from api.tokens.cli import tokens_group

    return [
        serve_command,
        worker_command,
        migrate_command,
        grade_command,
        submit_command,
        tokens_group,
        report_command,
        export_command,
        config_group,
        import_group,
        regrade_group,
        scenarios_group,
        calibrate_command,
        judges_group,
        audit_group,
        gradings_group,
    ]
