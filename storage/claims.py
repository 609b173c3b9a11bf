"""Picking claimable gradings and what a worker is given of one it claimed.

The queue (``storage.queue``) leases what ``claimable_query`` picks and hands each
worker a :class:`~storage.models.Claim` built by ``claim_of``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, Select, and_, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.cache import ground_truth_namespace, may_read_cache
from storage.models import Claim
from storage.scenario_tables import ScenarioVersionRecord as _VERSION
from storage.tables import GradingRecord, SubmissionRecord, TokenRecord

__all__ = ["claim_of", "claimable_query", "graded_ground_truth"]


def _targets_another_version(grading: GradingRecord, submission: SubmissionRecord) -> bool:
    """The grading is against another version of the scenario's ground truth than the
    one its submission was sent with (a regrade against the newest ground truth)."""
    return grading.scenario_version not in (None, submission.scenario_version)


def graded_ground_truth(
    session: Session, grading: GradingRecord, submission: SubmissionRecord
) -> str | None:
    """The ground truth ``grading`` is (or was) judged against: the submission's copy, or
    the text of the scenario version the grading targets."""
    if not _targets_another_version(grading, submission):
        return submission.ground_truth
    query = select(col(_VERSION.ground_truth)).where(
        col(_VERSION.scenario_id) == submission.scenario_id,
        col(_VERSION.version) == grading.scenario_version,
    )
    text = session.execute(query).scalar_one_or_none()
    return text if text is not None else submission.ground_truth


def claim_of(
    grading: GradingRecord,
    submission: SubmissionRecord,
    expires: datetime,
    version_truth: Any,
    claim_count: int,
    submitter_role: str | None,
    *,
    lost_workers: int = 0,
) -> Claim:
    """What a worker needs of a grading it leased until ``expires``.

    The ground truth is the submission's copy unless the grading targets another version
    of the scenario's (a regrade against the newest ground truth): ``version_truth``.
    ``submitter_role``: the role of the token that sent the submission (None: no token's),
    which says whether its grading may read the judge cache. ``lost_workers``: as
    ``Claim.lost_workers``.
    """
    truth = submission.ground_truth
    if _targets_another_version(grading, submission):
        truth = version_truth if version_truth is not None else truth
    return Claim(
        grading_id=grading.id,
        submission_id=submission.id,
        diagnosis=submission.diagnosis,
        ground_truth=truth,
        rubric_id=grading.rubric_id,
        rubric_version=grading.rubric_version,
        judge_spec=grading.judge_spec,
        claim_count=claim_count,
        lease_expires_at=expires,
        cache_namespace=ground_truth_namespace(submission.scenario_id, submission.submitted_by),
        reads_cache=may_read_cache(
            scenario_id=submission.scenario_id,
            submitter_role=submitter_role,
            regrade=grading.regrade_job_id is not None,
        ),
        agent_model=submission.model,
        regrade_job_id=grading.regrade_job_id,
        screening=submission.screening,
        lost_workers=lost_workers,
    )


def claimable_query(
    now: datetime | BindParameter[Any],
    limit: int | BindParameter[Any],
    held_back: Any,
    *,
    regrade: bool | None = None,
) -> Select[GradingRecord, SubmissionRecord, str, str]:
    """Up to ``limit`` claimable gradings with their submissions, the ground truth of the
    scenario version they target and the role of the token that sent the submission
    (None: no token's): live ones first, then oldest first.

    ``now`` and ``limit`` may be bind parameters, for a statement built once and run
    with their values (the queue's claims: ``storage.queue``).

    ``held_back``: the WHERE clause excluding items of paused or cancelled jobs;
    ``regrade``: True for regrade job items only, False for live gradings only.
    """
    query = (
        select(GradingRecord, SubmissionRecord, col(_VERSION.ground_truth), col(TokenRecord.role))
        .join(SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id))
        .outerjoin(TokenRecord, col(TokenRecord.id) == col(SubmissionRecord.submitted_by))
        .outerjoin(
            _VERSION,
            and_(
                col(_VERSION.scenario_id) == col(SubmissionRecord.scenario_id),
                col(_VERSION.version) == col(GradingRecord.scenario_version),
            ),
        )
        .where(
            col(GradingRecord.status) == "pending",
            or_(
                col(GradingRecord.lease_expires_at).is_(None),
                col(GradingRecord.lease_expires_at) < now,
            ),
            or_(col(GradingRecord.not_before).is_(None), col(GradingRecord.not_before) <= now),
            held_back,
        )
        # live submissions before batch regrade items, then oldest first
        .order_by(
            col(GradingRecord.regrade_job_id).is_not(None),
            col(GradingRecord.created_at),
            col(GradingRecord.id),
        )
        .limit(limit)
    )
    if regrade is None:
        return query
    job = col(GradingRecord.regrade_job_id)
    return query.where(job.is_not(None) if regrade else job.is_(None))
