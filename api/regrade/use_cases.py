"""Regrade jobs: starting one (the target rubric and judge, the estimate), steering it,
reading it and what flipped.

Shared by the HTTP routes, the pages and the command line. With no rubric given, each
item keeps its submission's: the current version of the rubric its grading has (the one
a submitter may have asked for by name), never the service's default
(``RegradeTarget.item_rubric``). An omitted judge is the one the service grades with
(the panel when ``SRE_JUDGE_PANEL`` is set); a job's judge may be a panel,
``panel:SPEC1,SPEC2``, graded as the service grades with one.
"""

from __future__ import annotations

from typing import Literal

from api.regrade.batch_engine import check_engine_judge, import_results_file, requests_file
from api.regrade.batch_queries import BatchQueries
from api.regrade.estimate import estimate_regrade
from api.regrade.flip_reads import FlipItem
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.schemas import (
    BatchResultsPublic,
    RegradeJobCreate,
    RegradeJobPublic,
    job_public,
)
from api.service.errors import InvalidRequest, invalid_judge
from api.service.services import Services
from judge.backends import JudgeBackend
from judge.calls import kept_text
from judge.errors import JudgeSpecError
from judge.spec import member_specs, recorded_judge
from storage.regrade.progress import JobView

__all__ = [
    "JobAction",
    "batch_requests",
    "batch_results",
    "change_regrade",
    "recent_regrades",
    "regrade_flips",
    "regrade_job",
    "resolve_target",
    "start_regrade",
]

#: what an admin may do to a running job
JobAction = Literal["pause", "resume", "cancel"]


def _judges(services: Services, spec_text: str) -> tuple[tuple[str, str, str], list[JudgeBackend]]:
    """The job's judge as recorded (spec, backend, model) and its judges' backends (one,
    or a panel's members in order); ``InvalidRequest`` naming ``judge`` for a bad spec."""
    try:
        recorded = recorded_judge(spec_text)
        return recorded, [services.backends.get(m) for m in member_specs(recorded[0])]
    except JudgeSpecError as exc:
        raise invalid_judge(exc) from None


async def resolve_target(
    services: Services, data: RegradeJobCreate
) -> tuple[RegradeTarget, list[JudgeBackend]]:
    """The job's rubric, judge and mode, and the backends of its judge (a panel's
    members'); ``InvalidRequest`` naming the field at fault. An omitted rubric keeps each
    submission's (the target's rubric is None); an omitted judge is the one the service
    grades with: ``SRE_JUDGE_PANEL`` when set, else ``SRE_JUDGE_JUDGE``."""
    if data.rubric is None and data.judge is None and data.ground_truth == "as_submitted":
        raise InvalidRequest(
            "give a rubric, a judge or ground_truth=latest (or several)", field="rubric"
        )
    rubric = None
    if data.rubric is not None:
        rubric = await services.rubrics.require(data.rubric, default=services.settings.rubric)
    if data.judge is None:
        recorded, backends = _judges(services, services.settings.grading_judge()[0])
    else:
        recorded, backends = _judges(services, data.judge)
    spec_text, judge_backend, judge_model = recorded
    check_engine_judge(services, spec_text, data.engine)
    target = RegradeTarget(
        rubric=rubric,
        judge_spec=spec_text,
        judge_backend=judge_backend,
        judge_model=judge_model,
        mode=data.mode,
        ground_truth=data.ground_truth,
        engine=data.engine,
        engine_retry=data.engine_retry,
        current=services.rubrics.current,
    )
    return target, backends


async def start_regrade(services: Services, data: RegradeJobCreate, *, actor: str) -> JobView:
    """Validate, estimate and store the job (a dry run answers the estimate, storing nothing)."""
    target, backends = await resolve_target(services, data)
    f = data.filter.to_filter()
    estimate = await estimate_regrade(services, f, target, backends)
    view = await RegradeJobQueries(services.store.db).create_job(
        f, target, actor=actor, dry_run=data.dry_run, estimate=estimate
    )
    if not data.dry_run:
        services.waiters.regrade_queued()
        if data.engine != "live":
            services.waiters.batches.set()
    return view


async def change_regrade(
    services: Services, job_id: str, action: JobAction, *, actor: str
) -> JobView:
    """Pause, resume or cancel a job; a resumed job's items go back to the workers at once,
    and its batch engine's next step is taken at once (a failed step's wait is over)."""
    view = await RegradeJobQueries(services.store.db).change_job(job_id, action, actor=actor)
    if action == "resume":
        services.waiters.regrade_queued()
        if await BatchQueries(services.store.db).try_now(job_id):
            services.waiters.batches.set()
    return view


async def regrade_job(services: Services, job_id: str) -> RegradeJobPublic:
    """A job with its progress (state, counts, rate, ETA, a batch engine's requests and
    batches); NotFound when there is none."""
    view = await RegradeJobQueries(services.store.db).get_job(job_id)
    return job_public(view, batch=await BatchQueries(services.store.db).progress(job_id))


async def recent_regrades(
    services: Services, *, limit: int, cursor: str | None = None
) -> tuple[list[RegradeJobPublic], str | None]:
    """Up to ``limit`` jobs, newest first, with their progress (after ``cursor``, where
    an earlier page stopped), and the cursor of the older ones, None on the last page."""
    views, older = await RegradeJobQueries(services.store.db).recent_jobs(
        limit=limit, cursor=cursor
    )
    return [job_public(v) for v in views], older


async def batch_requests(services: Services, job_id: str, *, actor: str) -> list[str]:
    """An offline job's requests with no reply yet, as OpenAI-batch JSON lines."""
    return await requests_file(services, job_id, actor=actor)


async def batch_results(
    services: Services, job_id: str, text: str, *, actor: str
) -> BatchResultsPublic:
    """Import an offline job's results file: what was kept, refused, already there.

    A refusal names its line's custom id as any text from outside is kept (a lone
    surrogate as U+FFFD, no NUL): whatever the file held, the answer can carry it."""
    report = await import_results_file(services, job_id, text, actor=actor)
    refusals = [{**r, "custom_id": kept_text(r["custom_id"])} for r in report.refused]
    return BatchResultsPublic(
        batch_id=report.batch_id,
        state=report.state,
        refusals=refusals,  # type: ignore[arg-type]
        **report.counts(),
    )


async def regrade_flips(services: Services, job_id: str) -> tuple[RegradeJobPublic, list[FlipItem]]:
    """A job and its items, old grading beside new, for the flip report."""
    job = await regrade_job(services, job_id)
    return job, await RegradeJobQueries(services.store.db).pairs(job_id)
