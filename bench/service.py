"""A real ``sre-judge serve`` process, its tokens, submissions through HTTP, progress.

The service runs as an operator runs it (``python -m api serve``), configured through
``SRE_JUDGE_*`` variables; the benchmark talks to it over HTTP and watches the
database for finished gradings, and reads the process's memory and CPU from ``/proc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.engine import Engine

from bench.judge_sim import free_port

__all__ = [
    "DIAGNOSIS",
    "TRUTH",
    "ServiceProcess",
    "cli",
    "count_done",
    "create_token",
    "proc_cpu_seconds",
    "proc_memory_kib",
    "process_tree",
    "submission_body",
    "submit_all",
]

TRUTH = (
    "[fault_spec] component=deployment/geo-{k}; namespace=hotel-reservation || The GEO_PORT "
    "env var of geo-{k} is set to 9{k:03d} while its Service targets 8083."
)
DIAGNOSIS = (
    "Submission {n}. The geo-{k} deployment in hotel-reservation listens on port 9{k:03d} "
    "(GEO_PORT) while its Service still targets 8083, so every call from the frontend's "
    "search handler to geo-{k} is refused and nearby-hotel searches fail with HTTP 500 for "
    "all users. Pods are Running and Ready; only the port mismatch is wrong. Fix: set "
    "GEO_PORT back to 8083 or change the Service's targetPort."
)


def submission_body(n: int) -> dict[str, Any]:
    """The ``n``-th submission: distinct text (no judge cache hit), 20 kinds of ground truth."""
    k = n % 20
    return {
        "diagnosis": DIAGNOSIS.format(n=n, k=k),
        "ground_truth": TRUTH.format(k=k),
        "agent": f"agent-{n % 3}",
        "model": "bench-model",
        "run_id": f"bench-{n}",
    }


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> str:
    """Run ``sre-judge ARGS``; its standard output, or RuntimeError with its errors."""
    done = subprocess.run(
        [sys.executable, "-m", "api", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"sre-judge {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def create_token(env: dict[str, str], role: str = "submitter") -> str:
    """A new API token (the database is migrated first)."""
    cli("migrate", env=env)
    return cli("tokens", "create", "--role", role, "--name", f"bench-{role}", env=env).strip()


class ServiceProcess:
    """``sre-judge serve`` on a free port, its log in ``log_path``; a context manager."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server's process id."""
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> ServiceProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "api", "serve", "--port", str(self.port)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the service did not become healthy; see {self.log_path}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def submit_all(
    url: str,
    token: str,
    count: int,
    *,
    concurrency: int = 32,
    wait: float = 0,
    body: Callable[[int], dict[str, Any]] = submission_body,
    first: int = 0,
    rate: float | None = None,
) -> list[float]:
    """POST ``count`` submissions with ``concurrency`` open requests; each one's seconds.

    ``rate``: start the n-th submission no earlier than n/rate seconds after the first
    (a harness submitting at a steady pace); None submits as fast as the service answers.
    """
    headers = {"Authorization": f"Bearer {token}"}
    limit = asyncio.Semaphore(concurrency)
    begin = time.perf_counter()
    params = {"wait": str(wait)} if wait else None
    pool = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def one(client: httpx.AsyncClient, n: int) -> float:
        if rate:
            await asyncio.sleep(max(0.0, begin + n / rate - time.perf_counter()))
        async with limit:
            started = time.perf_counter()
            response = await client.post(
                f"{url}/v1/submissions", json=body(n), headers=headers, params=params
            )
            elapsed = time.perf_counter() - started
        if response.status_code not in (201, 202):
            raise RuntimeError(f"submission {n}: {response.status_code} {response.text[:300]}")
        return elapsed

    async with httpx.AsyncClient(timeout=120, limits=pool) as client:
        return list(await asyncio.gather(*(one(client, first + n) for n in range(count))))


async def count_done(engine: Engine) -> tuple[int, int]:
    """Gradings no longer pending, and how many of them are unscored."""
    query = text(
        "SELECT count(*), coalesce(sum(CASE WHEN status = 'unscored' THEN 1 ELSE 0 END), 0) "
        "FROM grading WHERE status <> 'pending'"
    )
    with engine.connect() as connection:
        done, unscored = (connection.execute(query)).one()
    return int(done), int(unscored)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``serve --processes N`` runs N children), from /proc."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError):
                pending += [int(child) for child in (task / "children").read_text().split()]
    return found


def proc_memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of a process and its descendants, in KiB (for
    several processes the sums: the peak is the sum of each process's peak)."""
    wanted = {"VmRSS", "VmHWM"}
    found = dict.fromkeys(wanted, 0)
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in wanted:
                    found[key] += int(value.split()[0])
    return found


def proc_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a process and its descendants (all threads) have used."""
    ticks = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{member}/stat").read_text().rpartition(")")[2].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return ticks / os.sysconf("SC_CLK_TCK")
