"""Reading historic submissions from JSON lines, with the line number in every error.

Each line is one object ``{diagnosis, ground_truth | scenario_id, agent, model,
run_id, attempt, created_at, metadata}``. A ``created_at`` without an offset is taken
as UTC. Each line is checked by the rules the API applies to a submission (what the
databases store, :mod:`storage.storable`; the text limits, :mod:`judge.inputs`; the
largest body, ``SRE_JUDGE_MAX_BODY_BYTES``): a line that breaks one is refused naming
its field (or, too large to be a submission's body, the line alone), and the other
lines are read on. A key given twice in one object refuses its line, naming the key,
never read as one of its values; a byte that is not UTF-8, naming the field whose value
holds it, as the API does. A byte order mark at the start of the file is skipped. A
line is measured before it is decoded, and one over the limit is read past in chunks,
never held whole (nor by the count of a job's lines). Nothing here touches the database.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from api.imports.problems import ImportProblem
from api.service.errors import body_path
from api.service.request_types import DatetimeText
from judge.errors import InputError
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, RepeatedKey, check_text, load_json
from judge.trace import check_trace
from storage.storable import (
    MAX_INT32,
    MAX_JSON_DEPTH,
    TooManyDigits,
    printable,
    stored_date,
    too_deep,
    unstorable_value,
)

__all__ = ["JsonlLine", "JsonlSubmission", "count_jsonl_items", "read_jsonl"]


class JsonlSubmission(BaseModel):
    """One historic submission."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    diagnosis: StrictStr
    ground_truth: StrictStr | None = None
    scenario_id: StrictStr | None = Field(default=None, max_length=128)
    agent: StrictStr | None = Field(default=None, max_length=200)
    model: StrictStr | None = Field(default=None, max_length=200)
    run_id: StrictStr | None = Field(default=None, max_length=200)
    attempt: StrictInt | None = Field(default=None, ge=0, le=MAX_INT32)
    #: ISO 8601 text, read as the API reads a date-time (a number is refused)
    created_at: DatetimeText | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: the agent's trace, as a submission carries it: a list of steps or text
    trace: StrictStr | list[dict[str, Any]] | None = None

    @field_validator("created_at")
    @classmethod
    def _within_stored_years(cls, value: datetime | None) -> datetime | None:
        if value is not None:
            stored_date(value)  # kept as written: the line's content hash is its identity
        return value

    def truth_problem(self) -> str | None:
        """Why the line's ground truth is not exactly one of ``scenario_id`` and
        ``ground_truth`` (the field an API submission names: ``scenario_id``), or None."""
        if (self.scenario_id is None) == (self.ground_truth is None):
            return "give exactly one of scenario_id and ground_truth"
        return None

    def created_utc(self) -> datetime | None:
        """``created_at`` as aware UTC (naive values are taken as UTC)."""
        return None if self.created_at is None else stored_date(self.created_at)


@dataclass(frozen=True)
class JsonlLine:
    """A valid line and where it was."""

    line: int
    submission: JsonlSubmission


