"""Group commit: the verdicts that workers finish while a write is under way are
stored together, in the next transaction.

On SQLite one transaction writes at a time, and each costs a BEGIN, a read of the
audit chain's head and a COMMIT whatever it holds; on PostgreSQL the chain lock
serializes the audit appends. So the workers of a process hand their verdicts to one
:class:`GroupCommit`, which stores whatever has gathered in one transaction
(``QueueRepository.complete_many``) and answers each worker. Every verdict is still
checked against its lease under a row lock, in the transaction that writes it; a
batch that fails is retried verdict by verdict, so one bad verdict fails alone. A fault
of the database's reach (``database_fault``) is no verdict's: it reaches every worker
of the batch, which hands the same verdict over again after a pause
(``api.grading.workers``), checked against its lease again, so it is never stored twice;
and a worker whose verdict is then refused, the batch's commit having gone through
unacknowledged, knows to look whether its verdict landed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from judge.rubric import Rubric
from storage import FinishedGrading
from storage.errors import database_fault
from storage.queue import QueueRepository

__all__ = ["GroupCommit"]

log = logging.getLogger("sre_judge.workers")

#: verdicts per transaction at most
MAX_BATCH = 64


class GroupCommit:
    """Stores the verdicts handed to it, several per transaction."""

    def __init__(self, queue: QueueRepository, current: Mapping[str, Rubric]) -> None:
        """Store through ``queue``; ``current``: the rubric files' current versions by id
        (``QueueRepository.complete_many``)."""
        self._queue = queue
        self._current = current
        self._waiting: list[tuple[FinishedGrading, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def complete(self, item: FinishedGrading) -> bool:
        """Store ``item`` (in a transaction with others); whether it was stored.

        Raises the fault of the database's reach its batch met, or what storing it
        alone raised.
        """
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="group-commit")
        return await asyncio.shield(future)

    async def _write(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            if len(batch) == 1:
                await self._one_by_one(batch)
                continue
            try:
                items = [item for item, _ in batch]
                stored = await self._queue.complete_many(items, current=self._current)
            except Exception as exc:
                if database_fault(exc):
                    _answer(batch, exc)
                    continue
                log.warning("a group commit of %d verdicts failed; one by one", len(batch))
                await self._one_by_one(batch)
                continue
            for (_, future), done in zip(batch, stored, strict=True):
                if not future.done():
                    future.set_result(done)

    async def _one_by_one(self, batch: list[tuple[FinishedGrading, asyncio.Future[bool]]]) -> None:
        for item, future in batch:
            try:
                done = await self._queue.complete_many([item], current=self._current)
            except Exception as exc:
                _answer([(item, future)], exc)
            else:
                if not future.done():
                    future.set_result(done[0])


def _answer(batch: list[tuple[FinishedGrading, asyncio.Future[bool]]], error: Exception) -> None:
    """Raise ``error`` to the workers waiting on ``batch``."""
    for _, future in batch:
        if not future.done():
            future.set_exception(error)
