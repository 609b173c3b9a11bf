"""The store: every persistence operation of the service, one transaction per call."""

from __future__ import annotations

from storage.agreement import AgreementReads
from storage.calibration import CalibrationStore
from storage.exports import ExportReads
from storage.gradings import GradingReads
from storage.imports.store import ImportStore
from storage.judge_cache import CacheStore
from storage.overrides import OverrideStore
from storage.regrade.flips import FlipReads
from storage.regrade.jobs import RegradeStore
from storage.review import ReviewStore
from storage.tags import TagStore
from storage.tokens import TokenStore
from storage.votes import VoteReads

__all__ = ["Store"]


class Store(
    GradingReads,
    TokenStore,
    OverrideStore,
    ReviewStore,
    TagStore,
    ExportReads,
    RegradeStore,
    ImportStore,
    CacheStore,
    FlipReads,
    AgreementReads,
    CalibrationStore,
    VoteReads,
):
    """Rubric versions, scenarios, submissions, the grading queue, reads, tokens, audit.

    Built from one migrated ``AsyncEngine``::

        store = Store(make_engine(url))

    The parts live in ``catalog``, ``submissions``, ``queue``, ``gradings`` and
    ``tokens``; every public method opens and commits its own transaction.
    """
