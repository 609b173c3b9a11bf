"""The runtime: one startup path for ``serve``, ``worker``, ``regrade --wait`` and the importers.

A :class:`Runtime` owns what a process of the service needs: the database engine and
the store, the rubric catalog, the judge backend pool, the metrics, the grading workers
and the start-up seeding (rubric versions, the failure-tag vocabulary, the bootstrap
admin token). Everything the settings name on disk is read and checked without the
database when it is built (:func:`read_start_files`: the rubrics, the bootstrap token
file, the failure-tag vocabulary, the canary set), so a command fails, naming the
setting, before it starts anything; ``serve`` checks the same before it migrates::

    async with Runtime(settings, workers=True) as runtime:
        await accept_submission(runtime.services, data, actor=...)

The HTTP app enters it in its lifespan; the command line enters it directly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from sqlalchemy.engine import Engine

from api.adjudication.tag_queries import TagQueries
from api.grading.judge_moves import follow_configured_judge
from api.grading.workers import GradingWorkers
from api.imports.runner import ImportRunner
from api.judges.canary import CanaryLoop
from api.judges.identity import digest_listener
from api.regrade.batch_runner import BatchRunner
from api.service.bootstrap import ensure_bootstrap_admin, read_token_file
from api.service.checkpoints import Checkpointer, checkpoint_target
from api.service.grader_factory import check_reply_budget
from api.service.metrics import Metrics
from api.service.qualification import qualification_on_start
from api.service.secret_key import key_for_database
from api.service.services import BackendPool, RubricCatalog, Services
from api.service.settings import Settings
from api.webhooks.delivery import WebhookDelivery
from api.webhooks.outbox import subscribe as subscribe_outbox
from judge.backends import JudgeBackend
from judge.calibration import GoldError, load_gold
from judge.errors import RubricError
from judge.rubric import Rubric, load_rubric_dir
from judge.screening import preload
from judge.vocabulary import VocabularyError, load_vocabulary
from storage import Store, make_engine, upgrade

__all__ = ["Runtime", "StartFiles", "read_start_files"]

log = logging.getLogger("sre_judge.qualification")
stop_log = logging.getLogger("sre_judge.runtime")


@dataclass(frozen=True)
class StartFiles:
    """What the settings name on disk, read and checked: the rubrics by id (the default
    one among them) and the failure-tag vocabulary (tag -> description)."""

    rubrics: dict[str, Rubric]
    vocabulary: dict[str, str]


def read_start_files(settings: Settings) -> StartFiles:
    """Read and check every file the settings name, without the database: the judge
    profiles as they apply to the configured judges (each one's reply budget below its
    context window), the rubric folder and the default rubric in it, the bootstrap admin
    token file, the failure-tag vocabulary and the canary set (when one is set).
    ValueError naming the setting at fault, so a process refuses to start (and ``serve``
    to migrate) in one line."""
    confirming = [settings.confirm_judge] if settings.confirm_judge else []
    check_reply_budget(settings, [*settings.grading_members, *confirming])
    try:
        rubrics = load_rubric_dir(settings.rubric_dir)
    except RubricError as exc:
        raise ValueError(f"SRE_JUDGE_RUBRIC_DIR: {exc}") from None
    if settings.rubric not in rubrics:
        raise ValueError(
            f"SRE_JUDGE_RUBRIC: the default rubric {settings.rubric!r} is not in "
            f"{settings.rubric_dir} (SRE_JUDGE_RUBRIC_DIR)"
        )
    if settings.bootstrap_admin_token_file is not None:
        try:
            read_token_file(settings.bootstrap_admin_token_file)
        except ValueError as exc:
            raise ValueError(f"SRE_JUDGE_BOOTSTRAP_ADMIN_TOKEN_FILE: {exc}") from None
    try:
        vocabulary = load_vocabulary(settings.failure_tags_file)
    except VocabularyError as exc:
        raise ValueError(f"SRE_JUDGE_FAILURE_TAGS_FILE: {_folded(exc)}") from None
    if settings.canary_set is not None:
        _check_canary_set(settings.canary_set, rubrics[settings.rubric], settings.max_text_bytes)
    return StartFiles(rubrics=rubrics, vocabulary=vocabulary)


def _check_canary_set(path: Path, rubric: Rubric, max_text_bytes: int) -> None:
    """The canary set reads as a labelled set for ``rubric`` (as a canary run reads it:
    texts of at most ``max_text_bytes``)."""
    try:
        text = path.read_bytes().decode("utf-8")
        load_gold(text, rubric, max_text_bytes=max_text_bytes)
    except OSError as exc:
        raise ValueError(f"SRE_JUDGE_CANARY_SET: cannot read {path}: {exc.strerror}") from None
    except (GoldError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"SRE_JUDGE_CANARY_SET: {path} is not a labelled set: {_folded(exc)}"
        ) from None


def _folded(exc: Exception) -> str:
    """A parser's message on one line (YAML's and pydantic's span several), without
    pydantic's links to its documentation."""
    lines = [line for line in str(exc).splitlines() if not line.strip().startswith("For further")]
    return " ".join(" ".join(lines).split())


