"""The judge requests of regrade jobs graded through a batch engine, and their replies.

Phases (``api.regrade.batch_engine`` drives them): the requests of a job's items are
rendered and stored (``store_rendered``); they go to the engine in batches
(``new_batch``: the Batch API, or a requests file); the results are imported
(``import_results``: each reply checked, kept once under its custom id); then the
job's items are released to the workers, which answer the grader from the kept
replies (``storage.regrade.batch_answers``). Each step is one transaction, audited, so a restarted
service goes on from the engine's stored state.

Why this module is long (about 700 lines): it is the one home of a batch's requests and
replies in storage, each phase's transaction beside the others, since each moves the
engine state the next one reads (splitting it would split that state machine); the
import alone, checked under the engine's lock, is a third of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, insert, select, true, update
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.batch import CheckedResults, CustomId, ExpectedRequest
from storage.claims import claim_of, claimable_query
from storage.database import Database
from storage.errors import NotFound
from storage.models import Claim
from storage.regrade.batch_tables import (
    RegradeBatchRecord,
    RegradeBatchRequestRecord,
    RegradeEngineRecord,
)
from storage.regrade.tables import TERMINAL_STATES, RegradeJobRecord
from storage.tables import GradingRecord

__all__ = [
    "MAX_RETRY_SECONDS",
    "MAX_ROUNDS",
    "SUBMIT_SECONDS",
    "BatchProgress",
    "BatchQueries",
    "ImportReport",
    "RenderedRequest",
    "add_engine",
    "retry_wait",
]

#: batches (or results files) a job's failed requests may go through before the rest is
#: asked live
MAX_ROUNDS = 3
#: a batch being submitted for this long without a remote id was cut short: take it over
SUBMIT_SECONDS = 300
#: the longest wait between tries of an engine's step that keeps failing (an hour)
MAX_RETRY_SECONDS = 3600.0
_INSERT_BATCH = 500
_REQ = RegradeBatchRequestRecord


def retry_wait(failures: int, poll_seconds: float) -> float:
    """Seconds before the next try of a step that failed ``failures`` times in a row:
    ``poll_seconds``, doubled for each failure after the first, at most
    :data:`MAX_RETRY_SECONDS` (whatever the count: a step failing for months included)."""
    doublings = min(max(failures - 1, 0), 64)
    return float(min(poll_seconds * 2.0**doublings, MAX_RETRY_SECONDS))


@dataclass(frozen=True)
class RenderedRequest:
    """A request a grader would send for one item, as rendered for a batch."""

    custom_id: CustomId
    prompt_hash: str
    model: str
    body: dict[str, Any]


@dataclass
class ImportReport:
    """What one results file or batch output gave."""

    batch_id: str | None = None
    answered: int = 0
    failed: int = 0
    duplicates: int = 0
    #: requests sent in the batch with no result in its output (an expired batch's rest)
    missing: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)
    #: the engine's state afterwards
    state: str = ""

    def counts(self) -> dict[str, Any]:
        """The counts, for the batch row and the audit event."""
        return {
            "answered": self.answered,
            "failed": self.failed,
            "duplicates": self.duplicates,
            "missing": self.missing,
            "refused": len(self.refused),
        }


@dataclass(frozen=True)
class BatchProgress:
    """A job's requests by status, tokens of the replies, and its batches."""

    engine: str
    retry: str
    state: str
    round: int
    error: str | None
    #: steps that failed in a row, and when the failed one is tried again
    failures: int
    retry_at: datetime | None
    requests: int
    submitted: int
    answered: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    batches: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """As the job object's ``batch`` entry."""
        return {
            "engine": self.engine,
            "retry": self.retry,
            "state": self.state,
            "round": self.round,
            "error": self.error,
            "failures": self.failures,
            "retry_at": self.retry_at.isoformat() if self.retry_at else None,
            "requests": self.requests,
            "submitted": self.submitted,
            "completed": self.answered,
            "failed": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "batches": self.batches,
        }


def add_engine(session: Session, job_id: str, engine: str, retry: str, now: Any) -> None:
    """Give a new job (in its creating transaction) its engine row: state ``rendering``."""
    session.add(
        RegradeEngineRecord(
            job_id=job_id, engine=engine, retry=retry, state="rendering", created_at=now
        )
    )


