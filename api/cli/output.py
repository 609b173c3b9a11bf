"""What commands write: a report as a table, CSV or JSON.

A stdout whose encoding is not UTF-8 (``PYTHONIOENCODING=ascii``, a Latin-1 locale)
cannot carry every character a diagnosis or a report holds: JSON is then written with
``\\u`` escapes and tables with Python's backslash escapes (``caf\\xe9``), so the
output still comes, never an encoding error.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

import click

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console

__all__ = ["echo_json", "emit", "print_tables", "stdout_console"]

Command = Callable[..., Any]


def _writes_utf8(stream: Any) -> bool:
    """Whether ``stream`` encodes what is written to it as UTF-8 (or says no encoding)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def echo_json(data: Any, *, indent: int | None = None) -> None:
    """Print JSON-ready ``data`` as JSON on stdout: printable text raw, what a terminal
    would act on (C1 controls, bidirectional overrides) or read as a line's end (U+2028,
    U+2029) as ``\\u`` escapes; it parses to the same values. On a stdout that is not
    UTF-8 every character past ASCII is a ``\\u`` escape."""
    from api.terminal import inert_json

    raw = _writes_utf8(sys.stdout)
    click.echo(inert_json(json.dumps(data, indent=indent, ensure_ascii=not raw)))


class _Escaping:
    """A text stream written through with what its encoding cannot carry as backslash
    escapes (``caf\\xe9``); everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text``, its unencodable characters escaped; its length, as ``write``."""
        encoding = self._stream.encoding
        self._stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def stdout_console(*, piped_width: int | None = None) -> Console:
    """The rich console commands print tables with, on stdout; on a stdout that is not
    UTF-8, characters it cannot carry are printed as backslash escapes. ``piped_width``:
    the width when stdout is not a terminal and ``COLUMNS`` says none (rich's is 80)."""
    from rich.console import Console

    stdout = sys.stdout
    file = stdout if _writes_utf8(stdout) else cast("IO[str]", _Escaping(stdout))
    console = Console(file=file)
    if piped_width is not None and not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(file=file, width=piped_width)
    return console


def emit(report: BaseModel | Any, table: Any, fmt: str) -> None:
    """Print a report (a model or JSON-ready data) as a rich table, CSV or JSON on stdout."""
    from api.tabular import write_csv

    if fmt == "json":
        data = report.model_dump(mode="json") if hasattr(report, "model_dump") else report
        echo_json(data, indent=2)
    elif fmt == "csv":
        write_csv(table, sys.stdout)
    else:
        print_tables([table])


def print_tables(tables: Sequence[Any]) -> None:
    """Print tables (:class:`api.tabular.Tabular`) on stdout, a blank line between them,
    kept to the terminal's width (160 columns when piped, unless ``COLUMNS`` says)."""
    from api.tabular import print_table

    console = stdout_console(piped_width=160)  # piped: do not squeeze the table to 80 columns
    for number, table in enumerate(tables):
        if number:
            console.print()
        print_table(table, console)
