"""Full-text search of the gradings list: how long one page of search results takes.

    python bench/search.py [--db sqlite|postgres] [--diagnoses 10000] [--runs 20]

Seeds ``--diagnoses`` graded submissions (diagnoses of 25 to 60 words drawn from an
SRE vocabulary, with a tenth of the gradings overridden with a reason and a tenth tagged
with a note), written straight into the tables so the index is kept by the same triggers
(SQLite) or indexes (PostgreSQL) as the service's writes. Then it reads the first page
(50, newest first) of each of a dozen searches (common and rare words, phrases,
prefixes, exclusions, one restricted to a submitter) the way ``GET /v1/gradings?q=``
does, ``--runs`` times each: median and 95th percentile (target: under 200 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/search.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, percentile, print_report

_VOCABULARY = (
    "pod", "node", "deployment", "service", "ingress", "kubelet", "kubernetes", "container",
    "image", "restart", "crash", "loop", "backoff", "memory", "leak", "pressure", "oom",
    "killed", "cpu", "throttling", "disk", "full", "quota", "latency", "timeout", "upstream",
    "downstream", "dns", "resolver", "coredns", "etcd", "compaction", "leader", "election",
    "quorum", "zookeeper", "kafka", "broker", "partition", "replica", "lag", "database",
    "connection", "pool", "exhausted", "postgres", "mysql", "redis", "cache", "eviction",
    "certificate", "expired", "tls", "handshake", "network", "policy", "denied", "port",
    "mismatch", "env", "variable", "misconfigured", "configmap", "secret", "rollout", "canary",
    "rollback", "replica", "scaled", "hpa", "autoscaler", "probe", "readiness", "liveness",
    "failed", "frontend", "backend", "checkout", "cart", "payment", "user", "auth", "gateway",
    "proxy", "envoy", "istio", "sidecar", "mtls", "retry", "storm", "circuit", "breaker",
    "queue", "backlog", "worker", "thread", "deadlock"
)  # fmt: skip
#: the searches timed: (label, q, submitter only)
SEARCHES = (
    ("common word", "pod", False),
    ("two words", "memory leak", False),
    ("rare word", "zookeeper", False),
    ("phrase", '"connection pool"', False),
    ("prefix", "kube*", False),
    ("exclusion", "timeout -dns", False),
    ("phrase and exclusion", '"disk full" -quota', False),
    ("three words", "checkout payment gateway", False),
    ("no match", "nonexistentword", False),
    ("override reason", "misses upstream", False),
    ("tag note", "millicores", False),
    ("a submitter's own", "memory", True),
)


def _seed(session: Any, diagnoses: int) -> None:
    """``diagnoses`` submissions with a current grading; reasons and notes on a tenth."""
    from datetime import timedelta

    from sqlalchemy import insert

    from storage.canonical import utcnow
    from storage.review_tables import FailureTagRecord, OverrideRecord
    from storage.tables import GradingRecord, SubmissionRecord, new_id, row_values

    rng = random.Random(7)
    now = utcnow()
    submissions, gradings, overrides, tags = [], [], [], []
    for n in range(diagnoses):
        words = rng.choices(_VOCABULARY, k=rng.randint(25, 60))
        created = now - timedelta(seconds=diagnoses - n)
        submission = SubmissionRecord(
            id=new_id(), diagnosis=" ".join(words).capitalize() + ".", ground_truth="truth",
            ground_truth_source="scenario", ground_truth_sha256="0" * 64, scenario_id=None,
            agent=f"agent-{n % 3}", model="m", run_id=f"run-{n % 7}", attempt=n % 5,
            submitted_by=f"submitter-{n % 4}", request_hash="0" * 64, created_at=created,
        )  # fmt: skip
        submissions.append(row_values(submission))
        grading = GradingRecord(
            id=new_id(), submission_id=submission.id, rubric_id="sregym-rca",
            rubric_version="v1", judge_spec="ollama:judge", judge_backend="ollama",
            judge_model="judge", status="graded", yes_count=7, passed=True,
            judge_passed=True, is_current=True, created_at=created,
        )  # fmt: skip
        values = row_values(grading)
        values["review_reasons"] = []
        gradings.append(values)
        if n % 10 == 3:
            reason = "names the service but misses upstream " + " ".join(
                rng.choices(_VOCABULARY, k=8)
            )
            overrides.append(row_values(OverrideRecord(
                id=new_id(), grading_id=grading.id, kind="verdict", verdict="fail",
                reason=reason, author_id="a", author_name="Ada", created_at=created,
            )))  # fmt: skip
        if n % 10 == 7:
            note = "read millicores as cores; " + " ".join(rng.choices(_VOCABULARY, k=8))
            tag = row_values(FailureTagRecord(
                grading_id=grading.id, tag="misread-unit", note=note, author_id="a",
                author_name="Ada", created_at=created,
            ))  # fmt: skip
            del tag["id"]  # the database numbers them
            tags.append(tag)
    connection = session.connection()
    for model, rows in (
        (SubmissionRecord, submissions),
        (GradingRecord, gradings),
        (OverrideRecord, overrides),
        (FailureTagRecord, tags),
    ):
        connection.execute(insert(model.__table__), rows)  # type: ignore[attr-defined]


async def _measure(
    url: str, diagnoses: int, runs: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    from sqlalchemy import text

    from storage import GradingFilter, Store, make_engine, upgrade
    from storage.search import SearchQuery

    engine = make_engine(url)
    await upgrade(engine)
    store = Store(engine)
    await store.db.run(_seed, diagnoses)
    if engine.dialect.name == "postgresql":  # the statistics autovacuum would gather
        with engine.begin() as connection:
            connection.execute(text("ANALYZE"))
    times: dict[str, list[float]] = {label: [] for label, _, _ in SEARCHES}
    found: dict[str, int] = {}
    for _ in range(runs):
        for label, q, own in SEARCHES:
            filters = GradingFilter(search=SearchQuery.parse(q))
            started = time.perf_counter()
            views, _ = await store.db.run_read(
                store.gradings.read_page,
                filters=filters,
                limit=50,
                submitted_by="submitter-1" if own else None,
            )
            times[label].append(time.perf_counter() - started)
            found[label] = len(views)
    engine.dispose()
    return times, found


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--diagnoses", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with bench_database(args.db) as url:
        times, found = asyncio.run(_measure(url, args.diagnoses, args.runs))
    ms = 1000
    every = [t for series in times.values() for t in series]
    p95 = percentile(every, 0.95)
    figures = [
        Figure(f"search, {args.db}, median", statistics.median(every) * ms, "ms"),
        Figure(f"search, {args.db}, p95", p95 * ms, "ms", target="< 200 ms", met=p95 < 0.2),
        *(
            Figure(f"{label}, median ({found[label]} shown)", statistics.median(series) * ms, "ms")
            for label, series in times.items()
        ),
    ]
    title = f"Full-text search over {args.diagnoses:,} diagnoses, first page of 50"
    print_report("search", title, figures, {"diagnoses": args.diagnoses, "db": args.db})


if __name__ == "__main__":
    main()
