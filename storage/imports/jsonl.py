"""Reading historic submissions from JSON lines, with the line number in every error.

Each line is one object ``{diagnosis, ground_truth | scenario_id, agent, model,
run_id, attempt, created_at, metadata}``. A ``created_at`` without an offset is taken
as UTC. Nothing here touches the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from judge.errors import InputError
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, check_text
from storage.imports.problems import ImportProblem

__all__ = ["JsonlLine", "JsonlSubmission", "read_jsonl"]


class JsonlSubmission(BaseModel):
    """One historic submission."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    diagnosis: StrictStr
    ground_truth: StrictStr | None = None
    scenario_id: StrictStr | None = Field(default=None, max_length=128)
    agent: StrictStr | None = Field(default=None, max_length=200)
    model: StrictStr | None = Field(default=None, max_length=200)
    run_id: StrictStr | None = Field(default=None, max_length=200)
    attempt: StrictInt | None = Field(default=None, ge=0)
    created_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _exactly_one_truth(self) -> JsonlSubmission:
        if (self.scenario_id is None) == (self.ground_truth is None):
            raise ValueError("give exactly one of scenario_id and ground_truth")
        return self

    def created_utc(self) -> datetime | None:
        """``created_at`` as aware UTC (naive values are taken as UTC)."""
        if self.created_at is None:
            return None
        if self.created_at.utcoffset() is None:
            return self.created_at.replace(tzinfo=UTC)
        return self.created_at.astimezone(UTC)


@dataclass(frozen=True)
class JsonlLine:
    """A valid line and where it was."""

    line: int
    submission: JsonlSubmission


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "line"
        message = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def _parse(text: str, *, max_bytes: int) -> JsonlSubmission:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    try:
        item = JsonlSubmission.model_validate(data)
    except ValidationError as exc:
        raise ValueError(_describe(exc)) from None
    try:
        check_text(item.diagnosis, field="diagnosis", max_bytes=max_bytes)
        if item.ground_truth is not None:
            check_text(item.ground_truth, field="ground_truth", max_bytes=max_bytes)
    except InputError as exc:
        raise ValueError(f"{exc.field}: {exc}") from None
    return item


def read_jsonl(
    path: Path, *, max_bytes: int = DEFAULT_MAX_TEXT_BYTES
) -> Iterator[JsonlLine | ImportProblem]:
    """Every line of ``path``: a valid submission or a problem naming the line."""
    with path.open(encoding="utf-8", errors="strict") as handle:
        number = 0
        while True:
            try:
                text = handle.readline()
            except UnicodeDecodeError as exc:
                yield ImportProblem(f"line {number + 1}", f"not valid UTF-8: {exc.reason}")
                return
            if not text:
                return
            number += 1
            if not text.strip():
                continue
            try:
                yield JsonlLine(number, _parse(text, max_bytes=max_bytes))
            except ValueError as exc:
                yield ImportProblem(f"line {number}", str(exc))