def _engine(db: Database, session: Session, job_id: str) -> RegradeEngineRecord:
    query = select(RegradeEngineRecord).where(col(RegradeEngineRecord.job_id) == job_id)
    if db.postgres:
        query = query.with_for_update()
    found = session.execute(query).scalar_one_or_none()
    if found is None:
        raise NotFound(f"regrade job {job_id!r} has no batch engine")
    return found


def _batch_row(batch: RegradeBatchRecord) -> dict[str, Any]:
    return {
        "id": batch.id,
        "round": batch.round,
        "engine": batch.engine,
        "remote_id": batch.remote_id,
        "state": batch.state,
        "requests": batch.requests,
        "counts": batch.counts,
        "error": batch.error,
        "created_at": batch.created_at.isoformat(),
        "finished_at": batch.finished_at.isoformat() if batch.finished_at else None,
    }


class BatchQueries:
    """Engines, batches and requests of regrade jobs graded through a batch engine."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def engine(self, job_id: str) -> RegradeEngineRecord | None:
        """The job's engine row, or None for a live job."""
        return await self._db.run_read(lambda s: s.get(RegradeEngineRecord, job_id))

    async def engines_in(
        self, states: Sequence[str], *, due: bool = True
    ) -> list[RegradeEngineRecord]:
        """The engine rows in ``states`` of jobs not ended (a cancelled job's engine rests
        until it is resumed), oldest first: the runner's work. ``due``: only those whose
        failed step's wait is over (see :meth:`fail_engine`); False: all of them."""
        query = (
            select(RegradeEngineRecord)
            .join(RegradeJobRecord, col(RegradeJobRecord.id) == col(RegradeEngineRecord.job_id))
            .where(
                col(RegradeEngineRecord.state).in_(states),
                col(RegradeJobRecord.state).not_in(TERMINAL_STATES),
            )
            .order_by(col(RegradeEngineRecord.created_at))
        )
        if due:
            retry_at = col(RegradeEngineRecord.retry_at)
            query = query.where(retry_at.is_(None) | (retry_at <= self._db.clock()))
        return await self._db.run_read(lambda s: list(s.execute(query).scalars()))

    async def items_to_render(self, job_id: str) -> list[Claim]:
        """The job's pending items with what a worker would be given of each (not leased)."""
        now = self._db.clock()
        query = claimable_query(now, 10_000_000, true(), regrade=True).where(
            col(GradingRecord.regrade_job_id) == job_id
        )

        def work(session: Session) -> list[Claim]:
            rows = session.execute(query).all()
            return [claim_of(g, s, now, truth, g.claim_count, r) for g, s, truth, r in rows]

        return await self._db.run_read(work)

    async def store_rendered(
        self, job_id: str, requests: Sequence[RenderedRequest], *, actor: str
    ) -> str | None:
        """Store a job's rendered requests and move its engine on; the new state, or None
        when the job was rendered already (by another process) or is cancelled or ended
        (its items are out, so they rendered as none: it is rendered once resumed)."""

        def work(session: Session) -> str | None:
            engine = _engine(self._db, session, job_id)
            job = session.get(RegradeJobRecord, job_id)
            if engine.state != "rendering" or job is None or job.state in TERMINAL_STATES:
                return None
            rows = [
                {
                    "custom_id": str(r.custom_id),
                    "job_id": job_id,
                    "grading_id": r.custom_id.grading_id,
                    "call": r.custom_id.call,
                    "sample": r.custom_id.sample,
                    "prompt_hash": r.prompt_hash,
                    "model": r.model,
                    "body": r.body,
                    "status": "rendered",
                }
                for r in requests
            ]
            for start in range(0, len(rows), _INSERT_BATCH):
                session.execute(insert(_REQ), rows[start : start + _INSERT_BATCH])
            if not rows:
                engine.state = "grading"  # everything answered by the cache: nothing to send
            else:
                engine.state = "submitting" if engine.engine == "batch" else "waiting"
            engine.updated_at = self._db.clock()
            session.flush()
            self._db.audit(
                session,
                "regrade_job.batch_rendered",
                entity_type="regrade_job",
                entity_id=job_id,
                actor=actor,
                payload={
                    "job_id": job_id,
                    "engine": engine.engine,
                    "requests": len(rows),
                    "gradings": len({r.custom_id.grading_id for r in requests}),
                    "state": engine.state,
                },
            )
            return engine.state

        return await self._db.run(work)

    async def fail_engine(self, job_id: str, error: str, *, poll_seconds: float) -> None:
        """Note why the engine could not go on and when to try again: ``poll_seconds``
        after its first failed step, twice as long after each further one in a row, at
        most :data:`MAX_RETRY_SECONDS` (a step that fails every time, such as a file the
        Batch API refuses, costs a few calls an hour, not one every round)."""

        def work(session: Session) -> None:
            engine = _engine(self._db, session, job_id)
            now = self._db.clock()
            engine.failures += 1
            engine.error, engine.updated_at = error[:1000], now
            engine.retry_at = now + timedelta(seconds=retry_wait(engine.failures, poll_seconds))

        await self._db.run(work)

    async def try_now(self, job_id: str) -> bool:
        """End the wait of the job's engine, if it has one (the job was resumed): its next
        step is taken at the runner's next round. Whether the job has an engine."""
        statement = (
            update(RegradeEngineRecord)
            .where(col(RegradeEngineRecord.job_id) == job_id)
            .values(retry_at=None)
        )
        return bool(await self._db.run(lambda s: s.connection().execute(statement).rowcount))

    async def recovered(self, job_id: str) -> None:
        """A step succeeded after failed ones: the error and the wait are cleared."""
        statement = (
            update(RegradeEngineRecord)
            .where(col(RegradeEngineRecord.job_id) == job_id)
            .values(failures=0, retry_at=None, error=None, updated_at=self._db.clock())
        )
        await self._db.run(lambda s: s.execute(statement))

    async def open_requests(self, job_id: str) -> list[tuple[str, dict[str, Any]]]:
        """``(custom id, body)`` of the job's requests with no reply yet, in order."""
        query = (
            select(col(_REQ.custom_id), col(_REQ.body))
            .where(col(_REQ.job_id) == job_id, col(_REQ.status) != "answered")
            .order_by(col(_REQ.grading_id), col(_REQ.call), col(_REQ.sample))
        )
        return await self._db.run_read(lambda s: [(c, b) for c, b in s.execute(query)])

    async def new_batch(self, job_id: str, *, actor: str) -> RegradeBatchRecord | None:
        """Open a batch of the job's requests with no reply (engine ``submitting``): the
        batch row (state ``created``), its requests marked ``submitted``; None when the
        engine is not submitting or another runner is submitting (a created batch whose
        submission began less than ``SUBMIT_SECONDS`` ago and has not failed since). A
        created batch whose submission failed or was cut short is returned, to be
        finished, its submission stamped as begun now (``created_at``)."""

        def work(session: Session) -> RegradeBatchRecord | None:
            engine = _engine(self._db, session, job_id)
            if engine.state != "submitting":
                return None
            open_ = select(RegradeBatchRecord).where(
                col(RegradeBatchRecord.job_id) == job_id,
                col(RegradeBatchRecord.state) == "created",
            )
            found = session.execute(open_).scalars().first()
            if found is not None:
                now = self._db.clock()
                failed = bool(engine.failures) and (engine.updated_at or now) >= found.created_at
                if not failed and found.created_at > now - timedelta(seconds=SUBMIT_SECONDS):
                    return None  # another runner is submitting it
                found.created_at = now  # this runner finishes it; others leave it alone
                return found
            ids = list(
                session.execute(
                    select(col(_REQ.custom_id)).where(
                        col(_REQ.job_id) == job_id, col(_REQ.status) != "answered"
                    )
                ).scalars()
            )
            engine.round += 1
            batch = RegradeBatchRecord(
                job_id=job_id,
                round=engine.round,
                engine=engine.engine,
                requests=len(ids),
                created_at=self._db.clock(),
            )
            session.add(batch)
            session.flush()
            session.execute(
                update(_REQ)
                .where(col(_REQ.custom_id).in_(ids))
                .values(status="submitted", batch_id=batch.id)
                .execution_options(synchronize_session=False)
            )
            engine.updated_at = self._db.clock()
            self._db.audit(
                session,
                "regrade_job.batch_opened",
                entity_type="regrade_job",
                entity_id=job_id,
                actor=actor,
                payload={"job_id": job_id, "batch_id": batch.id, "requests": len(ids)},
            )
            return batch

        return await self._db.run(work)

    async def batch_requests(self, batch_id: str) -> list[tuple[str, dict[str, Any]]]:
        """``(custom id, body)`` of the requests a batch carries."""
        query = (
            select(col(_REQ.custom_id), col(_REQ.body))
            .where(col(_REQ.batch_id) == batch_id)
            .order_by(col(_REQ.grading_id), col(_REQ.call), col(_REQ.sample))
        )
        return await self._db.run_read(lambda s: [(c, b) for c, b in s.execute(query)])

    async def update_batch(self, batch_id: str, **values: Any) -> RegradeBatchRecord:
        """Record what the engine said of a batch (its ids, its state); engine running
        once it has a remote id."""

        def work(session: Session) -> RegradeBatchRecord:
            batch = session.get(RegradeBatchRecord, batch_id)
            if batch is None:
                raise NotFound(f"no regrade batch {batch_id!r}")
            for key, value in values.items():
                setattr(batch, key, value)
            if values.get("remote_id"):
                engine = _engine(self._db, session, batch.job_id)
                if engine.state == "submitting":
                    engine.state, engine.error = "running", None
                    engine.updated_at = self._db.clock()
            session.flush()
            return batch

        return await self._db.run(work)

    async def batches(self, job_id: str, *, under_way: bool = False) -> list[RegradeBatchRecord]:
        """The job's batches, oldest first; ``under_way``: only those the engine has (a
        remote id) whose results are not imported yet (no ``finished_at``), whatever
        state they were last seen in (one found again after a cut-short submission may
        have ended already)."""
        query = select(RegradeBatchRecord).where(col(RegradeBatchRecord.job_id) == job_id)
        if under_way:
            query = query.where(
                col(RegradeBatchRecord.remote_id).is_not(None),
                col(RegradeBatchRecord.finished_at).is_(None),
            )
        query = query.order_by(col(RegradeBatchRecord.created_at), col(RegradeBatchRecord.round))
        return await self._db.run_read(lambda s: list(s.execute(query).scalars()))

    async def imported(self, batch_id: str) -> bool:
        """Whether the batch's results were imported already (NotFound for no batch)."""
        return await self._db.run_read(_imported, batch_id)

    async def expectations(
        self, job_id: str
    ) -> tuple[dict[str, ExpectedRequest], set[str], dict[str, str]]:
        """Every request of the job as results are checked against it, the custom ids
        that have a reply already, and those failed by a result with an id: custom id ->
        that result's id (``judge.batch.check_results``)."""
        query = select(
            col(_REQ.custom_id), col(_REQ.body), col(_REQ.status), col(_REQ.result_id)
        ).where(col(_REQ.job_id) == job_id)

        def work(session: Session) -> tuple[dict[str, ExpectedRequest], set[str], dict[str, str]]:
            expected, answered, failed = {}, set(), {}
            for custom_id, body, status, result_id in session.execute(query):
                expected[custom_id] = ExpectedRequest.of(custom_id, body)
                if status == "answered":
                    answered.add(custom_id)
                elif status == "failed" and result_id is not None:
                    failed[custom_id] = result_id
            return expected, answered, failed

        return await self._db.run_read(work)

    async def import_results(
        self,
        job_id: str,
        checked: CheckedResults,
        *,
        actor: str,
        batch_id: str | None = None,
        engine_kind: str = "offline",
        sent: Iterable[str] = (),
        batch_state: str = "imported",
        error: str | None = None,
    ) -> ImportReport:
        """Keep a batch's checked results in one transaction and move the engine on.

        ``batch_id``: the Batch API batch they came from (None: an offline results file,
        for which a batch row is made); ``sent``: the custom ids that batch carried (those
        with no result are ``missing``). A reply is kept only for a request with none yet
        (checked again under the engine's lock), so none is ever kept twice. Then: every
        request answered, or ``retry`` live, or the rounds used up -> ``grading``; else the
        rest goes in a new batch (``submitting``) or waits for another file (``waiting``).
        A batch imported already (by another runner) changes nothing: each of its
        results is a duplicate (its failed requests may be in the next batch by now).
        """

        def work(session: Session) -> ImportReport:
            engine = _engine(self._db, session, job_id)  # importers of the job take turns
            report = ImportReport(refused=[r.__dict__ for r in checked.refused])
            report.duplicates = checked.duplicates
            if batch_id is not None and _imported(session, batch_id):
                report.duplicates += len(checked.answers) + len(checked.failures)
                report.batch_id, report.state = batch_id, engine.state
                return report
            if engine.engine != engine_kind or engine.state not in ("running", "waiting"):
                for cid in [*checked.answers, *checked.failures]:
                    reason = (
                        f"the job takes no results now (engine {engine.engine}, {engine.state})"
                    )
                    report.refused.append({"line": 0, "custom_id": cid, "reason": reason})
                report.state = engine.state
                return report
            now = self._db.clock()
            batch = _import_batch(session, engine, batch_id, checked, now)
            _keep(session, batch, checked, report, now)
            if batch_id is None and (report.answered or report.failed):
                engine.round = batch.round  # an offline file that kept something: a round
            elif batch_id is None:
                batch.round = engine.round  # nothing new: a repeat within its round
            _mark_missing(session, batch, checked, sent, batch_state, report)
            open_count = _move_on(session, engine)
            engine.updated_at = now
            batch.state, batch.counts, batch.finished_at = batch_state, report.counts(), now
            batch.error = error
            report.batch_id, report.state = batch.id, engine.state
            session.flush()
            self._db.audit(
                session,
                "regrade_job.batch_imported",
                entity_type="regrade_job",
                entity_id=job_id,
                actor=actor,
                payload={
                    "job_id": job_id,
                    "batch_id": batch.id,
                    "remote_id": batch.remote_id,
                    "batch_state": batch_state,
                    "counts": report.counts(),
                    "open": open_count,
                    "state": engine.state,
                },
            )
            return report

        return await self._db.run(work)

    async def progress(self, job_id: str) -> BatchProgress | None:
        """The job's requests by status with the replies' tokens, and its batches; None
        for a live job."""

        def work(session: Session) -> BatchProgress | None:
            engine = session.get(RegradeEngineRecord, job_id)
            if engine is None:
                return None
            # a request is in a batch from the moment the batch row is opened, but the
            # Batch API has it only once it took the file (the batch has its remote id)
            unsent = and_(
                col(_REQ.status) == "submitted",
                col(RegradeBatchRecord.engine) == "batch",
                col(RegradeBatchRecord.remote_id).is_(None),
            )
            status = case((unsent, "sending"), else_=col(_REQ.status))
            rows = session.execute(
                select(
                    status,
                    func.count(),
                    func.coalesce(func.sum(_REQ.prompt_tokens), 0),
                    func.coalesce(func.sum(_REQ.completion_tokens), 0),
                )
                .outerjoin(RegradeBatchRecord, col(RegradeBatchRecord.id) == col(_REQ.batch_id))
                .where(col(_REQ.job_id) == job_id)
                .group_by(status)
            ).all()
            by = {status: (int(n or 0), int(p or 0), int(c or 0)) for status, n, p, c in rows}
            batches = session.execute(
                select(RegradeBatchRecord)
                .where(col(RegradeBatchRecord.job_id) == job_id)
                .order_by(col(RegradeBatchRecord.created_at), col(RegradeBatchRecord.round))
            ).scalars()
            answered = by.get("answered", (0, 0, 0))
            return BatchProgress(
                engine=engine.engine,
                retry=engine.retry,
                state=engine.state,
                round=engine.round,
                error=engine.error,
                failures=engine.failures,
                retry_at=engine.retry_at,
                requests=sum(v[0] for v in by.values()),
                submitted=sum(v[0] for k, v in by.items() if k not in ("rendered", "sending")),
                answered=answered[0],
                failed=by.get("failed", (0, 0, 0))[0],
                prompt_tokens=answered[1],
                completion_tokens=answered[2],
                batches=[_batch_row(b) for b in batches],
            )

        return await self._db.run_read(work)


