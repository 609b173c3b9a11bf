"""Screening a diagnosis before a judge reads it: credentials out, injection flagged.

Runs once per diagnosis: the service screens a submission at intake and stores the
result with it (:meth:`Screening.record`), so every grading and regrade of it reuses it
(:meth:`Screening.from_record`); the grader screens whatever arrives without one.


- credentials are redacted (``judge.secrets``); a diagnosis that had any, here or
  already at ingestion (it carries ``[REDACTED:...]`` markers), gets the review reason
  ``credential_leaked`` (the failure tag to suggest is ``leaked-credential``);
- markers of prompt injection (``judge.injection``) give the review reason
  ``injection_suspected``, whatever the verdict, and the spans that carry them
  (``judge.injected_spans``) are kept: no quoted evidence may come from them;
- a passing grading whose judge said yes where code vetoed it gets the review reason
  ``judge_overruled`` (an injection signal screening may have missed, see
  :func:`overruled_yes`).

The grading's ``detail`` says what was found: kinds and marker excerpts, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from judge.injected_spans import Span, injected_spans
from judge.injection import character_markers, injection_markers
from judge.review_reasons import ReviewReason
from judge.secrets import redact, redacted_kinds
from judge.verdict import GradingResult

__all__ = [
    "LEAKED_CREDENTIAL_TAG",
    "Screening",
    "overruled_yes",
    "preload",
    "screen",
]

#: the failure tag suggested to adjudicators for a diagnosis that leaked a credential
LEAKED_CREDENTIAL_TAG = "leaked-credential"


@dataclass(frozen=True, slots=True)
class Screening:
    """The diagnosis as a judge may read it, and what a human should know about it."""

    text: str
    review_reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: the spans of ``text`` that carry injection markers (sorted, disjoint)
    injected: tuple[Span, ...] = ()
    #: the credentials removed from the original text: kinds and positions, never
    #: values (``judge.secrets.Redacted.records``)
    redactions: tuple[dict[str, Any], ...] = ()

    def record(self) -> dict[str, Any]:
        """What a store keeps beside the screened text to rebuild this screening."""
        return {
            "review_reasons": list(self.review_reasons),
            "notes": list(self.notes),
            "injected": [list(span) for span in self.injected],
        }

    @classmethod
    def from_record(cls, text: str, record: Mapping[str, Any]) -> Screening:
        """The screening of ``text`` that :meth:`record` stored (``text`` is the screened
        text, stored beside it)."""
        return cls(
            text,
            tuple(record.get("review_reasons", ())),
            tuple(record.get("notes", ())),
            tuple((int(start), int(end)) for start, end in record.get("injected", ())),
        )

    def apply(self, result: GradingResult, *notes: str | None) -> GradingResult:
        """``result`` with this screening's review reasons and notes (and ``notes``) added,
        and ``judge_overruled`` where the rule passes over a yes that code vetoed."""
        extra = [note for note in (*self.notes, *notes) if note]
        own = list(self.review_reasons)
        overruled = overruled_yes(result)
        if overruled:
            own.append(ReviewReason.JUDGE_OVERRULED)
            extra.append(f"the rule passes over yes answers code vetoed: {', '.join(overruled)}")
        if not own and not extra:
            return result
        reasons = tuple(dict.fromkeys((*result.review_reasons, *own)))
        detail = "; ".join(part for part in (result.detail, *extra) if part)
        return result.model_copy(update={"review_reasons": reasons, "detail": detail or None})


def overruled_yes(result: GradingResult) -> list[str]:
    """The questions whose "yes" checks in code overruled, when the rule passes anyway.

    A judge that says yes to what the diagnosis does not hold (a quote that is not in
    it, a component or value it does not name) may have followed instructions in it
    that screening did not recognise: an injection signal whatever screening found,
    which holds the pass (``judge.review_reasons.INJECTION_SIGNALS``). A failing
    grading needs no such signal: the veto already did its work.
    """
    if result.outcome is None or not result.outcome.passed:
        return []
    return [a.question_id for a in result.answers if a.judge_answer and not a.answer]


def screen(diagnosis: str, *, known: Mapping[str, str] | None = None) -> Screening:
    """Redact credentials and look for injection markers in ``diagnosis``; ``known``:
    values found elsewhere in the submission (its trace), redacted here too
    (``judge.secrets.redact``)."""
    redacted = redact(diagnosis, known=known)
    reasons: list[str] = []
    notes: list[str] = []
    kinds = redacted_kinds(redacted.text)
    if kinds:
        reasons.append(ReviewReason.CREDENTIAL_LEAKED)
        notes.append(
            f"credentials redacted ({', '.join(kinds)}); "
            f"suggested failure tag {LEAKED_CREDENTIAL_TAG}"
        )
    markers = injection_markers(redacted.text)
    if redacted.normalized:  # redaction normalized: what only the text as sent shows,
        # outside the credentials (no excerpt may quote one)
        seen = {m.kind for m in markers}
        raw = [m for m in character_markers(redacted.masked(diagnosis)) if m.kind not in seen]
        markers = (*raw, *markers)
    if markers:
        reasons.append(ReviewReason.INJECTION_SUSPECTED)
        found = ", ".join(f'{m.kind} ("{m.excerpt}")' for m in markers)
        notes.append(f"prompt injection markers: {found}")
    spans = injected_spans(redacted.text) if markers else ()
    records = tuple(redacted.records())
    return Screening(redacted.text, tuple(reasons), tuple(notes), spans, records)


def preload() -> None:
    """Import what screening loads on first use: the credential detectors
    (detect-secrets). A server calls it in a thread at start, so its first submission
    does not wait for them; a one-shot command does not."""
    import judge.secret_plugins  # noqa: F401
