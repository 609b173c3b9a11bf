"""Rows for imported submissions and SREGym's own verdicts (no database access here).

SREGym's verdict becomes a grading by the external judge ``sregym``: status graded,
its checklist as answers, its success and composite as they were, current; unscored,
with its reason, where the checklist is unreadable, is SREGym's default for a judge
reply it could not parse (nine "No" that are no verdict), is the empty one beside a
verdict alone (``sregym_verdict_only``: the client's SREGym drop-in writes it for a
token shown verdicts only, an export for an attempt a human's verdict decided; no
answers to grade by, and a graded grading here always has them; SREGym's success stays
in the submission's ``metadata.sregym``), or leaves
questions out beside no ``Diagnosis.success`` (``sregym_checklist_incomplete``: no
verdict of SREGym's to keep, and the rule needs every answer; its checklist stays in
the submission's ``metadata.sregym``), so a graded one always has a verdict and an
unscored one is in the review queue. Either carries the review reasons the screening of
its diagnosis found (``credential_leaked``, ``injection_suspected``), as a grading of a
submitted diagnosis does, and is in the review queue for them; they hold no pass:
SREGym's success stands. Attempts that never produced a diagnosis (no submission,
failed deploy, timeout) get no grading at all, so they are never graded as wrong
diagnoses and never count in pass rates; their outcome is in the submission's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from api.imports.jsonl import JsonlLine
from api.imports.sregym import SregymAttempt, run_started_at
from judge.rubric import Rubric
from judge.screening import Screening, screen
from judge.trace import Trace, screen_submission
from storage.canonical import canonical_json, sha256_hex
from storage.imports.tables import SREGYM_JUDGE_SPEC, SREGYM_RUBRIC_VERSION
from storage.overrides import imported_figures
from storage.tables import AnswerRecord, GradingRecord, SubmissionRecord, new_id

__all__ = [
    "JSONL_KEY",
    "jsonl_submission",
    "jsonl_time_filled_in",
    "run_started_at",
    "screened",
    "sregym_diagnosis",
    "sregym_earlier_key",
    "sregym_grading",
    "sregym_key",
    "sregym_submission",
]

#: the longest idempotency key stored
_MAX_KEY = 256
#: what begins the idempotency key of a JSONL line's submission, before its content hash
JSONL_KEY = "jsonl:"


def screened(
    diagnosis: str, trace: Trace | None = None, *, known: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """An imported diagnosis as intake stores a submitted one: screened once (credentials
    redacted, injection flagged, ``judge.screening``), its text, redactions and what
    screening found, reused by every grading of it; with the agent's ``trace``, also the
    trace redacted, whose credentials are redacted in the diagnosis too
    (``judge.trace.screen_submission``); ``known``: those of a trace redacted already
    (an SREGym row's, ``SregymAttempt.trace_secrets``). Credentials never reach the
    database or a judge in clear, imported or not."""
    if trace is None:
        found, redacted = screen(diagnosis, known=known), None
    else:
        found, redacted = screen_submission(diagnosis, trace)
    fields: dict[str, Any] = {
        "diagnosis": found.text,
        "redactions": list(found.redactions),
        "screening": found.record(),
    }
    return fields if trace is None else {**fields, "trace": redacted}


def _screened_attempt(attempt: SregymAttempt) -> dict[str, Any]:
    """The attempt's diagnosis as its submission stores it (:func:`screened`), with the
    credentials its trace showed redacted too."""
    return screened(attempt.diagnosis, known=attempt.trace_secrets)


def sregym_diagnosis(attempt: SregymAttempt) -> str:
    """The attempt's diagnosis as its submission stores it: screened as intake screens a
    submitted one (:func:`screened`: credentials redacted, text normalised where a
    credential hid behind look-alike characters)."""
    return str(_screened_attempt(attempt)["diagnosis"])


def sregym_key(where: str) -> str:
    """The idempotency key of an SREGym attempt: ``sregym:`` and where it was (its run,
    agent, problem and attempt, or its file and line), or that place's digest when it is
    too long to store."""
    key = f"sregym:{where}"
    return key if len(key) <= _MAX_KEY else f"sregym:sha256:{sha256_hex(where)}"


def _where(attempt: SregymAttempt) -> str:
    """Where the attempt was: its run, agent, problem and attempt; without an attempt
    number, its file from the run folder on and its line (the same whatever folders the
    results were packed under)."""
    if attempt.attempt is None:
        return f"{attempt.path}:{attempt.line}"
    return f"{attempt.run}/{attempt.agent}/{attempt.problem_id}/attempt-{attempt.attempt}"


def sregym_earlier_key(attempt: SregymAttempt) -> str | None:
    """The other key earlier versions stored the attempt under, if any: a row without an
    attempt number was keyed by its file from the import's root (with the folders the
    results were packed under) and its line. Looked up when its own key finds nothing,
    so importing again what they stored stores nothing twice."""
    if attempt.attempt is None:
        file = attempt.source.rpartition(":")[0]  # ``source`` names the row's first line
        earlier = sregym_key(f"{file}:{attempt.line}")
        return earlier if earlier != sregym_key(_where(attempt)) else None
    return None


def sregym_submission(
    attempt: SregymAttempt, ground_truth: str, *, scenario_id: str | None, actor: str, at: datetime
) -> SubmissionRecord:
    """The submission of one attempt; SREGym's figures and the outcome in its metadata."""
    metadata: dict[str, Any] = {
        "source": "sregym",
        "import_outcome": attempt.outcome,
        "sregym": {
            **attempt.original,
            "run": attempt.run,
            "problem_id": attempt.problem_id,
            "csv": attempt.source,
        },
    }
    if attempt.checklist_problem:
        metadata["import_problem"] = attempt.checklist_problem
    content: dict[str, Any] = {
        "diagnosis": attempt.diagnosis,
        "ground_truth": ground_truth,
        "meta": metadata,
    }
    if attempt.trace is not None:  # rows without one keep the keys they had
        content["trace"] = attempt.trace
    return SubmissionRecord(
        id=new_id(),
        **_screened_attempt(attempt),
        trace=attempt.trace,  # read with its credentials redacted (api.imports.sregym)
        ground_truth=ground_truth,
        ground_truth_sha256=sha256_hex(ground_truth),
        ground_truth_source="scenario" if scenario_id else "inline",
        scenario_id=scenario_id,
        agent=attempt.agent or None,
        run_id=attempt.run or None,
        attempt=attempt.attempt,
        metadata_=metadata,
        submitted_by=actor,
        idempotency_key=sregym_key(_where(attempt)),
        request_hash=sha256_hex(canonical_json(content)),
        created_at=run_started_at(attempt.run) or at,
    )


