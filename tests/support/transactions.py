"""Counting what a request costs the database: transactions begun and statements sent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["QUIET", "Counted", "counting"]

#: ``api_client`` settings of a server that only answers requests: no workers, deliveries
#: or checkpoints begin transactions of their own while a request's are counted
QUIET = {"start_workers": False, "audit_checkpoint": "off"}


@dataclass
class Counted:
    """Transactions begun and statements sent (BEGIN and COMMIT among them on SQLite)."""

    transactions: int = 0
    statements: int = 0


@contextmanager
def counting(engine: Engine) -> Iterator[Counted]:
    """Count what ``engine`` is asked inside the block."""
    counted = Counted()

    def begun(_connection: Any) -> None:
        counted.transactions += 1

    def sent(*_args: Any) -> None:
        counted.statements += 1

    event.listen(engine, "begin", begun)
    event.listen(engine, "before_cursor_execute", sent)
    try:
        yield counted
    finally:
        event.remove(engine, "begin", begun)
        event.remove(engine, "before_cursor_execute", sent)
