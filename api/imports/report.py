"""What an import reports: counts stored, skipped, graded here already, refused and in
conflict; progress; a strict abort.

``api.imports.queries`` fills an :class:`ImportReport` batch by batch (``read_batches``:
each batch read in a worker thread) and raises :class:`ImportAborted` when a strict
import found problems.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from api.imports.problems import ImportProblem

__all__ = [
    "BATCH",
    "ImportAborted",
    "ImportProgress",
    "ImportReport",
    "read_batches",
]

#: rows per transaction
BATCH = 200
#: outcomes of attempts stored but never graded
_OUTCOMES = ("no_submission", "timed_out", "deploy_failed")


@dataclass
class ImportReport:
    """What an import stored, skipped and could not read."""

    submissions: int = 0
    #: already imported earlier (same source): left as they were
    already_imported: int = 0
    #: SREGym verdicts kept as gradings of the external judge
    sregym_verdicts: int = 0
    #: SREGym attempts this service graded itself (the client's SREGym drop-in wrote the
    #: row, naming a grading in this database): nothing stored; each counted once, its
    #: other copies already imported
    graded_here: int = 0
    #: gradings queued for the workers
    queued: int = 0
    #: attempts without a diagnosis, by outcome: stored, never graded
    not_graded: dict[str, int] = field(default_factory=dict)
    problems: list[ImportProblem] = field(default_factory=list)
    #: rows that repeat an imported attempt's key with other content: left out, the
    #: stored one kept
    conflicts: list[ImportProblem] = field(default_factory=list)
    #: rows handled so far: stored, already imported, graded here, in conflict or refused
    rows: int = 0
    #: all the rows refused and all in conflict, where ``problems`` and ``conflicts`` list
    #: only the first of them (as a server's import job keeps them); None: all are listed
    problems_total: int | None = None
    conflicts_total: int | None = None
    #: the gradings ``graded_here`` counted, in the order met
    graded_here_ids: dict[str, None] = field(default_factory=dict, init=False, repr=False)

    @property
    def problem_count(self) -> int:
        """How many rows were refused, listed or not."""
        return len(self.problems) if self.problems_total is None else self.problems_total

    @property
    def conflict_count(self) -> int:
        """How many rows were in conflict, listed or not."""
        return len(self.conflicts) if self.conflicts_total is None else self.conflicts_total

    def mark(self) -> tuple[int, ...]:
        """Where the report stands, for :meth:`rewind` (when a transaction is rolled back)."""
        graded = tuple(self.not_graded.get(k, 0) for k in _OUTCOMES)
        counts = (self.submissions, self.already_imported, self.sregym_verdicts, self.queued)
        listed = (len(self.problems), len(self.conflicts), len(self.graded_here_ids))
        return (*counts, self.graded_here, *listed, self.rows, *graded)

    def rewind(self, mark: tuple[int, ...]) -> None:
        """Back to where :meth:`mark` was taken."""
        self.submissions, self.already_imported, self.sregym_verdicts, self.queued = mark[:4]
        self.graded_here = mark[4]
        del self.problems[mark[5] :]
        del self.conflicts[mark[6] :]
        for grading_id in list(self.graded_here_ids)[mark[7] :]:
            del self.graded_here_ids[grading_id]
        self.rows = mark[8]
        self.not_graded = {k: n for k, n in zip(_OUTCOMES, mark[9:], strict=True) if n}

    def count_graded_here(self, grading_id: str) -> None:
        """An attempt this service graded (``grading_id``) met: ``graded_here`` the first
        time in this import, already imported for its other copies."""
        if grading_id in self.graded_here_ids:
            self.already_imported += 1
        else:
            self.graded_here_ids[grading_id] = None
            self.graded_here += 1

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "submissions": self.submissions,
            "already_imported": self.already_imported,
            "sregym_verdicts": self.sregym_verdicts,
            "graded_here": self.graded_here,
            "queued": self.queued,
            "not_graded": dict(self.not_graded),
            "problems": [str(p) for p in self.problems],
            "conflicts": [str(p) for p in self.conflicts],
        }


#: called after each batch is committed, with the report so far
ImportProgress = Callable[[ImportReport], Awaitable[None]]


class ImportAborted(Exception):
    """A strict import found problems or conflicts; nothing was stored.

    ``problems`` lists them (all of them, or the first a server's import job kept);
    ``conflicts`` are the rows found repeating an imported attempt with other content;
    ``count`` counts both, all of them."""

    def __init__(
        self,
        problems: list[ImportProblem],
        *,
        conflicts: Iterable[ImportProblem] = (),
        count: int | None = None,
    ) -> None:
        self.problems = problems
        self.conflicts = list(conflicts)
        self.count = len(problems) + len(self.conflicts) if count is None else count
        super().__init__(f"{self.count} problem(s); nothing imported")


def _batches(items: Iterable[Any], *, size: int) -> Iterable[list[Any]]:
    """``items`` in lists of ``size``."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def read_batches(items: Iterable[Any], *, size: int = BATCH) -> AsyncIterator[list[Any]]:
    """``items`` in lists of ``size`` (the last shorter), each list read in a worker
    thread: reading rows (parsing, checking, redacting: about 1.5 ms an SREGym row with a
    trace) never holds up the event loop that the graders share."""
    lists = iter(_batches(items, size=size))
    while (batch := await asyncio.to_thread(next, lists, None)) is not None:
        yield batch
