"""Digests of the evidentiary records, so the chain covers every table a verdict rests on.

Besides gradings and their answers (``storage.audit.state``), the audit log covers the
rows that explain and correct them: submissions (diagnosis, ground truth, metadata),
scenarios and every version of their ground truth, overrides and their withdrawals,
human labels, failure tags with their notes, and judge calls (prompt and reply). Each
write of such a row puts the row's digest into the payload of the audit event of the
same transaction, under ``rows``: ``{table: {row key: digest}}`` (no extra statement).
``sre-judge audit verify`` recomputes every row's digest from the tables and compares it
with the newest one in the chain, naming the table, the row and the fields that differ.

A digest is ``{"sha": ..., "fields": {column: hint}}``. ``sha`` (128 bits) is what
detects a change: the sha256 of the row's columns' own sha256s, each column's over its
canonical JSON (text over itself, tagged). The hints (the first hex digits of each
column's sha256) only name which column changed; they decide nothing. Columns are taken
as ``state.present_values`` takes them (NULLs and defaults left out), so a later
migration that adds a nullable column does not change older rows' digests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Table, select, tuple_
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlmodel import SQLModel

from storage.audit.state import present_values
from storage.canonical import canonical_json
from storage.review_tables import FailureTagRecord, HumanLabelRecord, OverrideRecord
from storage.scenario_tables import ScenarioVersionRecord
from storage.tables import JudgeCallRecord, ScenarioRecord, SubmissionRecord, row_values

__all__ = [
    "COVERED_TABLES",
    "ROWS",
    "RecordRow",
    "changed_fields",
    "record_digest",
    "record_key",
    "rows_payload",
    "table_rows",
]

#: the payload key of the record digests an audit event carries
ROWS = "rows"
_SHA_CHARS = 32
_HINT_CHARS = 6


def _table(record: type[SQLModel]) -> Table:
    return record.__table__  # type: ignore[attr-defined,no-any-return]


#: every table whose rows the chain covers, by name
COVERED_TABLES: dict[str, Table] = {
    _table(record).name: _table(record)
    for record in (
        SubmissionRecord,
        ScenarioRecord,
        ScenarioVersionRecord,
        OverrideRecord,
        HumanLabelRecord,
        FailureTagRecord,
        JudgeCallRecord,
    )
}

#: a row to digest: a record object (flushed), or a table and the values written to it
RecordRow = SQLModel | tuple[Table, Mapping[str, Any]]


def record_key(table: Table, row: Mapping[str, Any]) -> str:
    """The row's primary key as text; a composite key's parts joined by ``@``."""
    return "@".join(str(row[column.name]) for column in table.primary_key.columns)


def record_digest(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """The digest of one row, from its values as written or as read back."""
    sums = {name: _column_sum(value) for name, value in present_values(row, table).items()}
    whole = hashlib.sha256(canonical_json(sums).encode("utf-8")).hexdigest()
    return {
        "sha": whole[:_SHA_CHARS],
        "fields": {name: value[:_HINT_CHARS] for name, value in sums.items()},
    }


def _column_sum(value: Any) -> str:
    """The sha256 of one column's value: text as itself (tagged, so it never equals the
    canonical JSON of another value), anything else as its canonical JSON (integers and
    booleans written directly, as JSON writes them)."""
    kind = type(value)
    if kind is str:
        encoded = "s:" + value
    elif kind is bool:
        encoded = "true" if value else "false"
    elif kind is int or kind is float:
        encoded = canonical_json(value) if kind is float else str(value)
    else:
        encoded = canonical_json(value)
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def changed_fields(stored: Any, current: Mapping[str, Any]) -> list[str]:
    """The columns whose hints differ between a digest from the chain and a current one
    (sorted; empty when the stored digest has no hints to compare)."""
    before = stored.get("fields") if isinstance(stored, dict) else None
    if not isinstance(before, dict):
        return []
    after = current["fields"]
    return sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )


def _as_row(item: RecordRow) -> tuple[Table, Mapping[str, Any]]:
    if isinstance(item, SQLModel):
        return _table(type(item)), row_values(item)
    return item


def rows_payload(items: Iterable[RecordRow]) -> dict[str, dict[str, Any]]:
    """``{table: {row key: digest}}`` of the rows, for an audit event's ``rows``.

    A record object must be flushed (its key and defaults assigned).
    """
    found: dict[str, dict[str, Any]] = {}
    for item in items:
        table, row = _as_row(item)
        if table.name not in COVERED_TABLES:
            raise ValueError(f"the audit log does not cover table {table.name}")
        found.setdefault(table.name, {})[record_key(table, row)] = record_digest(table, row)
    return found


def table_rows(
    executor: Connection | Session, table: Table, *, batch_size: int
) -> Iterator[Sequence[Any]]:
    """Every row of ``table`` in primary-key order, one batch of rows at a time."""
    columns = list(table.primary_key.columns)
    key = tuple_(*columns) if len(columns) > 1 else columns[0]
    last: Any = None
    while True:
        query = select(table).order_by(*columns).limit(batch_size)
        if last is not None:
            bound = tuple_(*last) if len(columns) > 1 else last[0]
            query = query.where(key > bound)
        rows = executor.execute(query).all()
        if not rows:
            return
        yield rows
        last = tuple(getattr(rows[-1], column.name) for column in columns)