def _imported(session: Session, batch_id: str) -> bool:
    """Whether the batch's results were imported already (it has ``finished_at``)."""
    finished = session.execute(
        select(col(RegradeBatchRecord.finished_at)).where(col(RegradeBatchRecord.id) == batch_id)
    ).one_or_none()
    if finished is None:
        raise NotFound(f"no regrade batch {batch_id!r}")
    return finished[0] is not None


def _import_batch(
    session: Session,
    engine: RegradeEngineRecord,
    batch_id: str | None,
    checked: CheckedResults,
    now: Any,
) -> RegradeBatchRecord:
    """The batch the results came from; a new one for an offline file, numbered as the
    next round (the file uses that round only if it keeps an answer or a failure: the
    same file imported again, all duplicates, leaves the rounds where they were)."""
    if batch_id is not None:
        found = session.get(RegradeBatchRecord, batch_id)
        if found is None:
            raise NotFound(f"no regrade batch {batch_id!r}")
        return found
    batch = RegradeBatchRecord(
        job_id=engine.job_id,
        round=engine.round + 1,
        engine=engine.engine,
        requests=len(checked.answers) + len(checked.failures),
        created_at=now,
    )
    session.add(batch)
    session.flush()
    return batch


def _keep(
    session: Session,
    batch: RegradeBatchRecord,
    checked: CheckedResults,
    report: ImportReport,
    now: Any,
) -> None:
    """Keep each reply on a request that has none yet and each failure on a request with
    no reply and not failed by that same result already (else it is a duplicate)."""
    for cid, completion in checked.answers.items():
        if completion.via is None:
            completion = completion.model_copy(update={"via": f"batch {batch.id}"})
        stored = session.execute(
            update(_REQ)
            .where(col(_REQ.custom_id) == cid, col(_REQ.status) != "answered")
            .values(
                status="answered",
                completion=completion.model_dump(mode="json"),
                error=None,
                result_id=None,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                answered_at=now,
                batch_id=batch.id,
            )
            .returning(col(_REQ.custom_id))
            .execution_options(synchronize_session=False)
        ).all()
        if stored:
            report.answered += 1
        else:
            report.duplicates += 1
    for cid, reason in checked.failures.items():
        result_id = checked.failed_by.get(cid)
        kept = col(_REQ.status) == "answered"
        if result_id is not None:
            same = col(_REQ.result_id).is_not_distinct_from(result_id)  # NULL: not the same
            kept = kept | and_(col(_REQ.status) == "failed", same)
        failed = session.execute(
            update(_REQ)
            .where(col(_REQ.custom_id) == cid, ~kept)
            .values(status="failed", error=reason[:1000], result_id=result_id, batch_id=batch.id)
            .returning(col(_REQ.custom_id))
            .execution_options(synchronize_session=False)
        ).all()
        if failed:
            report.failed += 1
        else:
            report.duplicates += 1


