"""Tables of regrades graded through a batch engine (the OpenAI Batch API or an offline
exchange with a GPU fleet): the job's engine, its batches and its requests.

A job with an engine other than ``live`` has one ``regrade_engine`` row whose state says
where its judge calls are (rendered, in a batch, waiting for a results file, answered);
its items are held back from the workers until that state is ``grading``. Each request
the grader would send is one ``regrade_batch_request`` row keyed by its custom id, with
its body (what the engine is sent) and, once imported, its reply or why it failed (and
the result that said so): a custom id has at most one reply, so no reply is stored twice,
and a failed result sent again is not a new failure. Each submission to the Batch API
(or written file) is one ``regrade_batch`` row with the engine's own ids and state, so a
restarted service resumes polling it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String, Text
from sqlmodel import Field, SQLModel

from storage.tables import _created, _json, _when, new_id

__all__ = [
    "ENGINES",
    "ENGINE_STATES",
    "RegradeBatchRecord",
    "RegradeBatchRequestRecord",
    "RegradeEngineRecord",
]

#: engines a regrade job may use besides ``live``
ENGINES = ("batch", "offline")
#: rendering: requests to render; submitting: a batch to send (Batch API); running: a
#: batch in flight; waiting: a results file to import (offline); grading: items released
ENGINE_STATES = ("rendering", "submitting", "running", "waiting", "grading")


class RegradeEngineRecord(SQLModel, table=True):
    """Where a regrade job's judge calls are, for a job graded through a batch engine."""

    __tablename__ = "regrade_engine"

    job_id: str = Field(primary_key=True, sa_type=String(32), foreign_key="regrade_job.id")
    #: batch (the OpenAI Batch API) | offline (a requests file out, a results file in)
    engine: str = Field(sa_type=String(16))
    #: what becomes of a request whose result failed or is missing: live | batch
    retry: str = Field(default="live", sa_type=String(16))
    #: rendering | submitting | running | waiting | grading
    state: str = Field(default="rendering", sa_type=String(16), index=True)
    #: batches submitted (or results files awaited) so far
    round: int = 0
    #: why the last step failed (None once a step succeeds)
    error: str | None = Field(default=None, sa_type=Text)
    #: steps that failed in a row; each doubles the wait before the next try
    failures: int = 0
    #: when the runner tries a failed step again (None: at its next round)
    retry_at: datetime | None = _when()
    created_at: datetime = _created()
    updated_at: datetime | None = _when()


class RegradeBatchRecord(SQLModel, table=True):
    """One batch: a submission to the Batch API, or a results file imported."""

    __tablename__ = "regrade_batch"

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    job_id: str = Field(sa_type=String(32), foreign_key="regrade_job.id", index=True)
    round: int = 1
    #: batch | offline
    engine: str = Field(sa_type=String(16))
    #: the Batch API's batch id and files (None for an offline file)
    remote_id: str | None = Field(default=None, sa_type=String(128))
    input_file_id: str | None = Field(default=None, sa_type=String(128))
    output_file_id: str | None = Field(default=None, sa_type=String(128))
    error_file_id: str | None = Field(default=None, sa_type=String(128))
    #: the engine's status (validating, in_progress, completed, expired, failed,
    #: cancelled...), then ``imported`` once its results are in
    state: str = Field(default="created", sa_type=String(16))
    requests: int = 0
    #: what its results gave: answered, failed, refused, duplicates, missing
    counts: dict[str, Any] = _json(dict)
    error: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = _created()
    finished_at: datetime | None = _when()


class RegradeBatchRequestRecord(SQLModel, table=True):
    """One judge request of a regrade item, for a batch engine, and its reply."""

    __tablename__ = "regrade_batch_request"

    #: ``rg-<grading id>-c<call>-s<sample>`` (``judge.batch.CustomId``)
    custom_id: str = Field(primary_key=True, sa_type=String(64))
    job_id: str = Field(sa_type=String(32), foreign_key="regrade_job.id", index=True)
    grading_id: str = Field(sa_type=String(32), foreign_key="grading.id", index=True)
    call: int = 0
    sample: int = 0
    #: SHA-256 of the judge request (``judge.batch.request_hash``)
    prompt_hash: str = Field(sa_type=String(64))
    model: str = Field(sa_type=String(256))
    #: the chat completion request body sent to the engine
    body: dict[str, Any] = _json(dict)
    #: rendered | submitted | answered | failed
    status: str = Field(default="rendered", sa_type=String(16))
    #: the batch that last carried it
    batch_id: str | None = Field(default=None, sa_type=String(32))
    #: the reply (``judge.calls.Completion`` as JSON), once answered
    completion: dict[str, Any] | None = Field(default=None, sa_type=JSON, nullable=True)
    error: str | None = Field(default=None, sa_type=Text)
    #: the ``id`` of the result line that failed it, if it had one (the same result sent
    #: again is recognised as a duplicate, not a new failure)
    result_id: str | None = Field(default=None, sa_type=String(128))
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    answered_at: datetime | None = _when()
