"""Imports as background jobs: an uploaded SREGym archive or JSONL stream, with progress.

:func:`start_import` checks the upload (its kind, its rubric, every archive entry's
name and size) and stores it whole as a queued job, so nothing accepted is lost; the
:class:`ImportRunner` of a process with workers claims queued jobs one at a time and
runs the same importers as ``sre-judge import`` (:mod:`api.imports.use_cases`) on the
unpacked upload, recording rows done, the total, the rows refused and those in conflict
after every batch. A bad row is refused alone (its file, line and field); it never fails
the job.
A job stopped mid-way (shutdown, crash or a database fault that passes) is run again
from the top by the next process: imports are idempotent, so nothing is stored twice.
While the import runs, its heartbeat is beaten on a timer of its own, not only with its
progress: a strict import writes its whole file as one batch, which may take longer
than a process is given before its job is taken over.

An SREGym archive takes its ground truths from a problems file in it
(``problems.jsonl``, ``problems.yaml``), else from the registered scenarios whose id
is the problem id.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from api.imports.job_queries import ImportJobQueries
from api.imports.jsonl import count_jsonl_items
from api.imports.problems import ImportFileError, read_problems
from api.imports.queries import RegisteredGroundTruths
from api.imports.report import ImportAborted, ImportReport
from api.imports.sregym import sregym_outline
from api.imports.use_cases import import_jsonl_file, import_sregym_folder
from api.service.errors import InvalidRequest
from api.service.services import Services
from api.sregym_archive import (
    UnsafeArchive,
    check_archive,
    problems_file,
    unpack_archive,
)
from storage.imports import ImportJobRecord
from storage.storable import printable, unstorable

__all__ = [
    "IMPORT_MEDIA_TYPES",
    "MAX_ERRORS_KEPT",
    "ImportJobPublic",
    "ImportRowError",
    "ImportSuperseded",
    "import_job",
    "import_job_public",
    "run_import_job",
    "sniff_upload",
    "start_import",
]

#: media type of the upload -> (kind, archive)
IMPORT_MEDIA_TYPES: dict[str, tuple[str, str]] = {
    "application/gzip": ("sregym", "tar.gz"),
    "application/x-gzip": ("sregym", "tar.gz"),
    "application/x-tar": ("sregym", "tar.gz"),
    "application/x-gtar": ("sregym", "tar.gz"),
    "application/zip": ("sregym", "zip"),
    "application/x-zip-compressed": ("sregym", "zip"),
    "application/x-ndjson": ("jsonl", "jsonl"),
    "application/jsonl": ("jsonl", "jsonl"),
    # told apart by their first bytes (``sniff_upload``)
    "application/octet-stream": ("", ""),
}
OCTET = "application/octet-stream"
#: a tar's signature at byte 257: POSIX (``ustar`` NUL) or GNU (``ustar``, two spaces, NUL)
_TAR_MAGIC = (b"ustar\x00", b"ustar  \x00")
#: rows refused that a job keeps (the count in its report is complete)
MAX_ERRORS_KEPT = 1000

_T = TypeVar("_T")
log = logging.getLogger(__name__)


def sniff_upload(data: bytes) -> tuple[str, str]:
    """``(kind, archive)`` of an upload sent as ``application/octet-stream``: gzip, tar
    and zip by their signatures, anything else JSON lines (which may well hold the
    letters ``ustar`` at byte 257, as ``mustard`` does)."""
    if data[:2] == b"\x1f\x8b" or data[257:].startswith(_TAR_MAGIC):
        return "sregym", "tar.gz"
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "sregym", "zip"
    return "jsonl", "jsonl"


class ImportSuperseded(Exception):
    """The job was taken over by another process (this one was thought stopped)."""


async def start_import(
    services: Services,
    data: bytes,
    media_type: str,
    *,
    rubric: str | None,
    actor: str,
    strict: bool = False,
) -> ImportJobRecord:
    """Check the upload and store it as a queued job; ``InvalidRequest`` naming the field.

    ``strict`` (JSON lines only): any bad line fails the job and nothing is stored.
    """
    if media_type not in IMPORT_MEDIA_TYPES:
        raise InvalidRequest(f"{media_type!r} is not an accepted upload", field="Content-Type")
    if not data:
        raise InvalidRequest("the upload is empty", field="body")
    kind, archive = IMPORT_MEDIA_TYPES[media_type] if media_type != OCTET else sniff_upload(data)
    if strict and kind != "jsonl":
        raise InvalidRequest("strict: only for JSON lines, not an SREGym archive", field="strict")
    await services.rubrics.require(rubric, default=services.settings.rubric)
    if kind == "sregym":
        limit = services.settings.import_max_unpacked_bytes
        try:
            # off the event loop: walking a large archive takes a while
            await asyncio.to_thread(check_archive, data, archive, limit=limit)  # type: ignore[arg-type]
        except UnsafeArchive as exc:
            raise InvalidRequest(str(exc), field="body", title="Unusable archive") from None
    job = ImportJobRecord(
        kind=kind,
        archive=archive,
        rubric=rubric,
        strict=strict,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        created_by=actor,
    )
    stored = await ImportJobQueries(services.store.db).create(job, data)
    services.waiters.imports.set()
    return stored


def _errors(report: ImportReport) -> list[dict[str, str | None]]:
    """The rows refused and the rows in conflict (the first of each), told apart by kind."""
    listed = [("refused", p) for p in report.problems[:MAX_ERRORS_KEPT]]
    listed += [("conflict", p) for p in report.conflicts[:MAX_ERRORS_KEPT]]
    return [
        {
            "kind": kind,
            "where": _shown(p.where),
            "field": _shown(p.field),
            "message": _shown(p.message),
        }
        for kind, p in listed
    ]


def _shown(text: str | None) -> str | None:
    """``text`` as a job stores and shows it: a lone surrogate (a byte of a file's name
    that is not UTF-8) written as its escape, so every answer about the job can be sent."""
    return text if text is None or unstorable(text) is None else printable(text)


def _summary(report: ImportReport) -> dict[str, Any]:
    summary = report.as_dict()
    summary["problems"] = len(report.problems)
    summary["conflicts"] = len(report.conflicts)
    return summary


async def _scenario_problems(services: Services, ids: set[str]) -> RegisteredGroundTruths:
    """Ground truths of the registered scenarios named by the problem ids ``ids``, their
    current versions (an attempt imported before is not compared on them)."""
    found = RegisteredGroundTruths()
    for problem_id in sorted(ids):
        scenario = await services.store.catalog.get_scenario(problem_id)
        if scenario is not None:
            found[problem_id] = scenario.ground_truth
    return found


async def _import(
    services: Services, job: ImportJobRecord, data: bytes, folder: Path, worker: str
) -> ImportReport:
    async def progress(report: ImportReport) -> None:
        values = {"done": report.rows, "report": _summary(report), "errors": _errors(report)}
        if not await ImportJobQueries(services.store.db).progress(job.id, worker, **values):
            raise ImportSuperseded(job.id)

    if job.kind == "jsonl":
        file = folder / "upload.jsonl"
        file.write_bytes(data)
        total = await asyncio.to_thread(count_jsonl_items, file)
        await ImportJobQueries(services.store.db).progress(job.id, worker, total=total, done=0)
        return await import_jsonl_file(
            services,
            file,
            actor=job.created_by,  # the admin who uploaded it: the audit events name them
            job_id=job.id,
            rubric=job.rubric,
            strict=job.strict,
            progress=progress,
        )
    limit = services.settings.import_max_unpacked_bytes
    await asyncio.to_thread(unpack_archive, data, job.archive, folder, limit=limit)  # type: ignore[arg-type]
    outline = await asyncio.to_thread(sregym_outline, folder)  # one walk: total and ids
    found = problems_file(folder)
    if found:
        problems = await asyncio.to_thread(
            read_problems, found, max_bytes=services.settings.max_text_bytes
        )
    else:
        problems = await _scenario_problems(services, outline.problem_ids)
    total = outline.items
    await ImportJobQueries(services.store.db).progress(job.id, worker, total=total, done=0)
    return await import_sregym_folder(
        services,
        folder,
        problems,
        actor=job.created_by,
        job_id=job.id,
        rubric=job.rubric,
        progress=progress,
    )


async def _heartbeat(jobs: ImportJobQueries, job_id: str, worker: str, every: float) -> None:
    """Beat the heartbeat of ``job_id`` every ``every`` seconds; return once the job is no
    longer ``worker``'s. A beat that fails is logged and tried again at the next."""
    while True:
        await asyncio.sleep(every)
        try:
            if not await jobs.progress(job_id, worker):
                return
        except Exception:
            log.exception("the heartbeat of import job %s failed", job_id)


