"""A storage fault in the middle of an export: the reader raises after some gradings.

Stands for the database going away while an export is read (a restart, a lost
connection, a statement timeout), which no test database can be made to do on cue.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from api.reports.export_reads import ExportedGrading, ExportReads, GradingExport

__all__ = ["LOST_CONNECTION", "fail_exports_after"]

LOST_CONNECTION = "server closed the connection unexpectedly"


async def _cut(
    gradings: AsyncIterator[ExportedGrading], rows: int
) -> AsyncIterator[ExportedGrading]:
    count = 0
    async for item in gradings:
        if count == rows:
            raise OperationalError("SELECT gradings ...", {}, ConnectionResetError(LOST_CONNECTION))
        yield item
        count += 1


def fail_exports_after(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """Make every export's reader raise once ``rows`` gradings were read."""
    original = ExportReads.open

    @asynccontextmanager
    async def failing(
        self: ExportReads, filters: Any, **options: Any
    ) -> AsyncIterator[GradingExport]:
        async with original(self, filters, **options) as export:
            yield replace(export, gradings=_cut(export.gradings, rows))

    monkeypatch.setattr(ExportReads, "open", failing)
