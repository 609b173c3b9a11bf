"""Reading a bulk load of scenarios: JSON Lines or YAML, each item a scenario.

JSON Lines: one object a line (blank lines and lines starting with ``#`` skipped).
YAML: a list of mappings, or a mapping whose ``scenarios`` key holds that list; JSON
the same, or one object. Every item is validated before anything is stored; the first
bad one is an InvalidRequest naming it as ``items[i].field`` (``i`` from 0, in file
order; a place inside written as a JSON path, ``items[i].tags[0]``) in its field, and
as ``item n`` or ``line n`` (from 1, as an editor numbers lines) in its detail. A key
given twice in one object or mapping is refused, never read as its last value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from api.scenarios.schemas import ScenarioCreate
from api.service.errors import InvalidRequest, body_path
from judge.errors import InputError
from judge.inputs import RepeatedKey, check_text, json_lines, load_json
from judge.yaml_text import load_yaml

__all__ = [
    "MAX_ITEMS",
    "LoadFormat",
    "ScenarioList",
    "ScenarioLoad",
    "detect_format",
    "parse_scenarios",
]

#: scenarios in one load at most (SREGym has about 90 problems)
MAX_ITEMS = 10_000
LoadFormat = Literal["jsonl", "yaml", "json"]
#: the scenarios of a JSON load (MAX_ITEMS is not stated: by default the body's size
#: limit, 413, comes first)
_Items = Annotated[list[ScenarioCreate], Field(min_length=1)]


class ScenarioList(BaseModel):
    """The scenarios of a load under the one key `scenarios`."""

    model_config = ConfigDict(extra="forbid")

    scenarios: _Items


def _exactly_one(schema: dict[str, Any]) -> None:
    schema["oneOf"] = schema.pop("anyOf")  # a list, an object of one key, or one scenario


class ScenarioLoad(RootModel[_Items | ScenarioList | ScenarioCreate]):
    """A load in JSON: a list of scenarios, `{"scenarios": [...]}` or one scenario, their
    ids distinct."""

    # the JSON Schema of the route's JSON body; parse_scenarios reads every format and
    # checks what no schema states (distinct ids, a key given twice, a ground truth's size)
    model_config = ConfigDict(json_schema_extra=_exactly_one)


def _why(exc: Exception) -> str:
    """What is wrong with a document that could not be parsed."""
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _json_path(place: Sequence[str | int]) -> str:
    """A place in an item, as the keys and list positions that lead to it, written as a
    JSON path (``tags[0]``; ``""`` for the item itself)."""
    return body_path(".".join(str(part) for part in place)) if place else ""


def _item_field(index: int, place: Sequence[str | int]) -> str:
    """The ``field`` of a place in item ``index``: ``items[0]``, ``items[0].tags[0]``."""
    inside = _json_path(place)
    return f"items[{index}]" + (f".{inside}" if inside else "")


def _in_items(place: tuple[str | int, ...], fmt: LoadFormat) -> tuple[int, tuple[str | int, ...]]:
    """Which item a place from the top of a document is in, and the place in that item;
    ``(-1, place)`` for a place outside every item (the key ``scenarios`` itself)."""
    if isinstance(place[0], int):  # a list of items
        return place[0], place[1:]
    if place[0] == "scenarios" and len(place) > 2 and isinstance(place[1], int):
        return place[1], place[2:]
    if place[0] != "scenarios" and fmt == "json":  # one JSON object, the one item
        return 0, place
    return -1, place


def _key_twice(exc: RepeatedKey, where: str, field: str) -> InvalidRequest:
    """The refusal of a key given twice, which ``where`` and ``field`` name (in YAML,
    with the line and column of the second)."""
    mark = getattr(exc, "problem_mark", None)
    at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return InvalidRequest(f"{where}the key {exc.args[0]!r} is given twice{at}", field=field)


def _jsonl(text: str) -> list[tuple[str, Any]]:
    items = []
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            items.append((f"line {number}", load_json(line)))
        except RepeatedKey as exc:
            field = _item_field(len(items), (*exc.path, exc.args[0]))
            raise _key_twice(exc, f"line {number}: ", field) from None
        except (ValueError, RecursionError) as exc:
            raise InvalidRequest(
                f"line {number} is not JSON: {_why(exc)}", field=f"items[{len(items)}]"
            ) from None
    return items


def _document(text: str, fmt: LoadFormat) -> list[tuple[str, Any]]:
    """The items of a YAML or JSON document: a list, ``{"scenarios": [...]}`` or, in
    JSON, one scenario object."""
    try:
        loaded = load_json(text) if fmt == "json" else load_yaml(text)
    except RepeatedKey as exc:  # before YAMLError: a RepeatedYamlKey is one too
        index, place = _in_items((*exc.path, exc.args[0]), fmt)
        if index < 0:
            raise _key_twice(exc, "", "body") from None
        raise _key_twice(exc, f"item {index + 1}: ", _item_field(index, place)) from None
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise InvalidRequest(f"not {fmt.upper()}: {_why(exc)}", field="body") from None
    if isinstance(loaded, dict) and set(loaded) == {"scenarios"}:
        loaded = loaded["scenarios"]
    elif isinstance(loaded, dict) and fmt == "json":
        loaded = [loaded]
    if not isinstance(loaded, list):
        raise InvalidRequest(
            f"{fmt.upper()} must be a list of scenarios or a mapping with a 'scenarios' list",
            field="body",
        )
    return [(f"item {i + 1}", item) for i, item in enumerate(loaded)]


def detect_format(text: str) -> LoadFormat:
    """JSON when the whole text is one JSON document (a list or an object, pretty-printed
    or not); else JSON Lines when the first line that is not blank or a comment is an
    object; else YAML."""
    if text.lstrip()[:1] in ("[", "{"):
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            return "json"
    for line in json_lines(text):
        if line.strip() and not line.lstrip().startswith("#"):
            return "jsonl" if line.lstrip().startswith("{") else "yaml"
    return "jsonl"


def _validated(index: int, where: str, raw: Any, max_bytes: int) -> ScenarioCreate:
    try:
        item = ScenarioCreate.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = _json_path(error["loc"])
        field = _item_field(index, error["loc"])
        raise InvalidRequest(f"{where}: {loc or 'item'}: {error['msg']}", field=field) from None
    try:
        check_text(item.ground_truth, field="ground_truth", max_bytes=max_bytes)
    except InputError as exc:  # named by its item or line, as every bad item is
        raise InvalidRequest(f"{where}: {exc}", field=f"items[{index}].ground_truth") from None
    texts = [("id", item.id), ("title", item.title or ""), ("note", item.note)]
    texts += [(f"tags[{i}]", tag) for i, tag in enumerate(item.tags or ())]
    for name, text in [*texts, ("ground_truth", item.ground_truth)]:
        if "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text):
            raise InvalidRequest(
                f"{where}: {name} holds a NUL or a lone surrogate", field=f"items[{index}].{name}"
            )
    return item


def parse_scenarios(
    text: str, *, fmt: LoadFormat | None = None, max_bytes: int
) -> list[ScenarioCreate]:
    """The scenarios of a load, all valid and with distinct ids; InvalidRequest otherwise.
    A byte order mark at the start is no part of the text."""
    text = text.removeprefix("\ufeff")
    fmt = fmt or detect_format(text)
    raw = _jsonl(text) if fmt == "jsonl" else _document(text, fmt)
    if not raw:
        raise InvalidRequest("the load holds no scenario", field="body")
    if len(raw) > MAX_ITEMS:
        raise InvalidRequest(f"at most {MAX_ITEMS} scenarios a load", field="body")
    items: list[ScenarioCreate] = []
    # where each id was first given, as ``detail`` numbers it (``item 1``, ``line 1``)
    seen: dict[str, str] = {}
    for index, (where, value) in enumerate(raw):
        item = _validated(index, where, value, max_bytes)
        if item.id in seen:
            raise InvalidRequest(
                f"{where}: id {item.id!r} is also {seen[item.id]}", field=f"items[{index}].id"
            )
        seen[item.id] = where
        items.append(item)
    return items
