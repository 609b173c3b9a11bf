"""Regrade jobs on pages: the list, one job with live progress and its flip report (and
that report as CSV), and pause/resume/cancel for admins. Adjudicators may look; only
admins act."""

from __future__ import annotations

from typing import Any, cast, get_args
from urllib.parse import urlencode

from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from api.regrade.flips import flip_report, flips_csv
from api.regrade.job_queries import ACTION_STATES
from api.regrade.use_cases import (
    JobAction,
    change_regrade,
    recent_regrades,
    regrade_flips,
    regrade_job,
)
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from storage import NotFound
from storage.cursors import continues

__all__ = [
    "regrade_action",
    "regrade_flips_csv",
    "regrade_page",
    "regrade_progress",
    "regrades_page",
]

#: states in which a job's counts no longer move
FINAL_STATES = frozenset({"done", "failed", "cancelled"})


async def _names(services: Services, token_ids: list[str]) -> dict[str, str]:
    """Who started each job, by name (a job started from the command line without a
    token keeps its actor as it was recorded)."""
    tokens = services.store.tokens
    return await services.store.db.run_read(lambda s: tokens.read_names(s, token_ids))


#: jobs per page of the list
JOBS_PER_PAGE = 100


@get("/regrades", guards=[web_require("adjudicator")], include_in_schema=False)
async def regrades_page(
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    cursor: FromQuery[str | None] = None,
) -> Template:
    """The regrade jobs with their progress, newest first, a page at a time (``cursor``:
    where the newer page stopped)."""
    jobs, older = await recent_regrades(services, limit=JOBS_PER_PAGE, cursor=cursor)
    names = await _names(services, [j.created_by for j in jobs])
    return page(
        "regrades.html",
        who,
        jobs=jobs,
        final=FINAL_STATES,
        names=names,
        older_link="/regrades?" + urlencode({"cursor": older}) if older else None,
        first_page=not continues(cursor),
    )


@get("/regrades/{job_id:str}", guards=[web_require("adjudicator")], include_in_schema=False)
async def regrade_page(
    job_id: FromPath[str], services: NamedDependency[Services], who: NamedDependency[SignedIn]
) -> Template:
    """One job: progress (kept live by the page's script) and what flipped."""
    job, items = await regrade_flips(services, job_id)
    report = flip_report(job.model_dump(mode="json"), items)
    return page(
        "regrade.html",
        who,
        job=job,
        report=report,
        names=await _names(services, [job.created_by]),
        final=job.state in FINAL_STATES,
        actions=[
            action
            for action, states in ACTION_STATES.items()
            if job.state in states and not job.dry_run
        ]
        if who.principal.at_least("admin")
        else [],
    )


@get(
    "/regrades/{job_id:str}/progress",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
)
async def regrade_progress(
    job_id: FromPath[str], services: NamedDependency[Services]
) -> dict[str, Any]:
    """The job's counts as JSON, for the page's polling script."""
    job = await regrade_job(services, job_id)
    return {
        "state": job.state,
        "final": job.state in FINAL_STATES,
        **job.model_dump(
            mode="json",
            include={"total", "done", "failed", "cancelled", "remaining", "judge_calls",
                     "cache_hits", "rate", "eta_seconds"},
        ),
    }  # fmt: skip


@get(
    "/regrades/{job_id:str}/flips.csv",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
)
async def regrade_flips_csv(
    job_id: FromPath[str], services: NamedDependency[Services]
) -> Response[str]:
    """The page's flip report as CSV, for those who may see the page (what
    ``/v1/regrade-jobs/{id}/flips?format=csv`` answers an admin's token)."""
    _, items = await regrade_flips(services, job_id)
    return Response(
        flips_csv(items),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="flips-{job_id}.csv"'},
    )


@post(
    "/regrades/{job_id:str}/{action:str}",
    guards=[web_require("admin")],
    include_in_schema=False,
    status_code=303,
)
async def regrade_action(
    job_id: FromPath[str],
    action: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
) -> Redirect:
    """Pause, resume or cancel the job (admins); 409 when its state does not allow it."""
    if action not in get_args(JobAction):
        raise NotFound(f"no action {action!r} on a regrade job")
    await change_regrade(services, job_id, cast(JobAction, action), actor=who.principal.id)
    return Redirect(f"/regrades/{job_id}", status_code=303)
