"""Storing imports: SREGym attempts with their verdicts, historic JSONL submissions.

Imports are idempotent: each submission carries an idempotency key derived from where it
came from (SREGym: run, agent, problem, attempt; JSONL: the line's content), so
importing the same input again stores nothing twice, and an SREGym attempt met in
several of its files is one submission (already imported after the first), as is a row
without an attempt number that an export moved up or down its file (the same cells; a
line another attempt was imported at, of another problem or with other cells besides the
verdict's, is not that attempt's; the same cells with another verdict are that attempt:
a conflict).
A row of the service's own export whose verdict columns it rewrote
from another grading (another judge's, or a human override) is already imported too.
An SREGym
attempt that this service graded itself (its row names a grading of this database, as
the client's SREGym drop-in writes it, and that grading's submission is the attempt's:
its diagnosis, problem and agent) is no new submission: it is counted graded here.
A row that repeats an imported attempt's key (JSONL: its run, agent, model, problem and attempt)
with other content is a conflict: left out and reported with where it was, the stored
one kept; a JSONL line looks for its attempt under the attempt's named lock, so imports
running at once store it once. Rows are written in batches, one transaction each, every
submission audited as ``submission.imported`` by whoever imports: the batch's audit
events (and those of the scenarios an SREGym import registers) are appended together
once all its rows are written, since a row's foreign key locks its scenario (row and
named locks before the audit chain's lock: ``storage.database``). A batch the database
refuses although every row passed the readers' checks is written again one row per
transaction, so only the row to blame is refused and the job goes on. A strict JSONL
import (one transaction) the database refuses is written once more (another import may
have stored some of its lines meanwhile: already imported now); refused again, each line
is tried alone and undone, and the import aborted naming the lines the database refuses.

Why this module is long: it is the one writer of both import formats, and they share
its batching, its row-by-row retry and its conflict rules; split, each half would need
the other's private steps.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import or_, select, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session
from sqlmodel import col

from api.imports.jsonl import JsonlLine
from api.imports.problems import ImportProblem
from api.imports.report import BATCH, ImportAborted, ImportProgress, ImportReport, read_batches
from api.imports.rows import (
    JSONL_KEY,
    jsonl_submission,
    jsonl_time_filled_in,
    sregym_diagnosis,
    sregym_earlier_key,
    sregym_grading,
    sregym_key,
    sregym_submission,
)
from api.imports.sregym import AGENT_COLUMNS, DIAGNOSIS_COLUMN, SregymAttempt, kept_cells
from judge.families import shared_family
from judge.rubric import Rubric
from judge.secrets import REDACTION_MARKER
from storage.bytewise import bytewise
from storage.canonical import canonical_json, sha256_hex
from storage.catalog import CatalogRepository
from storage.database import AuditBatch, Database, hold_named_lock
from storage.errors import database_fault
from storage.imports.tables import SregymOriginalRowRecord
from storage.imports.verdicts import VERDICT_COLUMNS, verdict_rewritten
from storage.scenarios import ScenarioSpec
from storage.tables import GradingRecord, ScenarioRecord, SubmissionRecord, new_id

__all__ = [
    "ImportAborted",
    "ImportProgress",
    "ImportQueries",
    "ImportReport",
    "RegisteredGroundTruths",
]

#: the ``submitted_by`` of imported submissions, whoever imports them: an import's
#: idempotency keys are looked up under it (the audit events name who imported)
SREGYM_SUBMITTER = "import:sregym"
JSONL_SUBMITTER = "import:jsonl"

#: the prefix of the columns SREGym writes of its judge's result (each key of the
#: oracle's dictionary: the verdict columns, and those a drop-in oracle adds, such as
#: ``scenario_version`` or ``error``), the agent's own aside (``AGENT_COLUMNS``: its
#: diagnosis and trace)
_JUDGED = "Diagnosis."


def _imported_verdict(grading: GradingRecord) -> dict[str, Any]:
    """What an imported grading decided, by which judge and rubric, as a verdict's audit
    event names it (``grading.completed``): the history reads the imported decision."""
    return {
        "status": grading.status,
        "unscored_reason": grading.unscored_reason,
        "yes_count": grading.yes_count,
        "composite": grading.composite,
        "passed": grading.passed,
        "rubric": {"id": grading.rubric_id, "version": grading.rubric_version},
        "judge": {"backend": grading.judge_backend, "model": grading.judge_model},
    }


#: stores one row (an item read, or a problem reading it) in an open transaction, its
#: audit events collected in the batch
_RowWriter = Callable[[Session, Any, ImportReport, AuditBatch], None]


class RegisteredGroundTruths(dict[str, str]):
    """Problems' ground truths read from the registered scenarios of their ids, for an
    SREGym import that has no problems file: its rows give no ground truth of their own,
    so an attempt imported before is not compared on its ground truth (the scenario's
    may have been edited since; the attempt keeps the one it was imported with)."""


class _Met(dict[str, dict[str, int]]):
    """The attempts without an attempt number an SREGym import met, by file (its path
    from the run folder on): each one's submission id and its line there."""


