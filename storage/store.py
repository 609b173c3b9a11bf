"""The store: one repository per aggregate over one shared database handle.

``Store(engine)`` is the composition root: it opens the handle and wires the
repositories that every feature shares (the catalog, submissions, the queue, reads of
gradings, the judge cache). A feature's own queries live in its
folder under ``api`` and work through ``store.db``. Every public repository method is
one use case in one transaction (``Database.run``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.engine import Engine

from storage.attempts import AttemptReads
from storage.calibration import CalibrationRepository
from storage.canonical import utcnow
from storage.catalog import CatalogRepository
from storage.database import Database
from storage.gradings import GradingReads
from storage.judge_cache import CacheRepository
from storage.judge_digests import JudgeDigestRepository
from storage.keys import ServiceKey
from storage.pending_judges import PendingJudgeRepository
from storage.queue import QueueRepository
from storage.submissions import SubmissionRepository
from storage.tokens import TokenRepository
from storage.web_sessions import WebSessionRepository

__all__ = ["Store"]


class Store:
    """Rubric versions, scenarios, submissions, the grading queue, reads, tokens, audit.

    Built from one migrated ``Engine``::

        store = Store(make_engine(url))
        await store.queue.claim_pending("worker-1", limit=4, lease_seconds=60)
        view = await store.gradings.get(grading_id)
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utcnow,
        key: ServiceKey | None = None,
    ) -> None:
        """Use ``engine`` (migrated); ``clock`` returns aware UTC time (tests move it);
        ``key`` is the service key (``storage.keys``), else a random one for this store's
        lifetime, so nothing it keys can be checked by another process."""
        self.db = Database(engine, clock=clock, key=key)
        self.engine = engine
        #: rubric versions and scenarios
        self.catalog = CatalogRepository(self.db)
        #: scenarios and their ground-truth versions (the same object as catalog.scenarios)
        self.scenarios = self.catalog.scenarios
        #: accepting submissions with their pending gradings
        self.submissions = SubmissionRepository(self.db, self.catalog)
        #: submissions per token against each registered scenario (the attempt limit)
        self.attempts = AttemptReads(self.db)
        #: claiming, completing and deferring pending gradings
        self.queue = QueueRepository(self.db)
        #: pending gradings by judge; moving them to another judge
        self.pending_judges = PendingJudgeRepository(self.db)
        #: reading gradings, their judge calls and history
        self.gradings = GradingReads(self.db)
        #: API tokens
        self.tokens = TokenRepository(self.db)
        #: the judge cache
        self.cache = CacheRepository(self.db)
        #: calibration runs and qualification
        self.calibration = CalibrationRepository(self.db)
        #: the model digests seen behind judges' names, and their changes
        self.judge_digests = JudgeDigestRepository(self.db)
        #: signed-in browsers of the workbench
        self.web_sessions = WebSessionRepository(self.db)
