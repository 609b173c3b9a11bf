"""Tables of imports: SREGym's original rows, import jobs and their uploads.

``sregym_original_row`` keeps every cell of each CSV row an imported attempt came from,
with the file's column order and its path in the results folder, so an export in
SREGym's format gives every file back as it was (issue 16, item 3). SREGym writes each
attempt in several files (alone, in its problem's file, in the agent's file of every
row): one record per file and line, several per submission. ``import_job`` is an
import run in the background (``POST /v1/imports``); ``import_upload`` holds its input
until it is done, in the database, so any process of the service can resume it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ForeignKey, LargeBinary, String, Text
from sqlmodel import Field, SQLModel

from storage.tables import _created, _json, _when, new_id

__all__ = [
    "IMPORT_JOB_STATES",
    "SREGYM_JUDGE_SPEC",
    "SREGYM_RUBRIC_VERSION",
    "ImportJobRecord",
    "ImportUploadRecord",
    "SregymOriginalRowRecord",
]

#: the judge of imported SREGym verdicts
SREGYM_JUDGE_SPEC = "external:sregym"
#: the rubric version of imported SREGym verdicts: SREGym's own checklist wording
SREGYM_RUBRIC_VERSION = "sregym"
#: every state of an import job
IMPORT_JOB_STATES = ("queued", "running", "done", "failed")


class SregymOriginalRowRecord(SQLModel, table=True):
    """A CSV row an imported SREGym attempt was read from, every cell as it was written
    (one per file and line the attempt is in)."""

    __tablename__ = "sregym_original_row"

    submission_id: str = Field(
        sa_column=Column(
            String(32),
            ForeignKey("submission.id", ondelete="CASCADE"),
            primary_key=True,
        )
    )
    #: the CSV file, relative to the results folder (``<datetime>/<agent>/<problem>/x.csv``)
    path: str = Field(sa_column=Column(Text, primary_key=True))
    #: the row's line in that file (csv's line number at the end of the row)
    line: int = Field(primary_key=True)
    #: the file's header, in its order
    columns: list[str] = _json(list)
    #: every cell of the row, by column, as text
    cells: dict[str, Any] = _json(dict)


class ImportJobRecord(SQLModel, table=True):
    """An import run in the background: its input, progress and outcome."""

    __tablename__ = "import_job"

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    #: sregym | jsonl
    kind: str = Field(sa_type=String(16))
    #: tar.gz | zip | jsonl
    archive: str = Field(sa_type=String(16))
    #: queued | running | done | failed
    state: str = Field(default="queued", sa_type=String(16))
    rubric: str | None = Field(default=None, sa_type=String(200))
    #: JSON lines all or nothing: any bad line fails the job and stores nothing
    strict: bool = False
    #: rows (attempts or lines) found in the input; None until it has been read
    total: int | None = None
    #: rows handled so far (stored, already imported or refused)
    done: int = 0
    #: the import's summary (``ImportReport.as_dict``), kept up to date while it runs
    report: dict[str, Any] = _json(dict)
    #: ``[{where, message}]``: the rows that could not be imported
    errors: list[Any] = _json(list)
    #: the upload's size in bytes and its SHA-256
    size: int = 0
    sha256: str = Field(sa_type=String(64))
    #: the process running it and when it last reported (a stale claim is taken over)
    claimed_by: str | None = Field(default=None, sa_type=String(64))
    heartbeat_at: datetime | None = _when()
    attempts: int = 0
    created_by: str = Field(sa_type=String(64))
    created_at: datetime = _created()
    started_at: datetime | None = _when()
    finished_at: datetime | None = _when()
    error: str | None = Field(default=None, sa_type=Text)


class ImportUploadRecord(SQLModel, table=True):
    """The bytes of an import job's upload, removed once the job is done."""

    __tablename__ = "import_upload"

    job_id: str = Field(
        sa_column=Column(
            String(32), ForeignKey("import_job.id", ondelete="CASCADE"), primary_key=True
        )
    )
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
