"""How long a regrade dry run takes over many stored submissions (SQLite by default).

    python bench/dry_run.py [--submissions 10000] [--database-url URL]

Seeds the submissions with current graded gradings (bulk inserts, not the API), half of
them already in the judge cache (a stored judge call of theirs carries its key), then
times the dry run as ``POST /v1/regrade-jobs`` with ``dry_run: true`` runs it, and prints
the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/dry_run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from api.regrade.estimate import sampling_params
from api.regrade.schemas import RegradeJobCreate
from api.regrade.use_cases import resolve_target, start_regrade
from api.service.services import BackendPool, RubricCatalog, Services
from api.service.settings import Settings
from bench.common import Figure, print_report
from judge.cache import CacheKeys, ground_truth_namespace, kept_key
from judge.calls import ChatMessage
from judge.prompt import build_messages, build_reply_schema
from judge.rubric import Rubric, load_rubric_dir
from storage import (
    GradingRecord,
    JudgeCallRecord,
    Store,
    SubmissionRecord,
    make_engine,
    upgrade,
)
from storage.canonical import utcnow
from storage.tables import new_id

__all__ = ["TARGET_JUDGE", "seed_submissions", "time_dry_run"]

TARGET_JUDGE = "scripted:fail"
#: the regrade issue's target for a dry run over 10,000 stored submissions
TARGET_SECONDS = 2.0
_TRUTH = "[fault_spec] component=deployment/geo-{n}; namespace=hotel || wrong image tag {n}"
#: the token the seeded submissions are sent by (their ground truths are inline)
_SENDER = "bench"
_DIAGNOSIS = (
    "Submission {n}: the geo-{n} deployment in hotel-reservation runs a wrong image tag; its "
    "pods crash at start and the frontend's search calls fail with 503 for all users."
)


def _services(engine: Engine, settings: Settings) -> Services:
    store = Store(engine)
    rubrics = load_rubric_dir(settings.rubric_dir)
    return Services(settings, store, RubricCatalog(rubrics, store), BackendPool(settings))


async def seed_submissions(engine: Engine, count: int, *, cached_share: float = 0.5) -> None:
    """``count`` submissions with graded current gradings; a share of them cached."""
    settings = Settings(judge=TARGET_JUDGE)
    services = _services(engine, settings)
    rubric = services.rubrics.current[settings.rubric]
    await services.store.catalog.save_rubric(rubric)
    now = utcnow()
    submissions: list[dict[str, Any]] = []
    gradings: list[dict[str, Any]] = []
    for n in range(count):
        sid = new_id()
        submissions.append(
            {
                "id": sid, "diagnosis": _DIAGNOSIS.format(n=n), "ground_truth": _TRUTH.format(n=n),
                "ground_truth_source": "inline", "agent": f"agent-{n % 3}", "metadata": {},
                "redactions": [], "submitted_by": _SENDER, "request_hash": sid * 2,
                "created_at": now,
            }
        )  # fmt: skip
        gradings.append(
            {
                "id": new_id(), "submission_id": sid, "rubric_id": rubric.id,
                "rubric_version": rubric.version, "judge_spec": "openai:old",
                "judge_backend": "openai", "judge_model": "old", "status": "graded",
                "claim_count": 1, "passed": n % 2 == 0, "yes_count": 7 if n % 2 == 0 else 3,
                "needs_review": False, "review_reasons": [], "overridden": False,
                "is_current": True, "revision": 2, "created_at": now, "graded_at": now,
            }
        )  # fmt: skip
    with engine.begin() as connection:
        tables: list[tuple[Any, list[dict[str, Any]]]] = [
            (SubmissionRecord.__table__, submissions),  # type: ignore[attr-defined]
            (GradingRecord.__table__, gradings),  # type: ignore[attr-defined]
        ]
        for table, rows in tables:
            for start in range(0, len(rows), 2000):
                connection.execute(insert(table), rows[start : start + 2000])
    cached = [g["id"] for g in gradings[: int(count * cached_share)]]
    await _fill_cache(services, cached)
    await services.backends.aclose()


async def _fill_cache(services: Services, grading_ids: list[str]) -> None:
    """Judge cache entries for the first gradings: a stored call of each, with its key
    (in the namespace of the seeded inline ground truths' sender)."""
    rubric = services.rubrics.current[services.settings.rubric]
    backend = services.backends.get(TARGET_JUDGE)
    keyer = CacheKeys(
        build_reply_schema(rubric),
        sampling_params(services, backend),
        backend=backend.name,
        model=backend.model,
        base_url=backend.base_url,
    )
    space = ground_truth_namespace(None, _SENDER)
    rows: list[dict[str, Any]] = [
        {
            "id": new_id(), "grading_id": grading_id, "position": 0, "purpose": "grade",
            "backend": backend.name, "model": backend.model, "messages": [],
            "reply_schema": {}, "params": {}, "response_text": "{}", "response_model": "bench",
            "completion_tokens": 400, "latency_ms": 0.0, "attempts": [], "cached": False,
            "created_at": utcnow(), "cache_key": _kept(keyer.key(_messages(rubric, n)), space),
        }
        for n, grading_id in enumerate(grading_ids)
    ]  # fmt: skip
    with services.store.engine.begin() as connection:
        for start in range(0, len(rows), 2000):
            connection.execute(insert(JudgeCallRecord.__table__), rows[start : start + 2000])  # type: ignore[attr-defined]


def _kept(key: str | None, namespace: str) -> str | None:
    """The key a judge that reports no digest keeps the entry of ``key`` under."""
    return None if key is None else kept_key(key, digest=None, namespace=namespace)


def _messages(rubric: Rubric, n: int) -> list[ChatMessage]:
    """The messages the judge is asked for the ``n``-th seeded submission."""
    return build_messages(rubric, _TRUTH.format(n=n), _DIAGNOSIS.format(n=n))


async def time_dry_run(engine: Engine) -> tuple[float, dict[str, Any]]:
    """Seconds a dry run over every stored submission takes, and its estimate."""
    services = _services(engine, Settings(judge=TARGET_JUDGE))
    data = RegradeJobCreate(judge=TARGET_JUDGE, dry_run=True)
    await resolve_target(services, data)  # build the backend once, as a running server has
    started = time.perf_counter()
    view = await start_regrade(services, data, actor="bench")
    elapsed = time.perf_counter() - started
    await services.backends.aclose()
    return elapsed, view.job.estimate


async def _main(count: int, url: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        engine = make_engine(url or f"sqlite:///{Path(folder) / 'bench.db'}")
        await upgrade(engine)
        started = time.perf_counter()
        await seed_submissions(engine, count)
        seeded = time.perf_counter() - started
        elapsed, estimate = await time_dry_run(engine)
        engine.dispose()
    half = count // 2
    figures = [
        Figure("dry_run_s", round(elapsed, 3), "s", f"< {TARGET_SECONDS:g} s",
               elapsed < TARGET_SECONDS),
        Figure("submissions", estimate["submissions"], "", f"= {count}",
               estimate["submissions"] == count),
        Figure("judge_calls", estimate["judge_calls"], "", f"= {count - half} (not cached)",
               estimate["judge_calls"] == count - half),
        Figure("cache_hits", estimate["cache_hits"], "", f"= {half}",
               estimate["cache_hits"] == half),
        Figure("prompt_tokens_estimate", estimate["prompt_tokens"], "tokens"),
        Figure("completion_tokens_estimate", estimate["completion_tokens"], "tokens",
               str(estimate["completion_tokens_basis"])),
        Figure("seed_s", round(seeded, 2), "s", "bulk inserts"),
    ]  # fmt: skip
    title = f"Regrade dry run over {count} stored submissions (half in the judge cache)"
    print_report("dry_run", title, figures, {"db": "sqlite" if url is None else "url"})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--database-url", default=None)
    arguments = parser.parse_args()
    asyncio.run(_main(arguments.submissions, arguments.database_url))
