"""Values passed into and out of the store that are not table rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judge.screening import Screening
from judge.verdict import GradingResult
from storage.canonical import canonical_json, sha256_hex
from storage.tables import AnswerRecord, GradingRecord, SubmissionRecord, empty_dict, empty_list

if TYPE_CHECKING:
    from storage.search import SearchQuery

__all__ = [
    "Claim",
    "FinishedGrading",
    "GradingFilter",
    "GradingView",
    "NewSubmission",
    "SubmissionOutcome",
]


class NewSubmission(BaseModel):
    """A submission as accepted by the API, its ground truth already resolved.

    For ``ground_truth_source="scenario"`` the ground truth is the scenario's, copied
    at submission time, so later edits of a scenario never change old gradings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    diagnosis: str
    ground_truth: str
    ground_truth_source: Literal["scenario", "inline"]
    scenario_id: str | None = None
    #: the scenario's version whose ground truth this is (not part of the request hash)
    scenario_version: int | None = None
    agent: str | None = None
    model: str | None = None
    run_id: str | None = None
    attempt: int | None = None
    metadata: dict[str, Any] = Field(default_factory=empty_dict)
    #: credentials redacted from the diagnosis before it got here
    #: (``judge.secrets.redact(...).records()``): kinds and positions, never values
    redactions: list[dict[str, Any]] = Field(default_factory=empty_list)
    #: the diagnosis' screening at intake (``judge.screening.Screening.record``); not
    #: part of the request (nor of its hash): it follows from the diagnosis
    screening: dict[str, Any] | None = None
    #: the agent's trace (``judge.trace.Trace``), its credentials redacted: free text or
    #: a list of steps; part of the request, but left out of its hash when absent, so
    #: the hashes of requests without one stay what they were
    trace: str | list[dict[str, Any]] | None = None
    #: the rubric the request named (None: the service's default); part of the request,
    #: but left out of its hash when none was named, as ``trace``
    rubric: str | None = None

    @model_validator(mode="after")
    def _scenario_named(self) -> NewSubmission:
        if self.ground_truth_source == "scenario" and self.scenario_id is None:
            raise ValueError("a ground truth from a scenario needs scenario_id")
        return self

    def request_hash(self) -> str:
        """SHA-256 of the canonical JSON of the request: tells a replay from a new one."""
        left_out = {"scenario_version", "screening"}
        if self.trace is None:
            left_out.add("trace")
        if self.rubric is None:
            left_out.add("rubric")
        return sha256_hex(canonical_json(self.model_dump(mode="json", exclude=left_out)))

    def replays(self, stored: SubmissionRecord) -> bool:
        """Whether this request is the one ``stored`` was made from (its key used again).

        A registered scenario's ground truth is not part of what was sent: the hash
        holds the one in force when the request was first stored, so a scenario given a
        new ground truth since is compared with the stored one (a replay stays a replay,
        and a conflict tells the submitter nothing of the hidden change)."""
        if stored.request_hash == self.request_hash():
            return True
        if self.ground_truth_source != "scenario" or stored.scenario_id != self.scenario_id:
            return False
        as_first = self.model_copy(update={"ground_truth": stored.ground_truth})
        return stored.request_hash == as_first.request_hash()

    def record_values(self) -> dict[str, Any]:
        """The submission row's columns this request gives (copies of its collections)."""
        return {
            "diagnosis": self.diagnosis,
            "ground_truth": self.ground_truth,
            "ground_truth_source": self.ground_truth_source,
            "ground_truth_sha256": sha256_hex(self.ground_truth),
            "scenario_id": self.scenario_id,
            "scenario_version": self.scenario_version,
            "agent": self.agent,
            "model": self.model,
            "run_id": self.run_id,
            "attempt": self.attempt,
            "metadata_": dict(self.metadata),
            "redactions": list(self.redactions),
            "screening": self.screening,
            "trace": self.trace,
        }


@dataclass(frozen=True)
class SubmissionOutcome:
    """What ``SubmissionRepository.create`` stored, or found stored under the idempotency key."""

    submission: SubmissionRecord
    grading: GradingRecord
    #: False when an identical earlier request was replayed
    created: bool
    #: the new grading as leased at once to the worker named in ``create(lease=...)``
    claim: Claim | None = None


@dataclass(frozen=True)
class Claim:
    """A pending grading leased to one worker, with what it needs to grade."""

    grading_id: str
    submission_id: str
    diagnosis: str
    ground_truth: str
    rubric_id: str
    rubric_version: str
    judge_spec: str
    #: how many times it has been claimed, this claim included
    claim_count: int
    lease_expires_at: datetime
    #: whose judge cache entries its grading may read and write: its scenario's, or its
    #: submitter's for an inline ground truth (``judge.cache.ground_truth_namespace``)
    cache_namespace: str
    #: whether its grading may read the judge cache, or only keep its replies there
    #: (``judge.cache.may_read_cache``)
    reads_cache: bool = True
    #: the model of the agent that wrote the diagnosis (self-preference checks)
    agent_model: str | None = None
    #: the regrade job whose item this is (None: a live grading, which follows the
    #: configured judge)
    regrade_job_id: str | None = None
    #: the diagnosis' screening stored at intake (``judge.screening.Screening.record``);
    #: None: screen it when grading
    screening: dict[str, Any] | None = None
    #: how many of its claims so far lost their worker (the lease ran out with no
    #: outcome stored: ``storage.queue.LEASE_EXPIRED``), when the claim before this one
    #: did; 0 when that one ended otherwise (an outcome stored, the lease given back)
    lost_workers: int = 0

    def screened(self) -> Screening | None:
        """The diagnosis' screening stored at intake, or None when it has none."""
        if self.screening is None:
            return None
        return Screening.from_record(self.diagnosis, self.screening)


@dataclass(frozen=True)
class FinishedGrading:
    """A worker's outcome of a claimed grading, to store (``QueueRepository.complete_many``)."""

    grading_id: str
    worker_id: str
    result: GradingResult
    #: graded by a judge not qualified by a calibration run
    provisional: bool = False
    #: the digest of the model behind the judge's name when it graded, where known
    judge_digest: str | None = None
    #: the claim the outcome is of (``Claim.claim_count``): stored only while that claim
    #: holds the lease, not a later claim of the same process (a grading taken from its
    #: worker and claimed again); None checks the owner alone
    claim_count: int | None = None


@dataclass(frozen=True)
class GradingView:
    """A grading with its answers (in rubric order) and its submission."""

    grading: GradingRecord
    answers: tuple[AnswerRecord, ...]
    submission: SubmissionRecord


@dataclass(frozen=True)
class GradingFilter:
    """Filters of ``GradingReads.page``; None means "any".

    ``created_after`` is inclusive and ``created_before`` exclusive, both on the
    grading's ``created_at``. Only current gradings are listed unless
    ``current_only`` is False (superseded ones are kept beside their successors).
    """

    agent: str | None = None
    model: str | None = None
    scenario_id: str | None = None
    status: Literal["pending", "graded", "unscored"] | None = None
    passed: bool | None = None
    #: passes held for a human verdict (injection markers)
    held: bool | None = None
    needs_review: bool | None = None
    rubric_id: str | None = None
    rubric_version: str | None = None
    #: a judge as the reports label it: its model, or ``backend:model`` (``panel:...``)
    judge: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    current_only: bool = True
    #: only gradings carrying this failure tag
    tag: str | None = None
    #: only gradings whose diagnosis, override reasons or tag notes match (``storage.search``)
    search: SearchQuery | None = None
