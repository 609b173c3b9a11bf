"""The store: every persistence operation of the service, one transaction per call."""

from __future__ import annotations

from storage.gradings import GradingReads
from storage.tokens import TokenStore

__all__ = ["Store"]


class Store(GradingReads, TokenStore):
    """Rubric versions, scenarios, submissions, the grading queue, reads, tokens, audit.

    Built from one migrated ``AsyncEngine``::

        store = Store(make_engine(url))

    The parts live in ``catalog``, ``submissions``, ``queue``, ``gradings`` and
    ``tokens``; every public method opens and commits its own transaction.
    """
