"""Text from outside this program, made inert before it is shown in a terminal.

Agent names, scenario ids, imported files, a judge's evidence and a server's error
messages may hold what a terminal acts on: ESC starts the sequences that set a window's
title, write a hyperlink or the clipboard, move the cursor or rewrite what was printed;
a bidirectional override reorders the characters shown. Every command prints such text
through :func:`terminal_text` (and as plain text, never as rich markup).
"""

from __future__ import annotations

import re

__all__ = ["LINE_BREAKS", "UNSAFE_CHARACTERS", "inert_json", "terminal_text"]

#: what a terminal would act on, or what reorders the characters shown: the C0 controls
#: but newline and tab (ESC starts the sequences that set a title, a hyperlink, the
#: clipboard...), DEL, the C1 controls and Unicode's bidirectional overrides, isolates
#: and marks (LRM, RLM, ALM)
UNSAFE_CHARACTERS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


#: what ends or splits a line besides: newline, tab and Unicode's line and paragraph
#: separators (a record printed one a line must not look like two)
LINE_BREAKS = re.compile("[\n\t\u2028\u2029]")


def _escaped(one: re.Match[str]) -> str:
    return one.group().encode("unicode_escape").decode()


def terminal_text(text: str, *, one_line: bool = False) -> str:
    """``text`` inert for a terminal: each control character and bidirectional override
    shown as its escape (``\\x1b``, ``\\u202e``) instead of acting; newlines and tabs
    kept, unless ``one_line`` (a listing of one record a line, a log line: a newline in
    an agent's or a server's text must not forge another record). For any text that did
    not come from this program (print it without markup)."""
    text = UNSAFE_CHARACTERS.sub(_escaped, text)
    return LINE_BREAKS.sub(_escaped, text) if one_line else text


#: what JSON leaves raw in its strings that a terminal acts on (DEL, the C1 controls, the
#: bidirectional overrides) or that a reader takes for a line's end (U+2028, U+2029)
_RAW_IN_JSON = re.compile(f"{UNSAFE_CHARACTERS.pattern}|[\u2028\u2029]")


def _json_escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def inert_json(text: str) -> str:
    """JSON text as ``json.dumps(..., ensure_ascii=False)`` wrote it, with what a
    terminal would act on or read as a line's end written as ``\\u`` escapes: it parses
    to the same values, and only what is printable stays raw."""
    return _RAW_IN_JSON.sub(_json_escape, text)
