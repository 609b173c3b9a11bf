"""Regrade jobs on pages: the list, one job with live progress and its flip report, and
pause/resume/cancel for admins. Adjudicators may look; only admins act."""

from __future__ import annotations

from typing import Any, cast, get_args

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Redirect, Template

from api.regrade.flips import flip_report
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

__all__ = ["regrade_action", "regrade_page", "regrade_progress", "regrades_page"]

#: states in which a job's counts no longer move
FINAL_STATES = frozenset({"done", "failed", "cancelled"})


async def _names(services: Services, token_ids: list[str]) -> dict[str, str]:
    """Who started each job, by name (a job started from the command line without a
    token keeps its actor as it was recorded)."""
    tokens = services.store.tokens
    return await services.store.db.run_read(lambda s: tokens.read_names(s, token_ids))


@get("/regrades", guards=[web_require("adjudicator")], include_in_schema=False)
async def regrades_page(
    services: NamedDependency[Services], who: NamedDependency[SignedIn]
) -> Template:
    """The newest regrade jobs with their progress."""
    jobs = await recent_regrades(services, limit=100)
    names = await _names(services, [j.created_by for j in jobs])
    return page("regrades.html", who, jobs=jobs, final=FINAL_STATES, names=names)


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
