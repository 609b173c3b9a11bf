"""Digests of gradings' current state, so the chain covers the grading and answer tables.

Every transaction that writes a grading or its answers appends an audit event whose
payload carries ``covers``: ``{grading id: digest}`` of each such grading as it stands
when the event is written (see ``Database.audit``). ``sre-judge audit verify``
recomputes every grading's digest from the tables and compares it with the newest one
in the chain, so an edited verdict or answer, a deleted grading or answer, and the
newest audit rows deleted while the state they covered remains are all detected.

A digest is generic over the tables' columns: every column but the lease bookkeeping
(which changes without an audit event), leaving out NULL values and values equal to
the column's default (a scalar default, or an empty JSON list or object), so a later
migration that adds a nullable column, or a column with a default, does not change the
digests of older rows. Leaving a default out loses nothing: it is the only value the
column's key can stand for when absent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Table, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from storage.canonical import canonical_json, sha256_hex
from storage.tables import AnswerRecord, GradingRecord

__all__ = [
    "COVERS",
    "answers_by_grading",
    "grading_digests",
    "present_values",
    "state_digest",
    "values_digest",
]

#: the payload key of the digests an audit event carries
COVERS = "covers"
#: grading columns outside its digest: what a worker changes without an audit event
#: (claims, lease extensions, releases), the votes, outside it as they were when they
#: had a table of their own (the judge calls they came from are audited records), and
#: the list position, which follows from covered columns (its creation time, or that
#: of the grading its promotion superseded) and came after the digests of older rows
_GRADING_SKIP = frozenset({"lease_owner", "lease_expires_at", "claim_count", "votes", "listed_at"})
#: answer columns that are not the answer's content
_ANSWER_SKIP = frozenset({"id", "grading_id"})
_GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]
_ANSWERS = AnswerRecord.__table__  # type: ignore[attr-defined]
_DIGEST_CHARS = 32
#: ids per IN list
_CHUNK = 500


#: stands for the empty list or object a JSON column's default factory makes
_EMPTY = object()


def _defaults(table: Table) -> dict[str, Any]:
    """Column -> the value its default writes, when that is a constant."""
    found: dict[str, Any] = {}
    for column in table.columns:
        default = column.default
        if default is None:
            continue
        if default.is_scalar:
            found[column.name] = default.arg  # type: ignore[attr-defined]
        elif isinstance(column.type, JSON):
            found[column.name] = _EMPTY
    return found


#: table name -> its columns' constant defaults (see ``_defaults``), filled on first use
_DEFAULTS: dict[str, dict[str, Any]] = {}
_MISSING = object()


def _is_default(value: Any, default: Any) -> bool:
    if default is _EMPTY:
        return value in ([], {})
    return default is not _MISSING and value == default


def present_values(
    row: Mapping[str, Any], table: Table, skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The row's columns that a digest covers: all but ``skip``, NULLs and defaults.

    Leaving out NULLs and defaults keeps old rows' digests stable when a migration adds
    a nullable column or one with a default (see the module).
    """
    defaults = _DEFAULTS.get(table.name)
    if defaults is None:
        defaults = _DEFAULTS[table.name] = _defaults(table)
    return {
        k: v
        for k, v in row.items()
        if v is not None and k not in skip and not _is_default(v, defaults.get(k, _MISSING))
    }


def state_digest(grading: Any, answers: Iterable[Any]) -> str:
    """The digest of one grading row and its answer rows (rows as read from the tables)."""
    return values_digest(grading._mapping, (a._mapping for a in answers))


def values_digest(grading: Mapping[str, Any], answers: Iterable[Mapping[str, Any]]) -> str:
    """The digest of a grading's column values and its answers' (as written, or read).

    A writer that knows every column of the row it wrote (the submission's pending
    grading, a completed grading with the answer rows of the same transaction) computes
    the digest from those values instead of reading the rows back: the same digest,
    since a column left out of ``answers`` holds its default, which counts as absent.
    """
    content = {
        "grading": present_values(grading, _GRADINGS, _GRADING_SKIP),
        "answers": sorted(
            (present_values(a, _ANSWERS, _ANSWER_SKIP) for a in answers),
            key=lambda a: a["question_id"],
        ),
    }
    return sha256_hex(canonical_json(content))[:_DIGEST_CHARS]


def grading_digests(executor: Session | Connection, ids: Sequence[str]) -> dict[str, str | None]:
    """Each grading's current digest, read from the tables; None for a missing grading."""
    digests: dict[str, str | None] = dict.fromkeys(ids)
    unique = list(digests)
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        gradings = executor.execute(select(_GRADINGS).where(_GRADINGS.c.id.in_(chunk)))
        answers = answers_by_grading(executor, chunk)
        for row in gradings.all():
            digests[row.id] = state_digest(row, answers.get(row.id, ()))
    return digests


def answers_by_grading(executor: Session | Connection, ids: Sequence[str]) -> dict[str, list[Any]]:
    """The answer rows of the gradings ``ids``, by grading id."""
    found: dict[str, list[Any]] = {}
    query = select(_ANSWERS).where(_ANSWERS.c.grading_id.in_(list(ids)))
    for row in executor.execute(query).all():
        found.setdefault(row.grading_id, []).append(row)
    return found