def _mark_missing(
    session: Session,
    batch: RegradeBatchRecord,
    checked: CheckedResults,
    sent: Iterable[str],
    batch_state: str,
    report: ImportReport,
) -> None:
    """Requests the batch carried with no result at all: failed (to be retried)."""
    seen = set(checked.answers) | set(checked.failures) | {r.custom_id for r in checked.refused}
    gone = [cid for cid in sent if cid not in seen]
    if not gone:
        return
    report.missing = len(
        session.execute(
            update(_REQ)
            .where(col(_REQ.custom_id).in_(gone), col(_REQ.status) == "submitted")
            .values(
                status="failed",
                error=f"no result in batch {batch.id} ({batch_state})",
                result_id=None,
            )
            .returning(col(_REQ.custom_id))
            .execution_options(synchronize_session=False)
        ).all()
    )


def _move_on(session: Session, engine: RegradeEngineRecord) -> int:
    """The engine's next state after an import; how many requests have no reply yet.

    Every request answered, ``retry`` live or the rounds used up: ``grading`` (the rest
    is asked live); else a new batch (``submitting``) or another file (``waiting``).
    """
    open_count = session.execute(
        select(func.count()).where(
            col(_REQ.job_id) == engine.job_id, col(_REQ.status) != "answered"
        )
    ).scalar_one()
    if open_count == 0 or engine.retry == "live" or engine.round >= MAX_ROUNDS:
        engine.state = "grading"
    else:
        engine.state = "submitting" if engine.engine == "batch" else "waiting"
    return int(open_count)
