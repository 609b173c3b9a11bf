"""Prometheus metrics, one ``CollectorRegistry`` per app (tests never share one).

Counters are recorded where things happen (submissions in the route, judge calls and
outcomes in the workers); the queue gauges are computed at scrape time from the
store's ``queue.depth()``, and so is the progress of every regrade job that has not
ended (an ended job drops out). Every name starts with ``sre_judge_``. The families of
the judge's calls (calls, retries, attempt durations, tokens) are served to an admin
only (:data:`ADMIN_ONLY_FAMILIES`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from datetime import UTC, datetime

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from api.service.services import Services
from judge.spec import judge_identity
from judge.verdict import GradingResult
from storage.regrade.progress import active_jobs

__all__ = ["ADMIN_ONLY_FAMILIES", "JUDGE_LATENCY_BUCKETS", "Metrics"]

log = logging.getLogger("sre_judge.metrics")

#: seconds; a small local model takes seconds to minutes per call
JUDGE_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
_HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_JUDGE = ("backend", "model")
#: the families an admin's scrape only shows, those that move with a grading's judge
#: calls: how many calls a grading makes depends on a registered scenario's hidden ground
#: truth (extraction answers in code what its header gives, so a control scenario has
#: every question asked; a confirming judge is asked about some passes only), and the
#: tokens grow by each prompt's size, that ground truth included; a submitter scraping
#: before and after one grading would learn of it from any of them
ADMIN_ONLY_FAMILIES = frozenset(
    {
        "sre_judge_judge_calls",
        "sre_judge_judge_retries",
        "sre_judge_judge_attempt_duration_seconds",
        "sre_judge_judge_prompt_tokens",
        "sre_judge_judge_completion_tokens",
    }
)


class Metrics:
    """The service's metric families, registered in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._register_intake(self.registry)
        self._register_judge(self.registry)
        self._register_queue(self.registry)

    def exposition(self, *, admin: bool) -> bytes:
        """The registry in Prometheus' text format; without :data:`ADMIN_ONLY_FAMILIES`
        unless ``admin`` (the scrape came with an admin's bearer token)."""
        return generate_latest(self.registry if admin else _Public(self.registry))

    def _register_intake(self, r: CollectorRegistry) -> None:
        """Submissions, gradings and HTTP requests."""
        self.submissions_accepted = Counter(
            "sre_judge_submissions_accepted",
            "Submissions stored through POST /v1/submissions (replays and imports excluded)",
            registry=r,
        )
        self.submissions_rejected = Counter(
            "sre_judge_submissions_rejected",
            "Submissions refused by a limit",
            ["reason"],
            registry=r,
        )
        self.gradings = Counter(
            "sre_judge_gradings",
            "Gradings stored by the workers, by status and verdict (pass, fail, held, none)",
            ["status", "verdict"],
            registry=r,
        )
        self.gradings_deferred = Counter(
            "sre_judge_gradings_deferred",
            "Gradings kept pending to retry later (judge away, internal error)",
            ["reason"],
            registry=r,
        )
        self.gradings_released = Counter(
            "sre_judge_gradings_released",
            "In-flight gradings whose lease was given back unfinished at shutdown",
            registry=r,
        )
        self.results_discarded = Counter(
            "sre_judge_grading_results_discarded",
            "Results not stored: the worker no longer held the lease, or the database "
            "did not take them while it did",
            registry=r,
        )
        self.http_requests = Histogram(
            "sre_judge_http_request_duration_seconds",
            "HTTP requests by route template, method and status",
            ["method", "route", "status"],
            buckets=_HTTP_BUCKETS,
            registry=r,
        )

    def _register_judge(self, r: CollectorRegistry) -> None:
        """Judge calls, retries, latencies and tokens."""
        self.judge_calls = Counter(
            "sre_judge_judge_calls",
            "Judge calls (each with its retries), by outcome (ok, an error code, cached)",
            [*_JUDGE, "outcome"],
            registry=r,
        )
        self.judge_retries = Counter(
            "sre_judge_judge_retries",
            "Judge attempts beyond the first of a call",
            _JUDGE,
            registry=r,
        )
        self.judge_latency = Histogram(
            "sre_judge_judge_attempt_duration_seconds",
            "Time of one judge attempt (one HTTP request to the judge)",
            [*_JUDGE, "outcome"],
            buckets=JUDGE_LATENCY_BUCKETS,
            registry=r,
        )
        self.prompt_tokens = Counter(
            "sre_judge_judge_prompt_tokens", "Tokens sent to the judge", _JUDGE, registry=r
        )
        self.completion_tokens = Counter(
            "sre_judge_judge_completion_tokens", "Tokens the judge generated", _JUDGE, registry=r
        )
        self.judge_changes = Counter(
            "sre_judge_judge_changes",
            "Another model seen behind a judge's name (a new digest: judge.identity)",
            ["judge"],
            registry=r,
        )
        self.judge_demotions = Counter(
            "sre_judge_judge_demotions",
            "Judges made provisional by a drift canary run, by why (agreement, answers)",
            ["judge", "reason"],
            registry=r,
        )

    def _register_queue(self, r: CollectorRegistry) -> None:
        """The queue, the work in flight and the regrade jobs."""
        self.database_up = Gauge(
            "sre_judge_database_up",
            "1 when this scrape read the queue from the database, 0 when it could not "
            "(the queue gauges are then NaN and the per-judge and regrade gauges absent)",
            registry=r,
        )
        self.queue_pending = Gauge(
            "sre_judge_queue_pending", "Pending gradings (leased or not)", registry=r
        )
        self.queue_oldest_age = Gauge(
            "sre_judge_queue_oldest_pending_age_seconds",
            "Age of the oldest pending grading (0 when none)",
            registry=r,
        )
        self.pending_by_judge = Gauge(
            "sre_judge_pending_gradings",
            "Pending gradings (leased or not, regrade items included) by the judge they are "
            "bound to (backend:model, without its address)",
            ["judge"],
            registry=r,
        )
        self.in_flight = Gauge(
            "sre_judge_gradings_in_flight", "Gradings this process is working on", registry=r
        )
        self.regrade_items = Gauge(
            "sre_judge_regrade_job_items",
            "Regrade job progress: items by kind (total, done, failed, and cache_hits: "
            "items answered wholly from the judge cache)",
            ["job_id", "kind"],
            registry=r,
        )

    def record_grading(self, result: GradingResult, *, stored: str) -> None:
        """Count a grading's judge calls and what became of it.

        ``stored`` is ``"completed"``, ``"deferred"`` or ``"discarded"`` (the lease lost,
        or the database away).
        """
        self.record_calls(result)
        if stored == "completed":
            self.gradings.labels(result.status, _verdict_label(result)).inc()
        elif stored == "deferred":
            self.gradings_deferred.labels(result.unscored_reason or "unknown").inc()
        else:
            self.results_discarded.inc()

    def record_calls(self, result: GradingResult) -> None:
        """Judge calls, attempts, latencies and tokens of one grading."""
        for call in result.calls:
            judge = (call.backend, call.model)
            if getattr(call, "cached", False):  # answered from the judge cache: nothing spent
                self.judge_calls.labels(*judge, "cached").inc()
                continue
            self.judge_calls.labels(*judge, call.error_code or "ok").inc()
            if len(call.attempts) > 1:
                self.judge_retries.labels(*judge).inc(len(call.attempts) - 1)
            for attempt in call.attempts:
                self.judge_latency.labels(*judge, attempt.outcome).observe(
                    attempt.latency_ms / 1000
                )
            # every reply's tokens, those of a reply cut at its budget included
            self.prompt_tokens.labels(*judge).inc(call.prompt_tokens or 0)
            self.completion_tokens.labels(*judge).inc(call.completion_tokens or 0)

    async def refresh(self, services: Services, in_flight: int) -> None:
        """Scrape-time gauges: queue depth and age from the store, work in flight."""
        self.in_flight.set(in_flight)
        try:
            pending, oldest = await services.store.queue.depth()
        except Exception as exc:  # a scrape still answers when the database does not
            log.warning("queue depth unavailable for metrics: %s", type(exc).__name__)
            self._unread()
            return
        self.database_up.set(1)
        self.queue_pending.set(pending)
        await self._refresh_judges(services)
        await self._refresh_regrades(services)
        if oldest is None:
            self.queue_oldest_age.set(0)
            return
        if oldest.tzinfo is None:  # SQLite hands back naive UTC
            oldest = oldest.replace(tzinfo=UTC)
        self.queue_oldest_age.set(max(0.0, (datetime.now(UTC) - oldest).total_seconds()))

    def _unread(self) -> None:
        """No figure read from the database at this scrape: none shown as if it were
        (the last ones read would pass for current, an oldest age frozen meanwhile)."""
        self.database_up.set(0)
        self.queue_pending.set(math.nan)
        self.queue_oldest_age.set(math.nan)
        self.pending_by_judge.clear()
        self.regrade_items.clear()

    async def _refresh_judges(self, services: Services) -> None:
        """Pending gradings by judge, as they stand now (judges with none drop out)."""
        try:
            rows = await services.store.pending_judges.by_judge()
        except Exception as exc:
            log.warning("pending gradings by judge unavailable: %s", type(exc).__name__)
            self.pending_by_judge.clear()
            return
        counts: dict[str, int] = {}
        for row in rows:
            judge = judge_identity(row.judge_spec)
            counts[judge] = counts.get(judge, 0) + row.count
        self.pending_by_judge.clear()
        for judge, count in counts.items():
            self.pending_by_judge.labels(judge).set(count)

    async def _refresh_regrades(self, services: Services) -> None:
        """Items of every regrade job that has not ended, by kind; ended jobs drop out.

        Every kind counts items: ``cache_hits`` is the items answered wholly from the
        judge cache, not the job object's cache hits (calls, several per item with
        per-question asking)."""
        try:
            jobs = await services.store.db.run_read(active_jobs, datetime.now(UTC))
        except Exception as exc:
            log.warning("regrade job progress unavailable: %s", type(exc).__name__)
            self.regrade_items.clear()
            return
        self.regrade_items.clear()
        for view in jobs:
            progress = view.progress
            for kind, value in (
                ("total", progress.total),
                ("done", progress.done),
                ("failed", progress.failed),
                ("cache_hits", progress.cached_items),
            ):
                self.regrade_items.labels(view.job.id, kind).set(value)


class _Public(Collector):
    """A registry's families but those of :data:`ADMIN_ONLY_FAMILIES`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        """Every family of the registry an anonymous scrape may read."""
        return (m for m in self._registry.collect() if m.name not in ADMIN_ONLY_FAMILIES)


def _verdict_label(result: GradingResult) -> str:
    """``pass``, ``fail``, ``held`` (a pass waiting for a human) or ``none`` (unscored)."""
    if result.held:
        return "held"
    if result.outcome is None:
        return "none"
    return "pass" if result.outcome.passed else "fail"