class _Importer(NamedTuple):
    """Who an import's audit events name: ``actor``, and the import job driving it."""

    actor: str
    job_id: str | None


def _refused_by_database(exc: BaseException) -> bool:
    """A fault of the row's values (the database or a serializer refused them), not of the
    database's reach (:func:`database_fault` stops the job, to be run again)."""
    if database_fault(exc):
        return False
    return isinstance(exc, StatementError | ValueError | OverflowError | TypeError | RecursionError)


def _write_all(
    session: Session,
    db: Database,
    write: _RowWriter,
    items: Iterable[Any],
    report: ImportReport,
    *,
    all_or_nothing: bool = False,
) -> None:
    """Every item through ``write`` in ``session``'s transaction, then their audit events
    in order (after every row: the lock order of ``storage.database``);
    ``all_or_nothing``: ImportAborted (the transaction rolled back) when any of them is a
    problem or in conflict (a line left out either way: strict imports all or nothing)."""
    audits = AuditBatch()
    for item in items:
        write(session, item, report, audits)
    if all_or_nothing and (report.problems or report.conflicts):
        raise ImportAborted(report.problems, conflicts=report.conflicts)
    if audits.events:
        db.audit_many(session, audits.events, audits.covers, audits.rows)


def _try_all(
    session: Session, db: Database, write: _RowWriter, items: Iterable[Any], report: ImportReport
) -> None:
    """As :func:`_write_all`, then undone (its savepoint rolled back): what writing
    ``items`` reports, or the error the database raises, with nothing kept."""
    savepoint = session.begin_nested()
    try:
        _write_all(session, db, write, items, report)
    finally:
        savepoint.rollback()


def _where(item: Any) -> str:
    if isinstance(item, JsonlLine):
        return f"line {item.line}"
    return str(getattr(item, "source", getattr(item, "where", "?")))


def _column_order(attempt: SregymAttempt) -> Callable[[str], tuple[int, str]]:
    """Columns in the order of the attempt's file, others after them by name."""
    order = {column: n for n, column in enumerate(attempt.columns)}
    return lambda column: (order.get(column, len(order)), column)


def _line_difference(known: SubmissionRecord, new: SubmissionRecord, *, dated: bool) -> str | None:
    """The first field in which ``new`` differs from ``known`` (the same attempt), or None
    when every stored value is equal (a time written in another offset is the same
    instant: the line was imported already). ``dated``: both lines give their
    ``created_at``; one a line does not give (its import's clock filled it in) differs
    from nothing, whichever of the two lines was imported first."""
    if known.diagnosis != new.diagnosis:
        return "diagnosis"
    if known.metadata_ != new.metadata_:
        return "metadata"
    if known.trace != new.trace:
        return "trace"
    if dated and _instant(known.created_at) != _instant(new.created_at):
        return "created_at"
    return None


def _cell_difference(
    original: SregymOriginalRowRecord, attempt: SregymAttempt, *, skip: Collection[str] = ()
) -> str | None:
    """The first column (in the order of the attempt's file) in which ``attempt``'s cells
    differ from the kept row ``original``'s, the columns ``skip`` aside, or None when they
    are the same. Compared redacted, as the attempt's cells are (a row kept by a version that did
    not redact them all too); a column of another file's header that the row has no cell
    in is empty: SREGym writes each file's header over every row written so far."""
    kept = kept_cells(original.cells)
    for column in sorted(set(kept) | set(attempt.cells), key=_column_order(attempt)):
        if column not in skip and (kept.get(column) or "") != (attempt.cells.get(column) or ""):
            return column
    return None


def _kept_difference(
    session: Session,
    original: SregymOriginalRowRecord,
    attempt: SregymAttempt,
    *,
    skip: Collection[str] = (),
) -> str | None:
    """As :func:`_cell_difference`, the :data:`VERDICT_COLUMNS` aside where an export
    writes them from another grading than SREGym's own (:func:`verdict_rewritten`): the
    row is then the service's export of the attempt, its verdict as shown there."""
    differs = _cell_difference(original, attempt, skip=skip)
    if differs in VERDICT_COLUMNS and verdict_rewritten(session, original.submission_id):
        return _cell_difference(original, attempt, skip={*skip, *VERDICT_COLUMNS})
    return differs


def _line_and_problem_key(attempt: SregymAttempt) -> str:
    """The idempotency key of a row without an attempt number whose line's key
    (``sregym_key``) another problem's attempt holds: its file, line and problem."""
    return sregym_key(f"{attempt.path}:{attempt.line}/{attempt.problem_id}")


