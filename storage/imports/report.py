"""What an import reports: counts stored, skipped and refused; progress; a strict abort.

``storage.imports.store`` fills an :class:`ImportReport` batch by batch (``batches``)
and raises :class:`ImportAborted` when a strict import found problems.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from storage.imports.problems import ImportProblem

__all__ = ["BATCH", "ImportAborted", "ImportProgress", "ImportReport", "batches"]

#: rows per transaction
BATCH = 200


@dataclass
class ImportReport:
    """What an import stored, skipped and could not read."""

    submissions: int = 0
    #: already imported earlier (same source): left as they were
    already_imported: int = 0
    #: SREGym verdicts kept as gradings of the external judge
    sregym_verdicts: int = 0
    #: gradings queued for the workers
    queued: int = 0
    #: attempts without a diagnosis, by outcome: stored, never graded
    not_graded: dict[str, int] = field(default_factory=dict)
    problems: list[ImportProblem] = field(default_factory=list)
    #: rows handled so far: stored, already imported or refused
    rows: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "submissions": self.submissions,
            "already_imported": self.already_imported,
            "sregym_verdicts": self.sregym_verdicts,
            "queued": self.queued,
            "not_graded": dict(self.not_graded),
            "problems": [str(p) for p in self.problems],
        }


#: called after each batch is committed, with the report so far
ImportProgress = Callable[[ImportReport], Awaitable[None]]


class ImportAborted(Exception):
    """A strict import found problems; nothing was stored."""

    def __init__(self, problems: list[ImportProblem]) -> None:
        super().__init__(f"{len(problems)} problem(s); nothing imported")
        self.problems = problems


def batches(items: Iterable[Any]) -> Iterable[list[Any]]:
    """``items`` in lists of ``BATCH``."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