def _answers(grading_id: str, attempt: SregymAttempt) -> list[AnswerRecord]:
    return [
        AnswerRecord(
            grading_id=grading_id,
            question_id=a.question_id,
            dimension_id=a.question_id.split("-", 1)[0],
            answer=a.answer,
            judge_answer=a.answer,
            evidence=a.evidence,
            confidence=a.confidence,
            position=position,
        )
        for position, a in enumerate(attempt.answers or ())
    ]


def _left_out(rubric: Rubric, said: Mapping[str, bool]) -> str:
    """Why a checklist that leaves questions out, beside no ``Diagnosis.success``, gives
    no verdict: the questions it leaves out."""
    missing = [q.id for q in rubric.questions if q.id not in said]
    return (
        f"Diagnosis.checklist leaves out {', '.join(missing)} and the row has no "
        "Diagnosis.success: the rule needs an answer to every question"
    )


def sregym_grading(
    attempt: SregymAttempt,
    submission_id: str,
    *,
    rubric: Rubric,
    at: datetime,
    screening: Mapping[str, Any] | None = None,
) -> tuple[GradingRecord, list[AnswerRecord]]:
    """SREGym's verdict as a current grading of the external judge ``sregym``.

    Provisional: SREGym's judge ran outside this service and no calibration run can
    qualify it, so its verdicts are never counted as a qualified judge's. It carries
    the review reasons of its diagnosis's screening, ``screening`` (the submission's
    ``screening``; None: the attempt's diagnosis screened as :func:`sregym_submission`
    stores it), and needs review for them; a graded one's ``detail`` holds screening's
    notes. They hold nothing: its success is SREGym's, as it was."""
    found = Screening.from_record(
        attempt.diagnosis,
        screening if screening is not None else _screened_attempt(attempt)["screening"],
    )
    grading = GradingRecord(
        id=new_id(),
        submission_id=submission_id,
        rubric_id=rubric.id,
        rubric_version=SREGYM_RUBRIC_VERSION,
        judge_spec=SREGYM_JUDGE_SPEC,
        judge_backend="external",
        judge_model="sregym",
        provisional=True,
        needs_review=bool(found.review_reasons),
        review_reasons=list(found.review_reasons),
        created_at=at,
        graded_at=at,
    )
    if attempt.verdict_only:  # a verdict without the answers this service grades by
        grading.status, grading.unscored_reason = "unscored", "sregym_verdict_only"
        grading.detail = attempt.checklist_problem
        return grading, []
    if attempt.answers is None:
        grading.status, grading.unscored_reason = "unscored", "sregym_checklist_unreadable"
        grading.detail = attempt.checklist_problem
        return grading, []
    if attempt.judge_parse_failure:  # nine "No" that SREGym's judge never said
        grading.status, grading.unscored_reason = "unscored", "sregym_judge_parse_failure"
        grading.detail = attempt.checklist_problem
        return grading, []
    said = {a.question_id: a.answer for a in attempt.answers}
    figures = imported_figures(rubric, said, success=attempt.success, composite=attempt.composite)
    if figures.passed is None:  # a partial checklist and no success: no verdict to store
        grading.status, grading.unscored_reason = "unscored", "sregym_checklist_incomplete"
        grading.detail = _left_out(rubric, said)
        return grading, []
    grading.status = "graded"
    grading.yes_count = figures.yes_count
    grading.composite = figures.composite
    grading.passed = grading.judge_passed = figures.passed
    grading.decisive = figures.decisive
    grading.detail = "; ".join(found.notes) or None
    return grading, _answers(grading.id, attempt)


