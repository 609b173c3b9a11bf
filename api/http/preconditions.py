"""Conditional writes: the revision an ``If-Match`` header names."""

from __future__ import annotations

from api.http.problems import ApiProblem

__all__ = ["expected_revision"]


def expected_revision(if_match: str | None, *, what: str) -> int:
    """The revision ``If-Match`` holds: 428 without one, 412 when it is not ours.

    ``what`` says what needs it, e.g. ``"overrides need If-Match with the grading's ETag"``.
    """
    if if_match is None:
        raise ApiProblem(428, "Precondition required", what, field="If-Match")
    if if_match.strip() == "*" or "," in if_match:
        # a write must name what it read: "*" or a list could undo a change unseen
        raise ApiProblem(
            412,
            "Precondition failed",
            "If-Match must hold the one ETag you read; a list or * is not taken",
            field="If-Match",
        )
    # If-Match compares strongly (RFC 9110 13.1.1): a weak ETag never matches
    value = if_match.strip().strip('"')
    # ASCII digits only: str.isdigit also takes "²" (a header's byte 0xB2), which int refuses
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise ApiProblem(
            412,
            "Precondition failed",
            f"If-Match {if_match!r} is not an ETag of this service",
            field="If-Match",
        )
    return int(value)
