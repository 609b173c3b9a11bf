"""A titled table with notes, in one shape for the terminal (rich) and for CSV.

Every command that prints rows builds a :class:`Tabular`; :func:`print_table` shows it
in the terminal (floats with three decimals, a ``*ci_low``/``*ci_high`` pair as one
``low–high`` column), :func:`write_csv` writes it in full.

In the terminal a table keeps to the console's width without losing anything: names
wrap (a name longer than its column folds onto the next line, never cut to "…"),
headers wrap at their spaces, numbers and intervals are never cut, and every cell stays
on its row's lines (a newline in a name is shown as ``\\n``). A table too wide for the
terminal even so is printed in blocks, one under the other, each repeating the leading
name columns (agent, arm, kind, question ...) so that every row stays readable; the
table's ``headline`` columns (n, the rate and its interval, the p-value) come first, in
the first block, the name columns narrowed (down to their longest header word) to make
room for them. Name columns too many to fit beside any other column even at that width
are repeated only as far as they fit; the later ones are placed in blocks like any
other column, as are all but the first column of a table with no rows.

What a table shows comes from submitters, imported files and judges (agent names,
scenario ids, tags, a judge's evidence): ``api.terminal.terminal_text`` makes it inert
before it reaches a terminal, and cells, headers, titles and notes are printed as plain
text, never read as rich markup (``[link=...]``, ``[bold]``) or emoji codes.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from api.terminal import terminal_text

__all__ = ["Tabular", "inert_cells", "print_table", "write_csv"]

#: what a spreadsheet reads a cell beginning with as a formula (or a DDE command)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class Tabular:
    """A titled table with notes printed under it.

    ``headline`` names the columns a terminal shows first, right after the leading
    name columns (a narrow terminal prints a wide table in blocks: these go in the
    first); CSV keeps ``columns`` in their order.
    """

    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    headline: list[str] = field(default_factory=list)


#: the narrowest a name column is made before its names wrap (they wrap, never elide)
NAME_MIN_WIDTH = 12
#: spaces between two columns in the terminal
_GAP = 2


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if column == "p_value" else f"{value:.3f}"
    return terminal_text(str(value), one_line=True)


def _terminal_columns(columns: list[str]) -> list[tuple[str, list[int]]]:
    """Header and source columns; each ``*ci_low``/``*ci_high`` pair merges into one."""
    merged: list[tuple[str, list[int]]] = []
    for i, column in enumerate(columns):
        if column.endswith("ci_high") and merged and columns[i - 1].endswith("ci_low"):
            prefix = column.removesuffix("ci_high")
            header = terminal_text(f"{prefix.replace('_', ' ')}95% CI", one_line=True)
            merged[-1] = (header, [i - 1, i])
        else:
            merged.append((terminal_text(column, one_line=True), [i]))
    return merged


@dataclass
class _Column:
    """One terminal column: its header, cells, and the widths it takes: ``tightest``
    when the terminal is short of room, ``narrowest`` when it is not, up to ``widest``."""

    header: str
    sources: list[int]
    cells: list[str]
    numeric: bool
    tightest: int = 0
    narrowest: int = 0
    widest: int = 0

    def __post_init__(self) -> None:
        header_words = max((len(w) for w in self.header.split()), default=0)
        longest_cell = max((len(c) for c in self.cells), default=0)
        self.widest = max(len(self.header), longest_cell, 1)
        if self.numeric:  # a number or an interval is never cut: as wide as the widest
            self.narrowest = self.tightest = max(header_words, longest_cell, 1)
        else:  # names wrap at spaces, long words fold: never narrower than a header word
            self.narrowest = max(header_words, min(NAME_MIN_WIDTH, longest_cell), 1)
            self.tightest = max(header_words, 1)


def _columns(table: Tabular) -> list[_Column]:
    found = []
    for header, sources in _terminal_columns(table.columns):
        cells = []
        for row in table.rows:
            parts = [_cell(table.columns[i], row[i]) for i in sources]
            cells.append("-" if set(parts) == {"-"} else "–".join(parts))
        numeric = any(isinstance(row[sources[0]], int | float) for row in table.rows)
        found.append(_Column(header, sources, cells, numeric))
    return found


def _needed(columns: list[_Column], block: list[int], *, tight: bool = False) -> int:
    """The width ``block`` takes with its columns at their narrowest (or tightest)."""
    sizes = (columns[i].tightest if tight else columns[i].narrowest for i in block)
    return sum(sizes) + _GAP * (len(block) - 1)


def _repeated(columns: list[_Column], names: list[int], headline: list[int], width: int) -> int:
    """How many of the leading name columns every block repeats: as many as fit, at their
    tightest, beside each other column and (where they fit at all) all the headline
    columns; at least the first."""
    for count in range(len(names), 1, -1):
        lead = names[:count]
        beside_each = all(
            _needed(columns, [*lead, i], tight=True) <= width
            for i in range(len(columns))
            if i not in lead
        )
        with_headline = _needed(columns, [*lead, *headline], tight=True) <= width
        if beside_each and (with_headline or _needed(columns, headline, tight=True) > width):
            return count
    return min(len(names), 1)


def _blocks(table: Tabular, columns: list[_Column], width: int) -> list[list[int]]:
    """The columns of each block, by index: the leading name columns in every block (only
    the first in a table with no rows, whose other columns keep their order), the
    headline columns first, all in the first block if they fit with the names at their
    tightest, then as many others as fit ``width`` at their narrowest."""
    names: list[int] = []
    for i, column in enumerate(columns):
        if column.numeric or (names and not table.rows):
            break
        names.append(i)
    headline = set(table.headline) if table.rows else set()  # no figures to put first

    def is_headline(i: int) -> bool:
        return bool(headline & {table.columns[source] for source in columns[i].sources})

    first = [i for i in range(len(names), len(columns)) if is_headline(i)]
    names = names[: _repeated(columns, names, first, width)]
    # headline columns first, each group in table order
    rest = sorted(range(len(names), len(columns)), key=lambda i: not is_headline(i))

    blocks: list[list[int]] = []
    current = list(names)
    for i in rest:
        fits = _needed(columns, [*current, i], tight=is_headline(i)) <= width
        if len(current) > len(names) and not fits:
            blocks.append(current)
            current = list(names)
        current.append(i)
    blocks.append(current)
    return blocks


def _widths(columns: list[_Column], block: list[int], width: int) -> list[int]:
    """Each column of the block at its tightest, then the room left given to the narrowest
    name columns until each is at its narrowest, then to the columns nearest their widest
    first (a header unwrapped for a character or two), the rest to the widest names."""
    widths = [columns[i].tightest for i in block]
    room = width - _needed(columns, block, tight=True)
    while room > 0:
        short = [k for k in range(len(block)) if widths[k] < columns[block[k]].narrowest]
        if not short:
            break
        widths[min(short, key=lambda k: widths[k])] += 1
        room -= 1
    by_shortfall = sorted(range(len(block)), key=lambda k: columns[block[k]].widest - widths[k])
    for k in by_shortfall:
        shortfall = max(0, columns[block[k]].widest - widths[k])
        if shortfall > room and columns[block[k]].numeric:
            continue  # a header wraps all the same: the room is better spent on names
        grant = max(0, min(room, shortfall))
        widths[k] += grant
        room -= grant
    return widths


def print_table(table: Tabular, console: Console) -> None:
    """The table in the terminal, intervals as ``low–high``, then its notes.

    Kept to ``console.width``: names wrap and never become "…"; a table too wide even
    so is printed in blocks (see the module's docstring), none of its columns dropped.
    """
    columns = _columns(table)
    blocks = _blocks(table, columns, console.width)
    for number, block in enumerate(blocks):
        if number:
            console.print()
        title = terminal_text(table.title if number == 0 else f"{table.title} (continued)")
        view = Table(
            title=Text(title),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        for i, size in zip(block, _widths(columns, block, console.width), strict=True):
            column = columns[i]
            view.add_column(
                Text(column.header),
                justify="right" if column.numeric else "left",
                width=size,
                overflow="fold",
            )
        for r in range(len(table.rows)):
            view.add_row(*(Text(columns[i].cells[r]) for i in block))
        console.print(view)
    if not table.rows:
        console.print("(no rows: nothing matches the filter)")
    for note in table.notes:
        console.print(Text(f"note: {terminal_text(note)}", style="dim"))


def inert_cells(values: Iterable[Any]) -> list[Any]:
    """A CSV row's values with every text that a spreadsheet would run as a formula
    (beginning ``=``, ``+``, ``-``, ``@``, a tab or a carriage return: an agent's name, a
    run id, a tag note) prefixed with ``'``, which spreadsheets show as text; numbers are
    left as they are. For CSV meant for people: SREGym's round-trip CSV stays byte for
    byte."""
    return [
        f"'{value}" if isinstance(value, str) and value.startswith(_FORMULA_START) else value
        for value in values
    ]


def write_csv(table: Tabular, stream: TextIO) -> None:
    """The table as CSV with a header row; empty cells for missing values, text a
    spreadsheet would run made inert (:func:`inert_cells`)."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(inert_cells(table.columns))
    writer.writerows(inert_cells(row) for row in table.rows)
