"""An export gives the event loop a turn every few gradings (and SREGym rows) it
streams: formatting a batch of 500 in one go held up the graders and requests of the
process for about a quarter of a second."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.reports.export_reads import TURN_EVERY, ExportReads
from api.reports.filters import ReportFilter
from api.reports.sregym_row_reads import OriginalRowReads
from judge.rubric import load_rubric_dir
from storage import Store
from tests.storage.helpers import sregym_rubric
from tests.support.sregym_results import write_sregym_results


async def _turns_between(items: AsyncIterator[Any]) -> list[int]:
    """For each item after the first: how many turns another task had since the last."""
    turns = 0
    running = True

    async def other_task() -> None:
        nonlocal turns
        while running:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(other_task())
    seen, last = [], None
    try:
        async for _ in items:
            if last is not None:
                seen.append(turns - last)
            last = turns
    finally:
        running = False
        await task
    return seen


async def test_exports_give_the_loop_a_turn_between_items(store: Store, tmp_path: Path) -> None:
    fixture = write_sregym_results(tmp_path)
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root),
        read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )
    async with ExportReads(store.db, load_rubric_dir()).open(ReportFilter(), batch=20) as export:
        gradings = await _turns_between(export.gradings)
    async with OriginalRowReads(store.db, load_rubric_dir()).open(
        ReportFilter(), batch=20
    ) as original:
        rows = await _turns_between(original.rows)
    assert len(gradings) >= 40 and len(rows) == 44
    # within a batch of 20 as across batches: a turn in every TURN_EVERY items
    for between in (gradings, rows):
        windows = [between[i : i + TURN_EVERY] for i in range(len(between) - TURN_EVERY + 1)]
        assert min(sum(window) for window in windows) >= 1, between