async def _beating(
    jobs: ImportJobQueries,
    job_id: str,
    worker: str,
    work: Coroutine[Any, Any, _T],
    *,
    every: float,
) -> _T:
    """What ``work`` returns, the job's heartbeat beaten every ``every`` seconds while it
    runs; ImportSuperseded, ``work`` cancelled, once a beat finds the job taken over."""
    run = asyncio.ensure_future(work)
    beat = asyncio.create_task(_heartbeat(jobs, job_id, worker, every))
    try:
        await asyncio.wait({run, beat}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        beat.cancel()
        run.cancel()  # nothing when it ended: only a run whose job was taken over, or a stop
        await asyncio.wait({run, beat})  # a transaction under way ends first
    if run.cancelled():
        raise ImportSuperseded(job_id)
    return run.result()


async def run_import_job(
    services: Services, job: ImportJobRecord, worker: str, *, beat_seconds: float
) -> None:
    """Run a claimed job to its end: ``done`` with its report, or ``failed`` with why.

    Its heartbeat is beaten every ``beat_seconds`` while it imports; ImportSuperseded when
    it was taken over meanwhile (the import stopped)."""
    jobs = ImportJobQueries(services.store.db)
    data = await jobs.upload(job.id)
    with tempfile.TemporaryDirectory(prefix="sre-judge-import-") as tmp:
        try:
            work = _import(services, job, data, Path(tmp), worker)
            report = await _beating(jobs, job.id, worker, work, every=beat_seconds)
        except (UnsafeArchive, ImportFileError, InvalidRequest) as exc:
            await jobs.finish(job.id, worker, state="failed", error=str(exc))
            return
        except ImportAborted as aborted:
            # nothing stored: the report counts every row refused and in conflict
            refused = ImportReport(problems=aborted.problems, conflicts=aborted.conflicts)
            error = f"strict: {aborted.count} problems; nothing imported"
            await jobs.finish(
                job.id,
                worker,
                state="failed",
                error=error,
                report=_summary(refused),
                errors=_errors(refused),
            )
            return
    values: dict[str, Any] = {
        "done": report.rows,
        "report": _summary(report),
        "errors": _errors(report),
    }
    await jobs.finish(job.id, worker, state="done", **values)


async def import_job(services: Services, job_id: str) -> ImportJobPublic:
    """An import job as ``GET /v1/imports/{id}`` shows it; NotFound when there is none."""
    return import_job_public(await ImportJobQueries(services.store.db).get(job_id))


class ImportRowError(BaseModel):
    """A row that was not imported: where (``file:line`` or ``line N``), the field to
    blame (a CSV column, a JSON field's path) when there is one, and why."""

    where: str
    field: str | None = None
    message: str


class ImportJobPublic(BaseModel):
    """An import job as the API shows it: state, progress, rows refused, summary."""

    id: str
    kind: str = Field(description="sregym (a results archive) or jsonl")
    archive: str = Field(description="tar.gz, zip or jsonl")
    state: str = Field(description="queued, running, done or failed")
    rubric: str | None
    strict: bool = Field(description="JSON lines all or nothing: a bad line fails the job")
    total: int | None = Field(description="rows in the upload; null until it has been read")
    done: int = Field(description="rows handled so far: stored, already imported or refused")
    report: dict[str, Any] = Field(description="the import's summary, as `sre-judge import`")
    errors: list[ImportRowError] = Field(description=f"rows refused (the first {MAX_ERRORS_KEPT})")
    conflicts: list[ImportRowError] = Field(
        default_factory=list,
        description="rows that repeat an imported attempt's key with other content, left out "
        f"(the first {MAX_ERRORS_KEPT})",
    )
    size: int
    sha256: str
    attempts: int = Field(description="times a process started it (more after a restart)")
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None = Field(
        description="why a failed job failed, or why a job queued again was stopped "
        "(a database fault: it is run again)"
    )


def import_job_public(job: ImportJobRecord) -> ImportJobPublic:
    """The API view of a job."""
    listed = job.errors or []
    fields = set(ImportJobPublic.model_fields) - {"conflicts"}
    values = {name: getattr(job, name) for name in fields}
    values["errors"] = [e for e in listed if e.get("kind", "refused") == "refused"]
    values["conflicts"] = [e for e in listed if e.get("kind") == "conflict"]
    return ImportJobPublic.model_validate(values)
