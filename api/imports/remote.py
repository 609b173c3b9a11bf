"""``sre-judge import ... --server URL``: upload to ``POST /v1/imports``, follow the job.

An SREGym results folder goes up as a tar.gz built in memory: its CSV files at their
paths under the folder (what the import reads, and the paths it remembers, so importing
the same folder locally and through a server stores nothing twice) and the ``--problems``
ground truths as ``problems.jsonl`` at the top (any ``problems.*`` of the folder's own
is left out: the flag wins, as in the database mode). A CSV file whose path the server
refuses as an archive's entry (:func:`api.sregym_archive.entry_path`: a backslash in
a name, say) is left out, and its rows are read here and refused as the database mode
refuses them, so they are not the whole upload's refusal (:class:`SregymUpload`). JSON
lines go up as they are.
Progress (rows done of the total) is printed on stderr while the job runs; the finished
job's summary is read back into an :class:`ImportReport`, with the numbers of rows
refused and in conflict it counted (it lists only the first), so the command prints
what the database mode prints.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.terminal import terminal_text
from judge.inputs import DEFAULT_MAX_TEXT_BYTES

if TYPE_CHECKING:
    from api.imports.problems import ImportProblem
    from api.imports.report import ImportReport

__all__ = ["FinishedImport", "SregymUpload", "sregym_archive", "upload_and_follow"]

_ENDED = ("done", "failed")


@dataclass(frozen=True)
class SregymUpload:
    """An SREGym results folder as it is uploaded: ``body``, the tar.gz holding ``files``
    CSV files, and ``refused``, the rows of the files left out (their names no archive
    entry may have), each refused as the database mode refuses it."""

    body: bytes
    files: int
    refused: list[ImportProblem]

    def report(self, served: ImportReport | None) -> ImportReport:
        """The import's report: the server's (None: nothing was uploaded) with the rows
        refused here among its problems, where the database mode lists them."""
        from api.imports.report import ImportReport
        from api.imports.sregym import in_reading_order

        served = ImportReport() if served is None else served
        total = served.problems_total
        return replace(
            served,
            problems=in_reading_order([*served.problems, *self.refused]),
            rows=served.rows + len(self.refused),
            problems_total=None if total is None else total + len(self.refused),
        )


def sregym_archive(
    directory: Path, problems: dict[str, str], *, max_bytes: int = DEFAULT_MAX_TEXT_BYTES
) -> SregymUpload:
    """The folder's CSV files and ``problems.jsonl`` as a tar.gz, in memory, but for the
    files whose names the server refuses: their rows are refused here (``max_bytes``:
    the largest diagnosis the import takes, as for :func:`read_sregym_folder`)."""
    from api.sregym_archive import PROBLEMS_FILES, UnsafeArchive, csv_files, entry_path

    buffer, files = io.BytesIO(), 0
    left_out: dict[Path, str] = {}  # a file left out, and why
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        lines = "".join(
            json.dumps({"problem_id": k, "root_cause": v}, ensure_ascii=False) + "\n"
            for k, v in problems.items()
        )
        _add(tar, PROBLEMS_FILES[0], lines.encode("utf-8"))
        for path in csv_files(directory):
            name = path.relative_to(directory).as_posix()
            try:
                entry_path(name)  # the server's rule for an entry's name
            except UnsafeArchive as exc:
                left_out[path] = str(exc)
                continue
            _add(tar, name, path.read_bytes())
            files += 1
    refused = _refused_rows(directory, left_out, max_bytes=max_bytes)
    return SregymUpload(buffer.getvalue(), files, refused)


def _refused_rows(
    directory: Path, left_out: dict[Path, str], *, max_bytes: int
) -> list[ImportProblem]:
    """The rows of the files left out of an upload, as the database mode refuses them; a
    row it would take (the name refused is of a folder above the run folder, which the
    import does not keep) is refused for that name."""
    from api.imports.problems import ImportProblem
    from api.imports.sregym import read_sregym_folder

    refused: list[ImportProblem] = []
    for path, why in left_out.items():
        for found in read_sregym_folder(directory, max_bytes=max_bytes, files=[path]):
            refused.append(
                found if isinstance(found, ImportProblem) else ImportProblem(found.source, why)
            )
    return refused


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
    tar.addfile(info, io.BytesIO(data))


@dataclass(frozen=True)
class FinishedImport:
    """An import job that ended: its state, why it failed, its report (the rows it lists)
    and how many rows it refused (``problems``: all of them, listed or not)."""

    job_id: str
    state: str
    error: str | None
    report: ImportReport
    problems: int


def _finished(job: dict[str, Any]) -> FinishedImport:
    from api.imports.report import ImportReport

    summary = job.get("report") or {}
    counted, in_conflict = _count(summary.get("problems")), _count(summary.get("conflicts"))
    problems = _listed(job.get("errors"), counted)
    conflicts = _listed(job.get("conflicts"), in_conflict)
    report = ImportReport(
        submissions=summary.get("submissions", 0),
        already_imported=summary.get("already_imported", 0),
        sregym_verdicts=summary.get("sregym_verdicts", 0),
        graded_here=summary.get("graded_here", 0),
        queued=summary.get("queued", 0),
        not_graded=dict(summary.get("not_graded") or {}),
        problems=problems,
        conflicts=conflicts,
        rows=job.get("done", 0),
        problems_total=counted,
        conflicts_total=in_conflict,
    )
    return FinishedImport(job["id"], job["state"], job.get("error"), report, report.problem_count)


def _count(counted: Any) -> int | None:
    """The number of rows a job's summary says it counted, if it says one."""
    return counted if isinstance(counted, int) and not isinstance(counted, bool) else None


def _listed(rows: list[dict[str, Any]] | None, counted: int | None) -> list[ImportProblem]:
    """The rows a job lists, and a line for those it counted but did not list."""
    from api.imports.problems import ImportProblem

    listed = [ImportProblem(e["where"], e["message"], e.get("field")) for e in rows or []]
    if counted is not None and counted > len(listed):
        listed.append(ImportProblem("...", f"{counted - len(listed)} more, not listed"))
    return listed


def _progress(job: dict[str, Any]) -> str:
    total = "?" if job.get("total") is None else job["total"]
    return f"import job {job['id']}: {job['state']}, {job.get('done', 0)}/{total} rows"


def upload_and_follow(
    server: str, body: bytes, media_type: str, params: dict[str, str]
) -> FinishedImport:
    """Upload ``body``, then poll ``GET /v1/imports/{id}`` until the job ends."""
    from api.cli.remote import poll_waits, remote

    waits = poll_waits()
    with remote(server) as client:
        headers = {"Content-Type": media_type}
        job = client.send("POST", "/v1/imports", content=body, params=params, headers=headers)
        job_json: dict[str, Any] = job.json()
        said = ""
        while True:
            line = _progress(job_json)
            if line != said:
                click.echo(terminal_text(line, one_line=True), err=True)
                said = line
            if job_json["state"] in _ENDED:
                return _finished(job_json)
            time.sleep(next(waits))
            job_json = client.get_json(f"/v1/imports/{job_json['id']}")
