"""Starting regrade jobs: the target rubric and judge, the estimate, the job.

Shared by the HTTP routes and the command line. An omitted rubric is the service's
default rubric (its current version), an omitted judge the service's judge.
"""

from __future__ import annotations

from typing import Literal

from api.service.errors import InvalidRequest
from api.service.regrade.estimate import estimate_regrade
from api.service.regrade.schemas import RegradeJobCreate
from api.service.services import Services
from judge.backends import JudgeBackend
from judge.errors import JudgeSpecError
from judge.spec import parse_judge_spec
from storage.regrade.jobs import RegradeTarget
from storage.regrade.progress import JobView

__all__ = ["JobAction", "change_regrade", "resolve_target", "start_regrade"]

#: what an admin may do to a running job
JobAction = Literal["pause", "resume", "cancel"]


def _backend(services: Services, spec_text: str) -> JudgeBackend:
    try:
        parse_judge_spec(spec_text)
        return services.backends.get(spec_text)
    except JudgeSpecError as exc:
        raise InvalidRequest(str(exc), field="judge", title="Invalid judge") from None


async def resolve_target(
    services: Services, data: RegradeJobCreate
) -> tuple[RegradeTarget, JudgeBackend]:
    """The job's rubric, judge and mode; ``InvalidRequest`` naming the field at fault."""
    if data.rubric is None and data.judge is None and data.ground_truth == "as_submitted":
        raise InvalidRequest(
            "give a rubric, a judge or ground_truth=latest (or several)", field="rubric"
        )
    rubric = await services.rubrics.require(data.rubric, default=services.settings.rubric)
    spec_text = data.judge or services.settings.judge
    backend = _backend(services, spec_text)
    spec = parse_judge_spec(spec_text)
    target = RegradeTarget(
        rubric=rubric,
        judge_spec=spec_text,
        judge_backend=spec.backend,
        judge_model=spec.model,
        mode=data.mode,
        ground_truth=data.ground_truth,
    )
    return target, backend


async def start_regrade(services: Services, data: RegradeJobCreate, *, actor: str) -> JobView:
    """Validate, estimate and store the job (a dry run answers the estimate, storing nothing)."""
    target, backend = await resolve_target(services, data)
    f = data.filter.to_filter()
    latest = target.ground_truth == "latest"
    estimate = await estimate_regrade(services, f, target.rubric, backend, latest=latest)
    view = await services.store.regrade.create_job(
        f, target, actor=actor, dry_run=data.dry_run, estimate=estimate
    )
    if not data.dry_run:
        services.waiters.work.set()
    return view


async def change_regrade(
    services: Services, job_id: str, action: JobAction, *, actor: str
) -> JobView:
    """Pause, resume or cancel a job; a resumed job's items go back to the workers at once."""
    view = await services.store.regrade.change_job(job_id, action, actor=actor)
    if action == "resume":
        services.waiters.work.set()
    return view
