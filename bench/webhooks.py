"""Webhook delivery: latency after a grading, and deliveries per second to a local receiver.

A real ``sre-judge serve`` (scripted judge, SQLite or PostgreSQL) with one webhook
endpoint on a local receiver. Latency: the time from a grading's completion (the
event's ``timestamp``, written in the grading's transaction) to the receiver's arrival,
one grading at a time. Throughput: the receiver answers 503 while a backlog of gradings
builds up, then 200; deliveries per second is the backlog over the time it took to
drain (one delivery in flight per endpoint, which keeps the events in order).

    python bench/webhooks.py [--db sqlite|postgres] [--latency N] [--backlog N]

Deliveries per second counts from the first backlog arrival to the last, leaving out
the time the receiver's first refusals put the oldest delivery into backoff.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from statistics import median
from typing import Any

if __package__ in (None, ""):  # run as `python bench/webhooks.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import json

import httpx

from bench.common import Figure, bench_database, percentile, print_report
from bench.service import DIAGNOSIS, TRUTH, ServiceProcess, cli, create_token


class _Receiver:
    def __init__(self) -> None:
        self.up = True
        self.arrivals: dict[str, tuple[float, str]] = {}  # webhook-id -> (time, timestamp)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if receiver.up:
                    event = json.loads(body)
                    receiver.arrivals.setdefault(
                        self.headers["webhook-id"], (time.time(), event["timestamp"])
                    )
                self.send_response(200 if receiver.up else 503)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        return Handler

    def wait_for(self, count: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while len(self.arrivals) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.arrivals)} of {count} deliveries arrived")
            time.sleep(0.01)


def _submit(client: httpx.Client, url: str, token: str, n: int, wait: int) -> None:
    response = client.post(
        f"{url}/v1/submissions",
        params={"wait": wait} if wait else {},
        json={"diagnosis": DIAGNOSIS.format(n=n, k=n % 50), "ground_truth": TRUTH.format(k=n % 50)},
        headers={"Authorization": f"Bearer {token}"},
    )
    response.raise_for_status()


def run(db: str, latency_n: int, backlog: int) -> dict[str, Any]:
    """Measure; return the report's JSON object."""
    receiver = _Receiver()
    with bench_database(db) as url, tempfile.TemporaryDirectory() as folder:
        env = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": "scripted:pass",
            "SRE_JUDGE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1",
            "SRE_JUDGE_WEBHOOK_RETRY_SECONDS": "0.5",
        }
        cli("migrate", env=env)
        admin, agent = create_token(env, "admin"), create_token(env, "submitter")
        with (
            ServiceProcess(env, Path(folder) / "serve.log") as service,
            httpx.Client(timeout=60) as client,
        ):
            client.post(
                f"{service.url}/v1/webhooks",
                json={"url": receiver.url, "events": ["grading.completed"]},
                headers={"Authorization": f"Bearer {admin}"},
            ).raise_for_status()
            for n in range(latency_n):
                _submit(client, service.url, agent, n, wait=30)
                receiver.wait_for(n + 1)
            delays = [
                arrived - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                for arrived, stamp in receiver.arrivals.values()
            ]
            receiver.up = False
            for n in range(latency_n, latency_n + backlog):
                _submit(client, service.url, agent, n, wait=30)
            receiver.up = True
            receiver.wait_for(latency_n + backlog)
    # from the first backlog arrival to the last: the head's retry backoff left out
    times = sorted(arrived for arrived, _ in list(receiver.arrivals.values())[latency_n:])
    drained = times[-1] - times[0]
    figures = [
        Figure("latency_median_ms", median(delays) * 1000, "ms"),
        Figure("latency_p99_ms", percentile(delays, 0.99) * 1000, "ms"),
        Figure("deliveries_per_second", (backlog - 1) / drained, "/s"),
    ]
    extra = {"db": db, "latency_samples": latency_n, "backlog": backlog}
    return print_report("webhooks", "Webhook delivery", figures, extra)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--latency", type=int, default=100, help="gradings timed one by one")
    parser.add_argument("--backlog", type=int, default=300, help="deliveries queued, then drained")
    args = parser.parse_args()
    run(args.db, args.latency, args.backlog)


if __name__ == "__main__":
    main()
