"""Storing imports: SREGym attempts with their verdicts, historic JSONL submissions.

Imports are idempotent: each submission carries an idempotency key derived from where
it came from (SREGym: run, agent, problem, attempt; JSONL: the line's content), so
importing the same input again stores nothing twice. Rows are written in batches,
one transaction each, every submission audited as ``submission.imported``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from judge.rubric import Rubric
from storage.canonical import canonical_json, sha256_hex
from storage.catalog import CatalogRepository
from storage.database import Database
from storage.imports.jsonl import JsonlLine
from storage.imports.problems import ImportProblem
from storage.imports.report import ImportAborted, ImportProgress, ImportReport, batches
from storage.imports.rows import jsonl_submission, sregym_grading, sregym_submission
from storage.imports.sregym import SregymAttempt
from storage.imports.tables import SregymOriginalRowRecord
from storage.scenarios import ScenarioSpec
from storage.tables import GradingRecord, ScenarioRecord, SubmissionRecord, new_id

__all__ = ["ImportAborted", "ImportProgress", "ImportReport", "ImportRepository"]


class ImportRepository:
    """Writing imported submissions and gradings."""

    def __init__(self, db: Database, catalog: CatalogRepository) -> None:
        """Work through ``db``; ``catalog`` keeps the rubric versions imports use."""
        self._db = db
        self._catalog = catalog

    async def _known(self, session: AsyncSession, actor: str, key: str) -> str | None:
        """The id of the submission already imported under ``key``, or None."""
        query = select(col(SubmissionRecord.id)).where(
            col(SubmissionRecord.submitted_by) == actor,
            col(SubmissionRecord.idempotency_key) == key,
        )
        return (await session.execute(query)).scalar()

    async def _keep_original(
        self, session: AsyncSession, submission_id: str, attempt: SregymAttempt
    ) -> None:
        """The attempt's CSV row, every cell (kept once; a re-import fills in a missing one)."""
        table = SregymOriginalRowRecord.__table__  # type: ignore[attr-defined]
        values = {
            "submission_id": submission_id,
            "path": attempt.path,
            "line": attempt.line,
            "columns": list(attempt.columns),
            "cells": dict(attempt.cells),
        }
        await self._db.insert_ignore(session, table, values)

    async def _ensure_scenario(
        self, session: AsyncSession, scenario_id: str, truth: str
    ) -> int | None:
        """Register the problem as a scenario unless it exists; the version whose ground
        truth is ``truth`` (None when the scenario never had it)."""
        spec = ScenarioSpec(scenario_id, truth, tags=("sregym",))
        version = await self._catalog.scenarios.ensure(session, spec, actor="import:sregym")
        return version or None

    async def _audit_import(self, session: AsyncSession, s: SubmissionRecord, **extra: Any) -> None:
        grading_id = extra.get("grading_id")
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
        await self._db.audit(
            session,
            "submission.imported",
            entity_type="submission",
            entity_id=s.id,
            actor=s.submitted_by,
            payload=payload,
            covers=[grading_id] if grading_id else (),
            rows=[s],
        )

    async def sregym(
        self,
        attempts: Iterable[SregymAttempt | ImportProblem],
        problems: Mapping[str, str],
        *,
        rubric: Rubric,
        actor: str = "import:sregym",
        progress: ImportProgress | None = None,
    ) -> ImportReport:
        """Store attempts with SREGym's verdicts; attempts of unknown problems are problems.

        Each attempt's CSV row is kept whole (``sregym_original_row``) for the SREGym
        export. ``progress`` is awaited after each committed batch.
        """
        report = ImportReport()
        for batch in batches(attempts):
            async with self._db.write() as session:
                for item in batch:
                    report.rows += 1
                    if isinstance(item, ImportProblem):
                        report.problems.append(item)
                    elif item.problem_id not in problems:
                        message = f"problem {item.problem_id!r} is not in the problems file"
                        report.problems.append(ImportProblem(item.source, message))
                    else:
                        await self._import_attempt(session, item, problems, rubric, actor, report)
            if progress is not None:
                await progress(report)
        return report

    async def _import_attempt(
        self,
        session: AsyncSession,
        attempt: SregymAttempt,
        problems: Mapping[str, str],
        rubric: Rubric,
        actor: str,
        report: ImportReport,
    ) -> None:
        truth, now = problems[attempt.problem_id], self._db.clock()
        version = await self._ensure_scenario(session, attempt.problem_id, truth)
        submission = sregym_submission(
            attempt, truth, scenario_id=attempt.problem_id, actor=actor, at=now
        )
        submission.scenario_version = version
        assert submission.idempotency_key is not None
        known = await self._known(session, actor, submission.idempotency_key)
        if known is not None:
            await self._keep_original(session, known, attempt)
            report.already_imported += 1
            return
        session.add(submission)
        await session.flush()
        await self._keep_original(session, submission.id, attempt)
        grading_id = None
        if attempt.outcome == "diagnosed":
            grading, answers = sregym_grading(attempt, submission.id, rubric=rubric, at=now)
            grading.scenario_version = version
            session.add(grading)
            await session.flush()
            session.add_all(answers)
            grading_id = grading.id
            report.sregym_verdicts += 1
        else:
            report.not_graded[attempt.outcome] = report.not_graded.get(attempt.outcome, 0) + 1
        report.submissions += 1
        await session.flush()
        await self._audit_import(
            session, submission, source="sregym", outcome=attempt.outcome, grading_id=grading_id
        )

    async def jsonl(
        self,
        lines: Iterable[JsonlLine | ImportProblem],
        *,
        rubric: Rubric,
        judge: tuple[str, str, str],
        actor: str = "import:jsonl",
        strict: bool = False,
        progress: ImportProgress | None = None,
    ) -> ImportReport:
        """Store historic submissions, each with a pending grading by ``rubric`` and ``judge``.

        ``judge`` is ``(spec, backend, model)``. With ``strict``, any problem raises
        ImportAborted and nothing is stored (one transaction for the whole file).
        ``progress`` is awaited after each committed batch.
        """
        report = ImportReport()
        groups = [list(lines)] if strict else batches(lines)
        for batch in groups:
            async with self._db.write() as session:
                for item in batch:
                    report.rows += 1
                    if isinstance(item, ImportProblem):
                        report.problems.append(item)
                        continue
                    await self._import_line(session, item, rubric, judge, actor, report)
                if strict and report.problems:
                    raise ImportAborted(report.problems)
            if report.submissions:
                await self._catalog.save_rubric(rubric, actor=actor)
            if progress is not None:
                await progress(report)
        return report

    async def _import_line(
        self,
        session: AsyncSession,
        line: JsonlLine,
        rubric: Rubric,
        judge: tuple[str, str, str],
        actor: str,
        report: ImportReport,
    ) -> None:
        item, now = line.submission, self._db.clock()
        truth, version = item.ground_truth, None
        if item.scenario_id is not None:
            scenario = await session.get(ScenarioRecord, item.scenario_id)
            if scenario is None:
                where = f"line {line.line}"
                report.problems.append(
                    ImportProblem(where, f"scenario_id: no scenario {item.scenario_id!r}")
                )
                return
            truth, version = scenario.ground_truth, scenario.version
        content = sha256_hex(canonical_json(item.model_dump(mode="json")))
        key = f"jsonl:{content}"
        if await self._known(session, actor, key) is not None:
            report.already_imported += 1
            return
        submission = jsonl_submission(line, truth or "", actor=actor, content=content, now=now)
        submission.scenario_version = version
        session.add(submission)
        await session.flush()
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
        await session.flush()
        report.submissions += 1
        report.queued += 1
        await self._audit_import(
            session, submission, source="jsonl", line=line.line, grading_id=grading.id
        )
