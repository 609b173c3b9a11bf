"""What one claim costs as the backlog of pending gradings grows.

    python bench/claims.py [--db sqlite|postgres] [--backlog 500,5000] [--claims 200]

For each backlog size: a new database, ``N`` pending gradings accepted through the
application layer (checks, redaction, the submission's transaction), then ``--claims``
claims of one grading each, as a worker whose judge slot just freed takes the next
(``storage.queue.QueueRepository.claim_pending``). Reports this process's CPU time per
claim (``time.process_time``) and the wall time per claim, which on PostgreSQL includes
the database server's work. A claim should cost the same whatever the backlog: it walks
the pending gradings in claim order and stops at its limit.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/claims.py`
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, print_report
from bench.service import submission_body


async def _per_claim(url: str, backlog: int, claims: int) -> tuple[float, float]:
    """CPU and wall milliseconds per claim of one grading with ``backlog`` pending."""
    from api.grading.intake import accept_submission
    from api.service.principal import Principal
    from api.service.runtime import Runtime
    from api.service.schemas import SubmissionCreate
    from api.service.settings import Settings

    with tempfile.TemporaryDirectory(prefix="srejudge-claims-") as folder:
        settings = Settings(
            database_url=url, judge="scripted:pass", secret_key_file=Path(folder) / "key"
        )
        principal = Principal(id="bench", name="bench", role="admin")
        # no workers: the submissions stay pending, and the bench claims them itself
        async with Runtime(settings, workers=False, migrate=True) as runtime:
            services: Any = runtime.services
            for n in range(backlog):
                data = SubmissionCreate.model_validate(submission_body(n))
                await accept_submission(services, data, principal=principal)
            queue = services.store.queue
            started, wall = time.process_time(), time.perf_counter()
            for _ in range(claims):
                claimed = await queue.claim_pending("bench", limit=1, lease_seconds=600)
                if len(claimed) != 1:
                    raise RuntimeError("the backlog ran out: use fewer --claims")
            cpu = (time.process_time() - started) * 1000 / claims
            return cpu, (time.perf_counter() - wall) * 1000 / claims


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--backlog", default="500,5000", help="comma-separated backlog sizes")
    parser.add_argument("--claims", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(size) for size in args.backlog.split(",")]
    figures = []
    for size in sizes:
        with bench_database(args.db) as url:
            cpu, wall = asyncio.run(_per_claim(url, size, args.claims))
        figures.append(Figure(f"CPU per claim, {size:,} pending", cpu, "ms"))
        figures.append(Figure(f"wall time per claim, {size:,} pending", wall, "ms"))
    title = f"One claim against the backlog ({args.db})"
    print_report("claims", title, figures, {"db": args.db, "claims": args.claims})


if __name__ == "__main__":
    main()