def _line_and_cells_key(attempt: SregymAttempt) -> str:
    """The idempotency key of a row without an attempt number whose line's key another
    attempt of its problem holds, one whose cells besides the verdict's are other
    (:meth:`ImportQueries._another_row`), and no moved row of it: its file, line and the
    digest of its cells (another attempt the row's line once held)."""
    cells = sha256_hex(canonical_json(attempt.cells))
    return sregym_key(f"{attempt.path}:{attempt.line}#{cells}")


def _graded_attempt(
    attempt: SregymAttempt,
    diagnosis: str,
    scenario_id: str | None,
    agent: str | None,
    metadata: Mapping[str, Any] | None,
) -> bool:
    """Is the submission of the grading an attempt's row names (its ``diagnosis``,
    ``scenario_id``, ``agent`` and ``metadata`` as stored) this attempt? Its problem is
    the row's, where the submission names one (its scenario, or the ``problem_id`` the
    drop-in puts in its metadata); its agent is the row's folder's, where the drop-in
    was given one; and its diagnosis is the row's, compared as stored
    (:func:`_same_diagnosis`). The row has no model to compare."""
    problem = (metadata or {}).get("problem_id")
    for named in (scenario_id, problem if isinstance(problem, str) else None):
        if named and named != attempt.problem_id:
            return False
    if agent and attempt.agent and agent != attempt.agent:
        return False
    return _same_diagnosis(diagnosis, sregym_diagnosis(attempt))


def _same_diagnosis(stored: str, row: str) -> bool:
    """Is ``row`` (an attempt's diagnosis, screened as intake screens a submitted one:
    ``sregym_diagnosis``) the ``stored`` one, surrounding blanks aside (the reader strips
    them from a cell)? A credential intake redacted because the submission's trace named
    it is in the row in clear (SREGym's CSV keeps no trace): each ``[REDACTED:kind]`` of
    the stored text stands for whatever text the row has in its place."""
    stored, row = stored.strip(), row.strip()
    if stored == row:
        return True
    parts = REDACTION_MARKER.split(stored)[::2]  # the text between the markers
    if len(parts) == 1:
        return False
    return re.fullmatch(".+?".join(map(re.escape, parts)), row, flags=re.DOTALL) is not None


def _same_file(kept: str, path: str) -> bool:
    """Is ``kept`` (a kept row's path) the file at ``path`` (from the run folder on): the
    same path, or that path under a top folder (kept by a version that kept the path from
    the archive's root)?"""
    return kept == path or kept.endswith(f"/{path}")


