"""Checking the texts handed in for grading: valid UTF-8, no NUL bytes, within a size.

Every way in (the HTTP API, the importers, the grader itself) checks the ground truth
and the diagnosis with :func:`check_text`, so one limit and one wording apply; files of
JSON Lines handed in are cut into lines by :func:`json_lines`, and a JSON object with a
key given twice is refused (:func:`no_repeated_keys`, :func:`load_json`), not read as
its last value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from judge.errors import InputError

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "RepeatedKey",
    "check_text",
    "json_lines",
    "load_json",
    "no_repeated_keys",
]

#: the largest ground truth or diagnosis accepted, in bytes of UTF-8
DEFAULT_MAX_TEXT_BYTES = 64 * 1024


def check_text(text: str, *, field: str, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> None:
    """Reject text that cannot be graded as given: NUL bytes or over the size limit."""
    if "\x00" in text:
        raise InputError(f"{field} contains NUL bytes", field=field)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InputError(f"{field} is {size} bytes, over the limit of {max_bytes}", field=field)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{field} is not valid UTF-8 text", field=field) from None


def json_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, numbered as an editor numbers them: cut at
    ``\n`` only (a ``\r`` before it dropped). Not ``str.splitlines``, which also cuts at
    U+2028, U+0085 and the like, which JSON strings may hold unescaped: one record would
    be read as two broken ones."""
    return [line.removesuffix("\r") for line in text.split("\n")]


class RepeatedKey(ValueError):
    """A JSON object gives one key twice; ``args[0]`` is the key. ``path`` is where that
    object is, as the keys and list positions that lead to it from the top of the
    document (``(0, "tags")``; ``()`` for the top or when unknown)."""

    path: tuple[str | int, ...] = ()


def no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of a JSON decoder that raises :class:`RepeatedKey` where
    ``json`` would keep a repeated key's last value (which one the writer meant is
    unknown)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise RepeatedKey(key)
        seen[key] = value
    return seen


def load_json(text: str, *, parse_int: Callable[[str], Any] | None = None) -> Any:
    """The value of a JSON text, as ``json.loads`` reads it (``parse_int`` as there), but
    :class:`RepeatedKey`, with its ``path``, where an object gives a key twice (the first
    such object to end). Raises ``ValueError`` (and ``RecursionError``) as ``json.loads``
    does."""
    repeated: list[tuple[RepeatedKey, dict[str, Any]]] = []

    def members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        try:
            return no_repeated_keys(pairs)
        except RepeatedKey as exc:  # read on, to learn where the object is
            value = dict(pairs)
            repeated.append((exc, value))
            return value

    value = json.loads(text, object_pairs_hook=members, parse_int=parse_int)
    if repeated:
        exc, at = repeated[0]
        exc.path = _place(value, at)
        raise exc
    return value


def _place(document: Any, target: object) -> tuple[str | int, ...]:
    """The keys and list positions that lead from ``document`` to the object ``target``
    (compared by identity), without recursion: a document may be nested as deep as
    ``json`` reads."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if value is target:
            return path
        if isinstance(value, dict):
            stack.extend((v, (*path, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(value))))
    return ()