class Runtime:
    """Store, rubrics, judges, metrics and workers of one process, started and stopped together.

    ``engine`` and ``backends`` (judge spec -> backend) are seams for tests; without them
    the runtime makes its own from the settings and disposes of what it made. With
    ``migrate`` a database never migrated gets the newest schema on entry; one at an
    older revision is refused (:func:`storage.require_newest`), never upgraded under
    the servers and workers of its release (only ``serve`` and ``migrate`` upgrade, and
    ``serve`` does before it builds the app's runtime). ``workers``
    starts the grading workers (``settings.worker_count`` of them) on entry, after
    moving pending gradings of a judge no longer configured to the configured one
    (``api.grading.judge_moves``); ``checkpoints`` the periodic audit checkpoints
    (``SRE_JUDGE_AUDIT_CHECKPOINT``);
    ``import_jobs`` (with ``workers``) the runner of queued import jobs.
    With ``announce`` it logs on entry whether the default judge is qualified on the
    shipped calibration set, and with which verdict kappa. ``create_key`` False: the
    service key must be given, never made here (a worker joins a deployment; a reading
    command changes nothing). ``start_files``: the files :func:`read_start_files` read
    for these settings, not read again.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        engine: Engine | None = None,
        backends: Mapping[str, JudgeBackend] | None = None,
        workers: bool = False,
        migrate: bool = False,
        metrics: Metrics | None = None,
        checkpoints: bool = False,
        import_jobs: bool = False,
        announce: bool = False,
        create_key: bool = True,
        start_files: StartFiles | None = None,
    ) -> None:
        # fail now, naming the setting, not at start-up (``serve`` read them already)
        files = start_files or read_start_files(settings)
        #: the failure-tag vocabulary seeded on start
        self._vocabulary = files.vocabulary
        self._own_engine = engine is None
        self.engine = engine if engine is not None else make_engine(settings.database_url)
        try:
            key = key_for_database(settings, self.engine, create=create_key)
        except BaseException:
            if self._own_engine:
                self.engine.dispose()
            raise
        store = Store(self.engine, key=key)
        subscribe_outbox(store.db)  # webhook deliveries join their events' transactions
        self.services = Services(
            settings=settings,
            store=store,
            rubrics=RubricCatalog(files.rubrics, store),
            backends=BackendPool(settings, backends),
        )
        self.metrics = metrics or Metrics()
        # a new model digest behind a judge's name is stored, and a change announced
        self.services.backends.digests.listen(digest_listener(self.services, self.metrics))
        self.workers = GradingWorkers(
            self.services, count=settings.worker_count, metrics=self.metrics
        )
        #: delivers the webhook outbox; runs wherever grading workers run
        self.webhooks = WebhookDelivery(store, settings)
        #: runs import jobs (``POST /v1/imports``); runs wherever grading workers run
        self.imports = ImportRunner(self.services)
        #: moves regrade jobs' batch engines on; runs wherever grading workers run
        self.batches = BatchRunner(self.services)
        #: the drift canary on a schedule (``SRE_JUDGE_CANARY_INTERVAL``; off at 0)
        self.canary = CanaryLoop(self.services, self.metrics)
        self._start_workers = workers and settings.worker_count > 0
        self._start_imports = workers and import_jobs
        #: periodic audit checkpoints (``serve`` only; to the default file unless configured)
        target = checkpoint_target(settings) if checkpoints else None
        self.checkpointer = (
            Checkpointer(store, target, settings.audit_checkpoint_seconds)
            if target is not None
            else None
        )
        self._migrate = migrate
        self._announce = announce
        #: the detectors and parsers loading in a thread while the workers start
        self._preloading: asyncio.Future[None] | None = None

    @property
    def settings(self) -> Settings:
        """The settings this runtime was built from."""
        return self.services.settings

    @property
    def store(self) -> Store:
        """The store over the runtime's database."""
        return self.services.store

    async def start(self) -> None:
        """Make the schema of a new database (if asked), seed, then start the workers
        (if asked)."""
        if self._migrate:
            await upgrade(self.settings.database_url, new_only=True)
        await self._seed()
        if self._announce:
            settings = self.settings
            rubric = self.services.rubrics.current[settings.rubric]
            log.info(await qualification_on_start(self.store, settings, rubric))
        if self._start_workers:
            # a failure here is the first grading's to report, where the import recurs
            self._preloading = asyncio.ensure_future(asyncio.to_thread(preload))
            # pending gradings of a judge no longer configured follow the configured one
            await follow_configured_judge(self.services, actor=self.workers.worker_id)
            self.workers.start()
            self.webhooks.start()
            self.batches.start()
            self.canary.start()
        if self._start_imports:
            self.imports.start()
        if self.checkpointer is not None:
            self.checkpointer.start()

    async def stop(self) -> None:
        """Stop the workers, close the judges' clients, dispose of an engine of our own.

        The grading workers stop claiming work first (the other parts may take a while
        to stop: a webhook send in flight), then finish what they hold last. Every part
        is stopped even when an earlier one fails (a database error while the import
        runner gives its jobs back must not leave the workers running); the first
        failure is raised once all have stopped, the others are logged."""
        steps: list[Callable[[], Awaitable[object]]] = []
        if self._preloading is not None:
            preloading = self._preloading
            steps.append(lambda: asyncio.gather(preloading, return_exceptions=True))
        steps += [
            self.imports.stop, self.canary.stop, self.batches.stop, self.webhooks.stop,
            self.workers.stop,
        ]  # fmt: skip
        if self.checkpointer is not None:
            steps.append(self.checkpointer.stop)  # after the workers: the final head
        steps.append(self.services.backends.aclose)
        first: Exception | None = None
        try:
            if self._start_workers:
                self.workers.begin_shutdown()
            for step in steps:
                try:
                    await step()
                except Exception as exc:
                    if first is None:
                        first = exc
                    else:
                        stop_log.exception("stopping %s failed as well", step)
        finally:
            if self._own_engine:
                self.engine.dispose()
        if first is not None:
            raise first

    async def _seed(self) -> None:
        settings = self.settings
        if settings.bootstrap_admin_token_file is not None:
            await ensure_bootstrap_admin(self.store, settings.bootstrap_admin_token_file)
        for rubric in self.services.rubrics.current.values():
            await self.store.catalog.save_rubric(rubric)
        await TagQueries(self.store.db).ensure_vocabulary(self._vocabulary)

    async def __aenter__(self) -> Runtime:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
