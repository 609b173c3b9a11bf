"""Accepting a submission and waiting for its grading (the use cases of POST /v1/submissions).

Acceptance checks the texts, resolves the rubric, applies the self-preference policy,
redacts credentials in the agent's trace if one came and screens the diagnosis
(credentials removed, also those found in the trace; injection flagged:
``judge.trace.screen_submission``, kept with the submission for every grading of it),
and stores the submission with a pending grading in one transaction, before anything
is answered; a registered scenario's ground truth is read, and the caller's attempts on
it counted, in that same transaction. A worker of this process with a free slot takes
the new grading leased in that same transaction; otherwise the workers are woken to
claim it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from api.grading import self_preference
from api.grading.ground_truth_policy import check_inline_ground_truth, check_rubric_choice
from api.service.attempts import check_attempts_in
from api.service.errors import InvalidRequest, ServiceError, UnknownReference
from api.service.principal import Principal
from api.service.schemas import SubmissionCreate
from api.service.services import Services
from judge.inputs import check_text
from judge.rubric import Rubric
from judge.trace import check_trace, screen_submission
from storage import GradingView, NewSubmission, ScenarioRecord, StorageError, SubmissionOutcome
from storage.attempts import is_replay_in
from storage.submissions import SubmissionBuilder
from storage.tables import new_id

__all__ = ["Accepted", "accept_submission", "wait_for_grading"]

#: how often a waiting caller re-reads the grading (work done by other processes)
_POLL_SECONDS = 0.25


@dataclass(frozen=True, slots=True)
class Accepted:
    """A stored submission with its grading, and the rubric it will be graded with."""

    outcome: SubmissionOutcome
    rubric: Rubric


def _from_scenario(
    session: Session,
    services: Services,
    principal: Principal,
    fields: dict[str, Any],
    idempotency_key: str | None,
) -> NewSubmission:
    """The submission of ``fields`` with its scenario's newest ground truth and version,
    read in the transaction that stores it, once the caller's attempts on the scenario
    allow another (``api.service.attempts``)."""
    scenario_id = fields["scenario_id"]
    scenario = session.get(ScenarioRecord, scenario_id)
    if scenario is None:
        detail = f"no scenario with id {scenario_id!r}"
        raise UnknownReference(detail, field="scenario_id", title="Unknown scenario")
    check_attempts_in(session, services, principal, scenario_id, idempotency_key=idempotency_key)
    return NewSubmission(
        **fields,
        ground_truth=scenario.ground_truth,
        ground_truth_source="scenario",
        scenario_version=scenario.version,
    )


async def _checked(
    services: Services, data: SubmissionCreate, principal: Principal, idempotency_key: str | None
) -> Rubric:
    """The rubric to grade with, once the request's texts, references and the caller's
    permissions (its own ground truth, its choice of rubric, the self-preference policy)
    are valid.

    A policy's refusal does not stand for a replay (the caller's ``idempotency_key`` of a
    submission already stored): the first request was accepted under the policy of its
    day, and a retry after a restart with a stricter one is answered with what it stored,
    as the rate limit, queue ceiling and attempt limit answer replays too."""
    settings = services.settings
    problem = data.truth_problem()
    if problem:
        raise InvalidRequest(problem, field="scenario_id")
    policies = _Policies(services, principal, idempotency_key)
    if data.ground_truth is not None:
        await policies.check(check_inline_ground_truth, settings, principal)
    check_text(data.diagnosis, field="diagnosis", max_bytes=settings.max_text_bytes)
    if data.ground_truth is not None:
        check_text(data.ground_truth, field="ground_truth", max_bytes=settings.max_text_bytes)
    if data.trace is not None:
        check_trace(data.trace, field="trace", max_bytes=settings.max_text_bytes)
    rubric_id = data.rubric or settings.rubric
    rubric = await services.rubrics.resolve(rubric_id)
    if rubric is None:
        detail = f"no rubric with id {rubric_id!r}"
        raise UnknownReference(detail, field="rubric", title="Unknown rubric")
    await policies.check(check_rubric_choice, settings, principal, rubric_id)
    judge_spec = settings.grading_judge()[0]
    await policies.check(self_preference.refuse, settings, judge_spec, data.model)
    return rubric


class _Policies:
    """Runs the policy checks of one request; a refusal is waived for a replay."""

    def __init__(
        self, services: Services, principal: Principal, idempotency_key: str | None
    ) -> None:
        self._services = services
        self._principal = principal
        self._key = idempotency_key
        self._replay: bool | None = None

    async def check(self, policy: Callable[..., None], *args: Any) -> None:
        """``policy(*args)``; its ``ServiceError`` is raised unless the request is a replay
        (looked up once, and only when a policy refuses)."""
        try:
            policy(*args)
        except ServiceError:
            if self._key is None:
                raise
            if self._replay is None:
                db = self._services.store.db
                self._replay = await db.run_read(is_replay_in, self._principal.id, self._key)
            if not self._replay:
                raise


async def accept_submission(
    services: Services,
    data: SubmissionCreate,
    *,
    principal: Principal,
    idempotency_key: str | None = None,
) -> Accepted:
    """Validate and store a submission with its pending grading (or replay an earlier one).

    Raises ``InvalidRequest`` naming the field at fault, ``InputError`` for unusable
    text, ``IdempotencyConflict`` when the key was used for another request,
    ``TooManyAttempts`` past a submitter's attempts on a scenario
    (``api.service.attempts``); nothing is stored then. A process stores a few
    submissions at once (``Services.intake``), the others wait their turn.
    """
    async with services.intake:
        accepted = await _accept(services, data, principal, idempotency_key)
    if accepted.outcome.claim is None:  # a replay, or no worker here took it at once
        services.waiters.work.set()
    return accepted


async def _accept(
    services: Services,
    data: SubmissionCreate,
    principal: Principal,
    idempotency_key: str | None,
) -> Accepted:
    rubric = await _checked(services, data, principal, idempotency_key)
    judge_spec, judge_backend, judge_model = services.settings.grading_judge()
    # screened once, here: credentials never reach the database or a judge (only kinds
    # and positions are kept), and what screening found is stored for every grading of it
    screening, trace = await asyncio.to_thread(screen_submission, data.diagnosis, data.trace)
    fields: dict[str, Any] = {
        "diagnosis": screening.text,
        "scenario_id": data.scenario_id,
        "agent": data.agent,
        "model": data.model,
        "run_id": data.run_id,
        "attempt": data.attempt,
        "metadata": data.metadata,
        "redactions": list(screening.redactions),
        "screening": screening.record(),
        "trace": trace,
        "rubric": data.rubric,
    }
    submission: NewSubmission | SubmissionBuilder
    if data.ground_truth is not None:
        submission = NewSubmission(
            **fields, ground_truth=data.ground_truth, ground_truth_source="inline"
        )
    else:  # the scenario's, read where the submission is stored: one transaction
        submission = functools.partial(
            _from_scenario,
            services=services,
            principal=principal,
            fields=fields,
            idempotency_key=idempotency_key,
        )
    judge = (judge_spec, judge_backend, judge_model)
    outcome = await _store(services, submission, rubric, judge, principal, idempotency_key)
    return Accepted(outcome=outcome, rubric=rubric)


async def _store(
    services: Services,
    submission: NewSubmission | SubmissionBuilder,
    rubric: Rubric,
    judge: tuple[str, str, str],
    actor: Principal,
    idempotency_key: str | None,
) -> SubmissionOutcome:
    """Store ``submission`` with its pending grading; a free worker of this process takes
    the grading leased in the same transaction, instead of claiming it afterwards.

    A store that does not answer (the request cancelled while the transaction ran, which
    ``Database.run`` lets end, or a database error, perhaps raised after the commit) may
    still have stored the grading leased: the worker releases that lease at once, so the
    grading does not wait for the lease to expire.
    """
    handoff = services.handoff
    lease = handoff.reserve() if handoff is not None else None
    grading_id = new_id() if lease is not None else None
    try:
        outcome = await services.store.submissions.create(
            submission,
            rubric=rubric,
            judge_spec=judge[0],
            judge_backend=judge[1],
            judge_model=judge[2],
            actor=actor.id,
            actor_role=actor.role,
            idempotency_key=idempotency_key,
            lease=lease,
            grading_id=grading_id,
        )
    except (ServiceError, StorageError):  # refused in the transaction: nothing stored
        if handoff is not None and lease is not None:
            handoff.take(None)
        raise
    except BaseException:
        if handoff is not None and grading_id is not None:
            handoff.give_back(grading_id)
        raise
    if handoff is not None and lease is not None:
        handoff.take(outcome.claim)
    return outcome


async def wait_for_grading(
    services: Services,
    grading_id: str,
    seconds: float,
    *,
    pending: bool = False,
    stopping: Callable[[], bool] = lambda: False,
) -> GradingView | None:
    """Re-read the grading until it is done or ``seconds`` passed; woken in-process.

    ``pending``: the grading is known to be pending (just stored), so the first read is
    skipped and the wait begins at once. ``stopping``: whether the process is shutting
    down, in which case the grading is read once more and returned as it is.
    """
    event = services.waiters.event_for(grading_id)
    deadline = time.monotonic() + seconds
    try:
        while True:
            remaining = deadline - time.monotonic()
            if not pending or stopping():
                view = await services.store.gradings.get(grading_id)
                if view is None or view.grading.status != "pending":
                    return view
                if remaining <= 0 or stopping():
                    return view
            pending = False
            if event.is_set():  # woken, yet still pending (deferred): wait for the next end
                event = services.waiters.event_for(grading_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0, min(remaining, _POLL_SECONDS))):
                    await event.wait()
    finally:
        services.waiters.forget(grading_id)
