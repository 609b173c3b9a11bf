"""Accepting submissions durably, with idempotency keys.

A submission and its pending grading are committed in one transaction before the API
answers. A replay (same submitter, same key, same request) returns what the first
request stored; the same key with a different request is an IdempotencyConflict. Two
identical requests racing are settled by the unique constraint on
(submitted_by, idempotency_key): the loser's transaction fails and it re-reads.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.masking import mask_passwords
from judge.rubric import Rubric
from storage.audit import values_digest
from storage.canonical import canonical_json, sha256_hex
from storage.catalog import CatalogRepository
from storage.claims import claim_of
from storage.database import Database
from storage.errors import IdempotencyConflict, NotFound
from storage.models import NewSubmission, SubmissionOutcome
from storage.tables import GradingRecord, ScenarioRecord, SubmissionRecord, new_id, row_values

__all__ = ["SubmissionBuilder", "SubmissionRepository"]

_SUBMISSIONS = SubmissionRecord.__table__  # type: ignore[attr-defined]
_GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]


def _received_payload(
    data: NewSubmission, submission: SubmissionRecord, grading: GradingRecord
) -> dict[str, Any]:
    """The audit payload of a received submission: who and what, texts by size and hash."""
    traced = {} if data.trace is None else {"trace_sha256": sha256_hex(canonical_json(data.trace))}
    return {
        "submission_id": submission.id,
        "grading_id": grading.id,
        "agent": data.agent,
        "model": data.model,
        "run_id": data.run_id,
        "attempt": data.attempt,
        "scenario_id": data.scenario_id,
        "scenario_version": data.scenario_version,
        "ground_truth_source": data.ground_truth_source,
        "diagnosis_chars": len(data.diagnosis),
        "diagnosis_sha256": sha256_hex(data.diagnosis),
        "redactions": [r.get("kind") for r in data.redactions],
        "ground_truth_chars": len(data.ground_truth),
        "ground_truth_sha256": sha256_hex(data.ground_truth),
        "idempotency_key": submission.idempotency_key,
        # only with a trace: payloads of submissions without one keep their shape
        **traced,
    }


def _pending_grading(
    submission: SubmissionRecord,
    rubric: Rubric,
    judge: tuple[str, str, str],
    scenario_version: int | None,
    grading_id: str | None = None,
) -> GradingRecord:
    """The pending grading of a new submission by ``rubric`` and ``judge`` (spec, backend,
    model), with id ``grading_id`` (default: a fresh one)."""
    judge_spec, judge_backend, judge_model = judge
    return GradingRecord(
        id=grading_id or new_id(),
        submission_id=submission.id,
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        judge_spec=judge_spec,
        judge_backend=judge_backend,
        judge_model=judge_model,
        status="pending",
        created_at=submission.created_at,
        scenario_version=scenario_version,
    )


#: what builds a submission inside the transaction that stores it (``create``)
SubmissionBuilder = Callable[[Session], NewSubmission]


class SubmissionRepository:
    """Submissions and the pending gradings created with them."""

    def __init__(self, db: Database, catalog: CatalogRepository) -> None:
        """Work through ``db``; ``catalog`` keeps the rubric versions submissions use."""
        self._db = db
        self._catalog = catalog

    async def create(
        self,
        data: NewSubmission | SubmissionBuilder,
        *,
        rubric: Rubric,
        judge_spec: str,
        judge_backend: str,
        judge_model: str,
        actor: str,
        actor_role: str | None = None,
        idempotency_key: str | None = None,
        lease: tuple[str, float] | None = None,
        grading_id: str | None = None,
    ) -> SubmissionOutcome:
        """Store a submission and its pending grading in one transaction.

        ``data``: the submission, or what builds it in that transaction (it reads what
        the submission takes from the database there: a registered scenario's ground
        truth, the checks that count what is stored), before a replay is looked for.

        ``lease``: ``(worker id, seconds)`` of a worker of this process with a free slot:
        a new grading is stored leased to it, and the outcome carries its claim, so the
        worker grades it without a claim of its own (a replay carries none).
        ``actor_role``: the role of ``actor``'s token (None: no token's), which the claim
        needs as a claim from the queue reads it (``storage.claims.claim_of``).
        ``grading_id``: the new grading's id (default: a fresh one), for a caller that
        must find the grading should the outcome not reach it (the store cancelled, or
        failed, after the commit).

        Raises NotFound for an unknown scenario and IdempotencyConflict when
        ``idempotency_key`` was used by ``actor`` for a different request.
        """
        judge = (judge_spec, judge_backend, judge_model)
        try:
            return await self._db.run(
                self._create,
                data,
                rubric,
                judge,
                actor,
                idempotency_key,
                lease,
                grading_id,
                actor_role,
            )
        except IntegrityError:
            if idempotency_key is None:
                raise
            # a racing request with the same key committed first: answer with its rows
            replay = await self._db.run(self._replay_of, data, actor, idempotency_key)
            if replay is None:
                raise
            return replay

    def _replay_of(
        self, session: Session, data: NewSubmission | SubmissionBuilder, actor: str, key: str
    ) -> SubmissionOutcome | None:
        built = data(session) if callable(data) else data
        return self._replay(session, actor, key, built)

    def _replay(
        self, session: Session, actor: str, key: str, built: NewSubmission
    ) -> SubmissionOutcome | None:
        query = select(SubmissionRecord).where(
            col(SubmissionRecord.submitted_by) == actor,
            col(SubmissionRecord.idempotency_key) == key,
        )
        submission = session.execute(query).scalar_one_or_none()
        if submission is None:
            return None
        if not built.replays(submission):
            raise IdempotencyConflict(
                "this Idempotency-Key was already used with a different request"
            )
        grading = (
            session.execute(
                select(GradingRecord)
                .where(col(GradingRecord.submission_id) == submission.id)
                .order_by(col(GradingRecord.is_current).desc(), col(GradingRecord.created_at))
                .limit(1)
            )
        ).scalar_one()
        return SubmissionOutcome(submission=submission, grading=grading, created=False)

    def _create(
        self,
        session: Session,
        data: NewSubmission | SubmissionBuilder,
        rubric: Rubric,
        judge: tuple[str, str, str],
        actor: str,
        idempotency_key: str | None,
        lease: tuple[str, float] | None = None,
        grading_id: str | None = None,
        actor_role: str | None = None,
    ) -> SubmissionOutcome:
        """The replay of an earlier request with this key, else the new rows."""
        built = data(session) if callable(data) else data
        if idempotency_key is not None:
            replay = self._replay(session, actor, idempotency_key, built)
            if replay is not None:
                return replay
        request_hash = built.request_hash()
        return self._insert(
            session,
            built,
            request_hash=request_hash,
            rubric=rubric,
            judge=judge,
            actor=actor,
            actor_role=actor_role,
            idempotency_key=idempotency_key,
            lease=lease,
            grading_id=grading_id,
            scenario_read=callable(data),  # a builder read the scenario it names
        )

    def _insert(
        self,
        session: Session,
        data: NewSubmission,
        *,
        request_hash: str,
        rubric: Rubric,
        judge: tuple[str, str, str],
        actor: str,
        actor_role: str | None,
        idempotency_key: str | None,
        lease: tuple[str, float] | None,
        grading_id: str | None = None,
        scenario_read: bool = False,
    ) -> SubmissionOutcome:
        unread = data.scenario_id is not None and not scenario_read
        if unread and session.get(ScenarioRecord, data.scenario_id) is None:
            raise NotFound(f"scenario {data.scenario_id!r} does not exist")
        now = self._db.clock()
        submission = SubmissionRecord(
            id=new_id(),
            **data.record_values(),
            submitted_by=actor,
            idempotency_key=idempotency_key,
            request_hash=request_hash,
            created_at=now,
        )
        # Core INSERTs of the records' values: the ORM's unit of work cost more than the
        # rest of a submission (bench/overhead.py); the records stay transient.
        # A racing duplicate fails here, before anything else.
        submission_values = row_values(submission)
        session.connection().execute(insert(_SUBMISSIONS), [submission_values])
        grading = _pending_grading(submission, rubric, judge, data.scenario_version, grading_id)
        claim = None
        if lease is not None:  # leased as a claim would (storage.queue): no revision bump
            worker_id, seconds = lease
            expires = now + timedelta(seconds=seconds)
            grading.lease_owner, grading.lease_expires_at, grading.claim_count = (
                worker_id,
                expires,
                1,
            )
            claim = claim_of(grading, submission, expires, None, 1, actor_role)
        grading_values = row_values(grading)
        session.connection().execute(insert(_GRADINGS), [grading_values])
        # audit rows last: on PostgreSQL they take the chain lock until commit
        self._catalog.ensure_rubric(session, rubric, actor=actor)
        self._db.audit(
            session,
            "submission.received",
            entity_type="submission",
            entity_id=submission.id,
            actor=actor,
            payload={
                **_received_payload(data, submission, grading),
                "request_sha256": request_hash,
                "rubric": {"id": rubric.id, "version": rubric.version},
                "judge": mask_passwords(grading.judge_spec),
            },
            # the digest of the row just written: no read-back
            covers={grading.id: values_digest(grading_values, ())},
            rows=[(_SUBMISSIONS, submission_values)],
        )
        return SubmissionOutcome(submission=submission, grading=grading, created=True, claim=claim)

    async def get(self, submission_id: str) -> SubmissionRecord | None:
        """A submission by id, or None."""
        return await self._db.run_read(lambda s: s.get(SubmissionRecord, submission_id))