def jsonl_submission(
    line: JsonlLine, truth: str, *, actor: str, content: str, now: datetime
) -> SubmissionRecord:
    """The submission of one JSONL line (``content``: its hash), its diagnosis redacted."""
    item = line.submission
    return SubmissionRecord(
        id=new_id(),
        # credentials in the agent's trace redacted, as a submission's are
        **screened(item.diagnosis, item.trace),
        ground_truth=truth,
        ground_truth_sha256=sha256_hex(truth),
        ground_truth_source="scenario" if item.scenario_id else "inline",
        scenario_id=item.scenario_id,
        agent=item.agent,
        model=item.model,
        run_id=item.run_id,
        attempt=item.attempt,
        # the line's own metadata is kept whole: its ``source`` (the harness's) wins over
        # the import's mark (the audit event records the import either way)
        metadata_={"source": "jsonl", **item.metadata},
        submitted_by=actor,
        idempotency_key=f"{JSONL_KEY}{content}",
        # a time the import fills in is no part of the line's content (the key's): the
        # request is then the content with that time, so the row tells the line gave none
        request_hash=content
        if item.created_at is not None
        else sha256_hex(canonical_json([content, now.isoformat()])),
        created_at=item.created_utc() or now,
    )


def jsonl_time_filled_in(stored: SubmissionRecord) -> bool:
    """Whether the import of the JSONL submission ``stored`` dated it because its line gave
    no ``created_at`` (its request hash is not its key's content hash). False too for a
    row stored before imports recorded it, whose request hash is its content hash either
    way."""
    return stored.request_hash != (stored.idempotency_key or "").removeprefix(JSONL_KEY)