def _instant(when: datetime) -> datetime:
    """``when`` as an aware time (SQLite hands back naive UTC)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class ImportQueries:
    """Writing imported submissions and gradings."""

    def __init__(self, db: Database, catalog: CatalogRepository) -> None:
        """Work through ``db``; ``catalog`` keeps the rubric versions imports use."""
        self._db = db
        self._catalog = catalog

    def _known(self, session: Session, submitter: str, key: str) -> SubmissionRecord | None:
        """The submission ``submitter`` already imported under ``key``, or None."""
        query = select(SubmissionRecord).where(
            col(SubmissionRecord.submitted_by) == submitter,
            col(SubmissionRecord.idempotency_key) == key,
        )
        return session.execute(query).scalar()

    @staticmethod
    def _graded_here(session: Session, attempt: SregymAttempt) -> str | None:
        """The grading of this database that the attempt's row names (the client's SREGym
        drop-in wrote it) when it is this attempt's (:func:`_graded_attempt`), or None:
        an attempt graded here, which importing would store twice. A grading of another
        server is not found, and one of another attempt is not the attempt's (the
        reasoning cell is a judge's free text, which a diagnosis can make name any
        grading): its row is imported as any other."""
        if attempt.named_grading is None:
            return None
        s = SubmissionRecord
        query = (
            select(col(s.diagnosis), col(s.scenario_id), col(s.agent), col(s.metadata_))
            .join(GradingRecord, col(GradingRecord.submission_id) == col(s.id))
            .where(col(GradingRecord.id) == attempt.named_grading)
        )
        graded = session.execute(query).one_or_none()
        if graded is None or not _graded_attempt(attempt, *graded):
            return None
        return attempt.named_grading

    def _same_attempt(self, session: Session, new: SubmissionRecord) -> SubmissionRecord | None:
        """An imported JSONL submission of the same attempt as ``new`` (run, agent, model,
        scenario or ground truth, attempt); None when ``new`` names no run or attempt.

        Looked up under the attempt's named lock, held until the transaction ends, so two
        imports of the same attempt (two jobs or processes) check and store it one after
        the other: the second sees the first's row and reports its own as a conflict."""
        if new.run_id is None or new.attempt is None:
            return None
        truth = new.ground_truth_sha256 if new.scenario_id is None else None
        attempt = [new.submitted_by, new.run_id, new.agent, new.model, new.scenario_id, truth]
        hold_named_lock(session, "imported_attempt", canonical_json([*attempt, new.attempt]))
        s = SubmissionRecord
        query = select(s).where(
            col(s.submitted_by) == new.submitted_by,
            col(s.run_id) == new.run_id,
            col(s.attempt) == new.attempt,
            col(s.agent).is_(None) if new.agent is None else col(s.agent) == new.agent,
            col(s.model).is_(None) if new.model is None else col(s.model) == new.model,
        )
        if new.scenario_id is not None:
            query = query.where(col(s.scenario_id) == new.scenario_id)
        else:
            query = query.where(
                col(s.scenario_id).is_(None),
                col(s.ground_truth_sha256) == new.ground_truth_sha256,
            )
        return session.execute(query.limit(1)).scalar()

    def _attempt_difference(
        self,
        session: Session,
        known: SubmissionRecord,
        new: SubmissionRecord,
        attempt: SregymAttempt,
        *,
        truth_given: bool,
    ) -> str | None:
        """The first column in which ``attempt`` differs from the one stored as ``known``
        (the same run, agent, problem and attempt), or None when it is the same.
        ``truth_given``: a problems file gives the attempt's ground truth, which differs
        when it is not the stored one; else (:class:`RegisteredGroundTruths`) the import
        gives none, and only the row's cells are compared (:func:`_kept_difference`: the
        verdict columns an export rewrote aside)."""
        if known.diagnosis != new.diagnosis:
            return DIAGNOSIS_COLUMN
        if truth_given and known.ground_truth_sha256 != new.ground_truth_sha256:
            return "problem_id"  # the problem's ground truth is another
        o = SregymOriginalRowRecord
        query = select(o).where(col(o.submission_id) == known.id)
        first = query.order_by(bytewise(col(o.path)), col(o.line)).limit(1)
        original = session.execute(first).scalar()
        if original is None:
            return None
        return _kept_difference(session, original, attempt, skip=("problem_id",))

    @staticmethod
    def _another_row(session: Session, known: SubmissionRecord, attempt: SregymAttempt) -> bool:
        """Is ``attempt`` (a row without an attempt number on the line ``known`` was
        imported at, differing from it) another row than ``known``'s: one whose cells
        differ from its kept row's (the one in the row's file, else its first) in a column
        besides those of the judge's result (``Diagnosis.*`` but the agent's diagnosis and
        trace, ``AGENT_COLUMNS``: the :data:`VERDICT_COLUMNS` and what a drop-in oracle
        adds, an ``error`` or the ``scenario_version`` judged against)? The same cells with
        another judge's result are ``known``'s row with SREGym's judge run again."""
        o = SregymOriginalRowRecord
        query = select(o).where(col(o.submission_id) == known.id)
        kept = list(session.execute(query.order_by(bytewise(col(o.path)), col(o.line))).scalars())
        in_file = [row for row in kept if _same_file(row.path, attempt.path)]
        if not (in_file or kept):
            return False
        row = (in_file or kept)[0]
        judged = {  # what the judge wrote (SREGym's keys, a drop-in oracle's own too)
            c
            for c in {*kept_cells(row.cells), *attempt.cells}
            if c.startswith(_JUDGED) and c not in AGENT_COLUMNS
        }
        return _cell_difference(row, attempt, skip={"problem_id", *judged}) is not None

    @staticmethod
    def _moved(
        session: Session, attempt: SregymAttempt, met: Mapping[str, int]
    ) -> SubmissionRecord | None:
        """The imported attempt without an attempt number that ``attempt`` (a row without
        one, whose key finds nothing or an attempt it differs from: another row imported
        at its line) is, moved in its file: up by an export that left a row before it out
        (a refused row, a stale copy in conflict, a filter), or down where a filtered
        export was imported before the whole file. The one with a kept row in the same
        file (:func:`_same_file`) whose every cell is the row's (:func:`_kept_difference`),
        at the nearest line (a later one first); ``met``: the attempts this import met in
        the file, each at its line, where no other row of the file is (an attempt is one
        row of a file: a row repeating the cells of one met on another line is another
        attempt). None: a new attempt."""
        if attempt.attempt is not None:
            return None
        o, s = SregymOriginalRowRecord, SubmissionRecord
        query = (
            select(o, s)
            .join(s, col(s.id) == col(o.submission_id))
            .where(
                col(s.submitted_by) == SREGYM_SUBMITTER,
                col(s.scenario_id) == attempt.problem_id,
                col(s.run_id).is_(None) if not attempt.run else col(s.run_id) == attempt.run,
                col(s.attempt).is_(None),
                or_(
                    col(o.path) == attempt.path,
                    col(o.path).endswith(f"/{attempt.path}", autoescape=True),
                ),
            )
            .order_by(col(o.line), col(o.submission_id))
        )

        def distance(row: tuple[SregymOriginalRowRecord, SubmissionRecord]) -> tuple[int, bool]:
            return abs(row[0].line - attempt.line), row[0].line < attempt.line

        for original, submission in sorted(session.execute(query).tuples(), key=distance):
            if met.get(submission.id, attempt.line) != attempt.line:
                continue  # the row of another line of this file
            if _kept_difference(session, original, attempt) is None:  # the path is the file's
                return submission
        return None

    def _keep_original(
        self, session: Session, submission_id: str, attempt: SregymAttempt, *, known: bool = False
    ) -> None:
        """The attempt's CSV row, every cell, once per file (an attempt SREGym wrote in
        several files has one for each; a re-import fills in a file it has none in).

        The file's path starts at the run folder, whatever folders the results were packed
        under. ``known``: the attempt was imported before, perhaps by a version that kept
        the path from the archive's root; a row of it kept in the same file (its path, or
        one ending with it: the same file under a top folder) stands for it at whatever
        line, and keeps its path and the higher of the two lines. An export that leaves
        a row out of a file (a stale copy in conflict, a refused row, a filter) moves the
        rows after it up a line, never down; imported again, they are the rows kept, not
        new ones, and the highest line seen is the fullest file's, so the export gives
        each file once, each attempt once in it, in the file's order."""
        if known:
            o = SregymOriginalRowRecord
            query = select(col(o.path), col(o.line)).where(col(o.submission_id) == submission_id)
            kept = [(p, n) for p, n in session.execute(query) if _same_file(p, attempt.path)]
            if kept:
                path, line = max(kept, key=lambda row: row[1])
                if attempt.line > line:
                    moved = update(o).where(
                        col(o.submission_id) == submission_id,
                        col(o.path) == path,
                        col(o.line) == line,
                    )
                    session.execute(moved.values(line=attempt.line))
                return
        table = SregymOriginalRowRecord.__table__  # type: ignore[attr-defined]
        values = {
            "submission_id": submission_id,
            "path": attempt.path,
            "line": attempt.line,
            "columns": list(attempt.columns),
            "cells": dict(attempt.cells),
        }
        self._db.insert_ignore(session, table, values)

    def _ensure_scenario(
        self, session: Session, scenario_id: str, truth: str, by: _Importer, audits: AuditBatch
    ) -> int | None:
        """Register the problem as a scenario unless it exists (its audit event, by
        ``by.actor``, collected in ``audits``); the version whose ground truth is
        ``truth`` (None when the scenario never had it)."""
        spec = ScenarioSpec(scenario_id, truth, tags=("sregym",))
        scenarios = self._catalog.scenarios
        version = scenarios.ensure(session, spec, actor=by.actor, into=audits)
        return version or None

    def _audit_import(
        self,
        session: Session,
        s: SubmissionRecord,
        by: _Importer,
        audits: AuditBatch,
        **extra: Any,
    ) -> None:
        """``submission.imported`` by whoever imports (``by``), naming the import job
        that drives the import, if one does."""
        grading_id = extra.get("grading_id")
        if by.job_id is not None:
            extra["import_job_id"] = by.job_id
        payload = {
            "submission_id": s.id,
            "agent": s.agent,
            "run_id": s.run_id,
            "attempt": s.attempt,
            "scenario_id": s.scenario_id,
            "diagnosis_sha256": sha256_hex(s.diagnosis),
            "ground_truth_sha256": sha256_hex(s.ground_truth),
            "idempotency_key": s.idempotency_key,
            **extra,
        }
        self._db.audit(
            session,
            "submission.imported",
            entity_type="submission",
            entity_id=s.id,
            actor=by.actor,
            payload=payload,
            covers=[grading_id] if grading_id else (),
            rows=[s],
            into=audits,
        )

    async def sregym(
        self,
        attempts: Iterable[SregymAttempt | ImportProblem],
        problems: Mapping[str, str],
        *,
        rubric: Rubric,
        actor: str = SREGYM_SUBMITTER,
        job_id: str | None = None,
        progress: ImportProgress | None = None,
        refuse_ground_truth: str | None = None,
    ) -> ImportReport:
        """Store attempts with SREGym's verdicts; attempts of unknown problems are problems.

        An attempt whose row names a grading of this database (written by the client's
        SREGym drop-in) of this very attempt (its diagnosis, problem and agent) stores
        nothing: it is counted ``graded_here`` (its other copies already imported),
        whatever the problems file says of its problem. A row that names a grading of
        another attempt is imported as any other.

        The submissions are ``submitted_by`` ``import:sregym``; their audit events (and
        those of the scenarios registered) name ``actor``, who imports, and ``job_id``,
        the import job that drives the import, if one does.

        ``problems`` are the problems file's ground truths, or the registered scenarios'
        (:class:`RegisteredGroundTruths`: an attempt imported before then differs only
        in its row's cells, whatever version its scenario is at now).

        Each problem is registered as the scenario of its id unless one exists;
        ``refuse_ground_truth``: why an attempt whose problem ``problems`` gives a ground
        truth no version of that scenario had is refused naming ``ground_truth``
        (``SRE_JUDGE_INLINE_GROUND_TRUTH``), None: taken. Each attempt's CSV rows are kept
        whole (``sregym_original_row``) for the export; ``progress`` after each batch.
        """

        by, met = _Importer(actor, job_id), _Met()

        def write(session: Session, item: Any, report: ImportReport, audits: AuditBatch) -> None:
            report.rows += 1
            if isinstance(item, ImportProblem):
                report.problems.append(item)
            elif (here := self._graded_here(session, item)) is not None:
                report.count_graded_here(here)  # nothing new to store
            elif item.problem_id not in problems:
                message = f"problem {item.problem_id!r} is not in the problems file"
                report.problems.append(ImportProblem(item.source, message, field="problem_id"))
            else:
                self._import_attempt(
                    session, item, problems, rubric, by, report, audits, refuse_ground_truth, met
                )

        report = ImportReport()
        async for batch in read_batches(attempts):
            await self._write_batch(batch, write, report)
            if progress is not None:
                await progress(report)
        return report

    async def _write_batch(self, batch: list[Any], write: _RowWriter, report: ImportReport) -> None:
        """The batch in one transaction; if the database refuses it, each row in its own."""
        mark = report.mark()
        try:
            await self._db.run(_write_all, self._db, write, batch, report)
        except Exception as exc:
            if not _refused_by_database(exc):
                raise
            report.rewind(mark)
            for item in batch:
                await self._write_row(item, write, report)

    async def _write_strict(
        self, batch: list[Any], write: _RowWriter, report: ImportReport
    ) -> None:
        """The batch in one transaction, ImportAborted (nothing kept) if any row is a
        problem. Refused by the database, it is written once more: another import may
        have stored some of its rows since they were looked up (already imported now).
        Refused again, each row is tried alone and undone, and ImportAborted names the
        rows the database refuses."""
        mark, refusal = report.mark(), None
        for _ in range(2):
            try:
                await self._db.run(_write_all, self._db, write, batch, report, all_or_nothing=True)
                return
            except Exception as exc:
                if not _refused_by_database(exc):
                    raise
                report.rewind(mark)
                refusal = exc
        assert refusal is not None
        tried = ImportReport()
        for item in batch:
            await self._write_row(item, write, tried, keep=False)
        if not tried.problems:  # no row refused alone: the database's error stands
            raise refusal
        raise ImportAborted(tried.problems, conflicts=tried.conflicts) from refusal

    async def _write_row(
        self, item: Any, write: _RowWriter, report: ImportReport, *, keep: bool = True
    ) -> None:
        """``item`` in a transaction of its own, a problem naming it if the database
        refuses it; ``keep=False``: undone either way (what writing it reports)."""
        mark = report.mark()
        try:
            await self._db.run(_write_all if keep else _try_all, self._db, write, [item], report)
        except Exception as exc:
            if not _refused_by_database(exc):
                raise
            report.rewind(mark)
            report.rows += 1
            cause = getattr(exc, "orig", None) or exc
            message = f"the database refused the row: {type(cause).__name__}: {str(cause)[:200]}"
            report.problems.append(ImportProblem(_where(item), message))

    def _imported_as(
        self,
        session: Session,
        attempt: SregymAttempt,
        submission: SubmissionRecord,
        in_file: Mapping[str, int],
        truth_given: bool,
    ) -> tuple[SubmissionRecord | None, str | None]:
        """The stored attempt ``attempt`` (to be stored as ``submission``) repeats, and the
        first column it differs in (:meth:`_attempt_difference`); (None, None): a new
        attempt. Found by its key (or the key an earlier version stored it under); a row
        without an attempt number whose line's key another problem's attempt holds is not
        that attempt, and is keyed by its line and problem (``submission`` so rekeyed);
        one whose key finds nothing or an attempt it differs from is looked for where its
        line moved (:meth:`_moved`, ``in_file`` the attempts this import met in its file),
        and found in none, is another attempt the line held in another copy of the file
        if its diagnosis or any cell besides the verdict's is another
        (:meth:`_another_row`), keyed by its line and cells (:func:`_line_and_cells_key`,
        ``submission`` so rekeyed); the same cells with another verdict are that attempt,
        in conflict."""
        submitter = submission.submitted_by
        assert submission.idempotency_key is not None
        known = self._known(session, submitter, submission.idempotency_key)
        if known is None and (earlier := sregym_earlier_key(attempt)) is not None:
            known = self._known(session, submitter, earlier)  # stored by an earlier version
        if known is not None and known.scenario_id != submission.scenario_id:
            # a line another problem's attempt was imported at (a filtered export, then
            # the whole file)
            submission.idempotency_key = _line_and_problem_key(attempt)
            known = self._known(session, submitter, submission.idempotency_key)

        def difference(stored: SubmissionRecord) -> str | None:
            return self._attempt_difference(
                session, stored, submission, attempt, truth_given=truth_given
            )

        differs = None if known is None else difference(known)
        if known is None or differs is not None:
            moved = self._moved(session, attempt, in_file)
            if moved is not None:
                return moved, difference(moved)
        if (
            known is not None
            and differs is not None
            and attempt.attempt is None
            and (differs == DIAGNOSIS_COLUMN or self._another_row(session, known, attempt))
        ):
            # a line another attempt of the problem was imported at (a filtered export,
            # then the whole file); the same cells with another verdict (SREGym's judge
            # run again) are that attempt: a conflict
            submission.idempotency_key = _line_and_cells_key(attempt)
            known = self._known(session, submitter, submission.idempotency_key)
            differs = None if known is None else difference(known)
        return known, differs

    def _import_attempt(
        self,
        session: Session,
        attempt: SregymAttempt,
        problems: Mapping[str, str],
        rubric: Rubric,
        by: _Importer,
        report: ImportReport,
        audits: AuditBatch,
        refuse_ground_truth: str | None,
        met: _Met,
    ) -> None:
        """Store ``attempt`` with SREGym's verdict, or count it already imported, or report
        it as a conflict with the attempt it repeats; ``met``: the attempts without an
        attempt number this import met, by file (:meth:`_moved`), this one added."""
        truth, now, submitter = problems[attempt.problem_id], self._db.clock(), SREGYM_SUBMITTER
        version = self._ensure_scenario(session, attempt.problem_id, truth, by, audits)
        if version is None and refuse_ground_truth is not None:
            message = (
                f"ground_truth: the problems file gives problem {attempt.problem_id!r} a "
                f"ground truth its registered scenario never had; {refuse_ground_truth}"
            )
            report.problems.append(ImportProblem(attempt.source, message, field="ground_truth"))
            return
        submission = sregym_submission(
            attempt, truth, scenario_id=attempt.problem_id, actor=submitter, at=now
        )
        submission.scenario_version = version
        in_file = met.setdefault(attempt.path, {}) if attempt.attempt is None else {}
        truth_given = not isinstance(problems, RegisteredGroundTruths)
        known, differs = self._imported_as(session, attempt, submission, in_file, truth_given)
        if known is not None:
            if differs is not None:
                message = (
                    f"{differs}: differs from the attempt with the same run, agent, problem "
                    f"and attempt imported before (submission {known.id}), which is kept"
                )
                report.conflicts.append(ImportProblem(attempt.source, message, field=differs))
                return
            self._keep_original(session, known.id, attempt, known=True)
            in_file[known.id] = attempt.line
            report.already_imported += 1
            return
        session.add(submission)
        session.flush()
        self._keep_original(session, submission.id, attempt)
        in_file[submission.id] = attempt.line
        grading_id, decided = None, {}
        if attempt.outcome == "diagnosed":
            grading, answers = sregym_grading(
                attempt, submission.id, rubric=rubric, at=now, screening=submission.screening
            )
            grading.scenario_version = version
            session.add(grading)
            session.flush()
            session.add_all(answers)
            grading_id, decided = grading.id, _imported_verdict(grading)
            report.sregym_verdicts += 1
        else:
            report.not_graded[attempt.outcome] = report.not_graded.get(attempt.outcome, 0) + 1
        report.submissions += 1
        session.flush()
        self._audit_import(
            session,
            submission,
            by,
            audits,
            source="sregym",
            outcome=attempt.outcome,
            grading_id=grading_id,
            **decided,
        )

    async def jsonl(
        self,
        lines: Iterable[JsonlLine | ImportProblem],
        *,
        rubric: Rubric,
        judge: tuple[str, str, str],
        actor: str = JSONL_SUBMITTER,
        job_id: str | None = None,
        strict: bool = False,
        progress: ImportProgress | None = None,
        refuse_own_family: bool = False,
        refuse_ground_truth: str | None = None,
    ) -> ImportReport:
        """Store historic submissions, each with a pending grading by ``rubric`` and ``judge``.

        The submissions are ``submitted_by`` ``import:jsonl``; their audit events (and the
        rubric version's, when new) name ``actor``, who imports, and ``job_id``, the
        import job that drives the import, if one does.

        ``refuse_own_family``: a line whose model is of the judge's own family is refused
        naming ``model``, as a submission is (``SRE_JUDGE_SELF_PREFERENCE=refuse``).
        ``refuse_ground_truth``: why a line carrying its own ``ground_truth`` is refused
        (``SRE_JUDGE_INLINE_GROUND_TRUTH``), naming ``ground_truth``; None: it is taken.

        ``judge`` is ``(spec, backend, model)``. With ``strict``, any problem (a line the
        database refuses too) raises ImportAborted and nothing is stored (one transaction
        for the whole file).
        ``progress`` is awaited after each committed batch.
        """

        def write(session: Session, item: Any, report: ImportReport, audits: AuditBatch) -> None:
            report.rows += 1
            if isinstance(item, ImportProblem):
                report.problems.append(item)
                return
            if refuse_ground_truth is not None and item.submission.ground_truth is not None:
                message = f"ground_truth: {refuse_ground_truth}"
                where = f"line {item.line}"
                report.problems.append(ImportProblem(where, message, field="ground_truth"))
                return
            family = shared_family(judge[0], item.submission.model) if refuse_own_family else None
            if family is not None:
                message = (
                    f"model: {item.submission.model!r} and the judge are both of the {family} "
                    "family (SRE_JUDGE_SELF_PREFERENCE=refuse)"
                )
                report.problems.append(ImportProblem(f"line {item.line}", message, field="model"))
                return
            self._import_line(session, item, rubric, judge, by, report, audits)

        by = _Importer(actor, job_id)
        report = ImportReport()
        # all or nothing: one batch of every line, then one transaction
        async for batch in read_batches(lines, size=sys.maxsize if strict else BATCH):
            if strict:
                await self._write_strict(batch, write, report)
            else:
                await self._write_batch(batch, write, report)
            if report.submissions:
                await self._catalog.save_rubric(rubric, actor=actor)
            if progress is not None:
                await progress(report)
        return report

    def _import_line(
        self,
        session: Session,
        line: JsonlLine,
        rubric: Rubric,
        judge: tuple[str, str, str],
        by: _Importer,
        report: ImportReport,
        audits: AuditBatch,
    ) -> None:
        item, now, submitter = line.submission, self._db.clock(), JSONL_SUBMITTER
        truth, version = item.ground_truth, None
        if item.scenario_id is not None:
            scenario = session.get(ScenarioRecord, item.scenario_id)
            if scenario is None:
                where = f"line {line.line}"
                message = f"scenario_id: no scenario {item.scenario_id!r}"
                report.problems.append(ImportProblem(where, message, field="scenario_id"))
                return
            truth, version = scenario.ground_truth, scenario.version
        # a line's identity is its content; a line without a trace hashes as lines did
        # before they could carry one, so importing an old file again changes nothing
        fields = item.model_dump(mode="json", exclude={"trace"} if item.trace is None else None)
        content = sha256_hex(canonical_json(fields))
        key = f"{JSONL_KEY}{content}"
        if self._known(session, submitter, key) is not None:
            report.already_imported += 1
            return
        submission = jsonl_submission(line, truth or "", actor=submitter, content=content, now=now)
        same = self._same_attempt(session, submission)
        if same is not None:
            # times compare when both lines gave one: the stored row tells whether its
            # import dated it; one stored before it told gave none when its content is
            # this line's without a time
            undated = sha256_hex(canonical_json({**fields, "created_at": None}))
            stored_dated = not jsonl_time_filled_in(same) and same.request_hash != undated
            dated = item.created_at is not None and stored_dated
            differs = _line_difference(same, submission, dated=dated)
            if differs is None:
                report.already_imported += 1
                return
            message = (
                f"{differs}: differs from the line with the same run_id, agent, model, problem "
                f"and attempt imported before (submission {same.id}), which is kept"
            )
            report.conflicts.append(ImportProblem(f"line {line.line}", message, field=differs))
            return
        submission.scenario_version = version
        session.add(submission)
        session.flush()
        spec, backend, model = judge
        grading = GradingRecord(
            id=new_id(),
            submission_id=submission.id,
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            judge_spec=spec,
            judge_backend=backend,
            judge_model=model,
            status="pending",
            created_at=now,
            scenario_version=version,
        )
        session.add(grading)
        session.flush()
        report.submissions += 1
        report.queued += 1
        self._audit_import(
            session, submission, by, audits, source="jsonl", line=line.line, grading_id=grading.id
        )