class _Refused(ValueError):
    """A line broke a rule: the field to blame (None: the line as a whole) and why."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _refused(exc: ValidationError) -> _Refused:
    parts, fields = [], []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        message = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{where or 'line'}: {message}")
        fields.append(where)
    return _Refused("; ".join(parts), fields[0] or None if fields else None)


def _parse(text: str, *, max_bytes: int) -> JsonlSubmission:
    deep = too_deep(text)
    if deep is not None:
        raise _Refused(f"{deep or 'line'}: JSON nested deeper than {MAX_JSON_DEPTH} levels", deep)
    try:
        data = load_json(text, parse_int=TooManyDigits.parse)
    except RepeatedKey as exc:  # which of its values the writer meant is unknown
        field = printable(body_path(".".join(str(part) for part in (*exc.path, exc.args[0]))))
        raise _Refused(f"{field}: the key is given twice", field) from None
    except json.JSONDecodeError as exc:
        raise _Refused(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise _Refused(f"expected a JSON object, got {type(data).__name__}")
    found = unstorable_value(data)
    if found:
        field = printable(found[0])
        raise _Refused(f"{field}: {found[1]}", field)
    try:
        item = JsonlSubmission.model_validate(data)
    except ValidationError as exc:
        raise _refused(exc) from None
    problem = item.truth_problem()
    if problem is not None:
        raise _Refused(f"scenario_id: {problem}", "scenario_id")
    try:
        check_text(item.diagnosis, field="diagnosis", max_bytes=max_bytes)
        if item.ground_truth is not None:
            check_text(item.ground_truth, field="ground_truth", max_bytes=max_bytes)
        if item.trace is not None:
            check_trace(item.trace, field="trace", max_bytes=max_bytes)
    except InputError as exc:
        raise _Refused(f"{exc.field}: {exc}", exc.field) from None
    return item


#: bytes read at a time past a line too long to hold (and to count a job's lines)
_CHUNK = 64 * 1024
#: what a line may hold besides its content: the file's byte order mark and ``\r\n``
_SLACK = len(codecs.BOM_UTF8) + 2


def _line_past(handle: IO[bytes], start: bytes) -> tuple[int, bool]:
    """The size (its line ending not counted) of the line ``start`` begins and whether it
    is blank, read past in chunks, never held whole."""
    size, end, blank, chunk = 0, 0, True, start
    while chunk:
        content = chunk.rstrip(b"\r\n")
        end = size + len(content) if content else end  # where the line ending begins
        size, blank = size + len(chunk), blank and not chunk.strip()
        if chunk.endswith(b"\n"):
            break
        chunk = handle.readline(_CHUNK)
    return end, blank


def _lines(path: Path, *, keep: int | None) -> Iterator[tuple[int, bytes | None, int]]:
    """Every line of ``path`` (split at ``\n`` only) that is not blank (ASCII white space
    only), with its number, its bytes and its size (its line ending not
    counted); its bytes None when it is larger than ``keep`` (None: any size is kept),
    measured in chunks and never held whole."""
    limit = -1 if keep is None else keep + _SLACK
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(limit):
            number += 1
            if number == 1 and raw.startswith(codecs.BOM_UTF8):  # no part of the line
                raw = raw[len(codecs.BOM_UTF8) :]
            content = raw.rstrip(b"\r\n")
            if keep is None or raw.endswith(b"\n") or len(raw) <= keep:
                size, blank = len(content), not content.strip()
            else:  # the line goes on past what is kept: read past it
                size, blank = _line_past(handle, raw)
            if not blank:
                yield number, content if keep is None or size <= keep else None, size


def _not_utf8(raw: bytes, reason: str, *, max_bytes: int) -> _Refused:
    """Why a line that is not UTF-8 is refused: naming the field whose value holds the
    bad byte, as the API names it (each such byte read as a lone surrogate, which
    :func:`unstorable_value` finds), or the line alone when it does not parse."""
    try:
        _parse(raw.decode("utf-8", "surrogateescape"), max_bytes=max_bytes)
    except _Refused as refused:
        if refused.field is not None and "surrogate" in str(refused):
            return _Refused(f"{refused.field}: not valid UTF-8 text", refused.field)
    except (ValueError, RecursionError):
        pass
    return _Refused(f"not valid UTF-8: {reason}")


def _decoded(raw: bytes, *, max_bytes: int) -> JsonlSubmission:
    """The line's submission; ``_Refused`` when the line breaks a rule."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc.reason, max_bytes=max_bytes) from None
    return _parse(text, max_bytes=max_bytes)


def read_jsonl(
    path: Path, *, max_bytes: int = DEFAULT_MAX_TEXT_BYTES, max_line_bytes: int | None = None
) -> Iterator[JsonlLine | ImportProblem]:
    """Every line of ``path`` that is not blank: a valid submission or a problem naming
    the line. A caller on the event loop reads it in a worker thread (each line is parsed
    and checked).

    ``max_bytes``: the largest diagnosis, ground truth and trace; ``max_line_bytes``: the
    largest line (its line ending not counted), as the API's largest request body (None:
    any); a larger one is refused naming its line, without being held whole."""
    for number, raw, size in _lines(path, keep=max_line_bytes):
        if raw is None:
            message = (
                f"the line is {size} bytes, more than the {max_line_bytes} of a "
                "submission's body (SRE_JUDGE_MAX_BODY_BYTES)"
            )
            yield ImportProblem(f"line {number}", message)
            continue
        try:
            yield JsonlLine(number, _decoded(raw, max_bytes=max_bytes))
        except _Refused as refused:
            yield ImportProblem(f"line {number}", str(refused), field=refused.field)
        except (ValueError, RecursionError) as exc:  # a case no check above names
            yield ImportProblem(f"line {number}", f"not readable: {str(exc)[:200]}")


def count_jsonl_items(path: Path) -> int:
    """How many items :func:`read_jsonl` yields for ``path`` (a job's total): its lines
    that are not blank, counted in chunks without holding a line."""
    return sum(1 for _ in _lines(path, keep=0))
