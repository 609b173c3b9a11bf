"""Webhook delivery: latency, throughput, lane isolation and duplicates with local receivers.

A real ``sre-judge serve`` (scripted judge, SQLite or PostgreSQL) with webhook endpoints
on local receivers. Three scenarios:

``throughput`` (default): one endpoint. Latency: the time from a grading's completion
(the event's ``timestamp``, written in the grading's transaction) to the receiver's
arrival, one grading at a time. Throughput: the receiver answers 503 while a backlog of
gradings builds up, then 200; deliveries per second is the backlog over the time it
took to drain (one delivery in flight per endpoint, which keeps the events in order),
counted from the first backlog arrival to the last, leaving out the time the receiver's
first refusals put the oldest delivery into backoff.

``isolation``: a fast endpoint's delay (completion to arrival, one grading at a time)
alone, then with a slow endpoint (its receiver answers in ``--slow`` seconds)
registered beside it, the same number of gradings each.

``duplicates``: ``--processes`` server processes (PostgreSQL above 1), ``--endpoints``
endpoints each on its own receiver answering in ``--slow`` seconds, ``--events``
gradings submitted at once, ``SRE_JUDGE_WEBHOOK_TIMEOUT_SECONDS`` = ``--timeout``:
how many webhook-ids arrived more than once, and how long the deliveries took.

    python bench/webhooks.py [--db sqlite|postgres] [--latency N] [--backlog N]
    python bench/webhooks.py --scenario isolation [--latency N] [--slow 2.5]
    python bench/webhooks.py --scenario duplicates --db postgres [--processes 2]
        [--endpoints 10] [--events 30] [--slow 2.5] [--timeout 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from statistics import median
from typing import Any

if __package__ in (None, ""):  # run as `python bench/webhooks.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.common import Figure, bench_database, percentile, print_report
from bench.service import DIAGNOSIS, TRUTH, ServiceProcess, cli, create_token


class _Receiver:
    def __init__(self, delay: float = 0.0) -> None:
        self.up = True
        self.delay = delay
        self.arrivals: dict[str, tuple[float, str]] = {}  # webhook-id -> (time, timestamp)
        self.requests: Counter[str] = Counter()  # webhook-id -> requests with it
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.requests[self.headers["webhook-id"]] += 1
                if receiver.up:
                    event = json.loads(body)
                    receiver.arrivals.setdefault(
                        self.headers["webhook-id"], (time.time(), event["timestamp"])
                    )
                time.sleep(receiver.delay)
                self.send_response(200 if receiver.up else 503)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        return Handler

    def delays(self, skip: int = 0) -> list[float]:
        """Seconds from each event's timestamp to its arrival, in arrival order."""
        return [
            arrived - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            for arrived, stamp in list(self.arrivals.values())[skip:]
        ]

    def wait_for(self, count: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while len(self.arrivals) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.arrivals)} of {count} deliveries arrived")
            time.sleep(0.01)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _submit(client: httpx.Client, url: str, token: str, n: int, wait: int) -> None:
    response = client.post(
        f"{url}/v1/submissions",
        params={"wait": wait} if wait else {},
        json={"diagnosis": DIAGNOSIS.format(n=n, k=n % 50), "ground_truth": TRUTH.format(k=n % 50)},
        headers={"Authorization": f"Bearer {token}"},
    )
    response.raise_for_status()


def _register(client: httpx.Client, url: str, admin: str, receiver: _Receiver) -> str:
    response = client.post(
        f"{url}/v1/webhooks",
        json={"url": receiver.url, "events": ["grading.completed"]},
        headers={"Authorization": f"Bearer {admin}"},
    )
    response.raise_for_status()
    return str(response.json()["id"])


def _failed_attempts(client: httpx.Client, url: str, admin: str, webhook_id: str) -> Counter[str]:
    """webhook-id -> failed attempts recorded (a timeout among them)."""
    answer = client.get(
        f"{url}/v1/webhooks/{webhook_id}/deliveries",
        params={"limit": 500},
        headers={"Authorization": f"Bearer {admin}"},
    )
    answer.raise_for_status()
    return Counter(
        {d["id"]: sum(1 for a in d["attempts"] if a["error"]) for d in answer.json()["items"]}
    )


@contextmanager
def _service(db: str, **env: str) -> Iterator[tuple[str, str, str, httpx.Client]]:
    """A migrated database and a running server: (server URL, admin, submitter, client)."""
    with bench_database(db) as url, tempfile.TemporaryDirectory() as folder:
        settings = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": "scripted:pass",
            "SRE_JUDGE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1",
            "SRE_JUDGE_WEBHOOK_RETRY_SECONDS": "0.5",
            **env,
        }
        cli("migrate", env=settings)
        admin, agent = create_token(settings, "admin"), create_token(settings, "submitter")
        with (
            ServiceProcess(settings, Path(folder) / "serve.log") as service,
            httpx.Client(timeout=60) as client,
        ):
            yield service.url, admin, agent, client


def run(db: str, latency_n: int, backlog: int) -> dict[str, Any]:
    """Latency and throughput to one endpoint; return the report's JSON object."""
    receiver = _Receiver()
    with _service(db) as (url, admin, agent, client):
        _register(client, url, admin, receiver)
        for n in range(latency_n):
            _submit(client, url, agent, n, wait=30)
            receiver.wait_for(n + 1)
        delays = receiver.delays()
        receiver.up = False
        for n in range(latency_n, latency_n + backlog):
            _submit(client, url, agent, n, wait=30)
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


def run_isolation(db: str, n: int, slow: float) -> dict[str, Any]:
    """A fast endpoint's delays alone, then beside a slow one; the report's JSON object."""
    fast, slow_receiver = _Receiver(), _Receiver(delay=slow)
    with _service(db) as (url, admin, agent, client):
        _register(client, url, admin, fast)
        for k in range(n):
            _submit(client, url, agent, k, wait=30)
            fast.wait_for(k + 1)
        _register(client, url, admin, slow_receiver)
        for k in range(n, 2 * n):
            _submit(client, url, agent, k, wait=30)
            fast.wait_for(k + 1)
        slow_arrived = len(slow_receiver.arrivals)
    slow_receiver.close()
    alone, beside = fast.delays()[:n], fast.delays(skip=n)
    figures = [
        Figure("fast_alone_median_ms", median(alone) * 1000, "ms"),
        Figure("fast_alone_p90_ms", percentile(alone, 0.9) * 1000, "ms"),
        Figure("fast_beside_slow_median_ms", median(beside) * 1000, "ms"),
        Figure("fast_beside_slow_p90_ms", percentile(beside, 0.9) * 1000, "ms"),
        Figure("fast_beside_slow_max_ms", max(beside) * 1000, "ms"),
        Figure("slow_delivered_meanwhile", slow_arrived, f"of {n}"),
    ]
    extra = {"db": db, "samples": n, "slow_seconds": slow}
    return print_report("webhooks_isolation", "Webhook lanes: a fast endpoint", figures, extra)


def run_duplicates(
    db: str, processes: int, endpoints: int, events: int, slow: float, timeout: float
) -> dict[str, Any]:
    """Events to slow endpoints from several processes; the report's JSON object."""
    env = {
        "SRE_JUDGE_PROCESSES": str(processes),
        "SRE_JUDGE_WEBHOOK_TIMEOUT_SECONDS": str(timeout),
        "SRE_JUDGE_POLL_SECONDS": "0.2",
    }
    with ExitStack() as stack:
        receivers = [_Receiver(delay=slow) for _ in range(endpoints)]
        for receiver in receivers:
            stack.callback(receiver.close)
        with _service(db, **env) as (url, admin, agent, client):
            webhook_ids = [_register(client, url, admin, receiver) for receiver in receivers]
            started = time.monotonic()
            for n in range(events):
                _submit(client, url, agent, n, wait=0)
            submitted = time.monotonic() - started
            for receiver in receivers:
                receiver.wait_for(events, timeout=events * slow * 4 + 120)
            drained = time.monotonic() - started
            time.sleep(timeout + 10)  # a lease run out would send again by now
            failed: Counter[str] = Counter()
            for webhook_id in webhook_ids:
                failed.update(_failed_attempts(client, url, admin, webhook_id))
    sent = Counter({k: v for r in receivers for k, v in r.requests.items()})
    # a send that failed (timed out) although the receiver got it is sent again by
    # design; any other repeat is a second send while the first was in flight
    retried = sum(min(n - 1, failed[k]) for k, n in sent.items())
    figures = [
        Figure("deliveries", len(sent)),
        Figure("sent_twice_or_more", sum(1 for n in sent.values() if n > 1), f"of {len(sent)}"),
        Figure("extra_sends", sum(sent.values()) - len(sent)),
        Figure("extra_sends_after_a_failed_attempt", retried),
        Figure("failed_attempts", sum(failed.values())),
        Figure("submitted_in_s", submitted, "s"),
        Figure("all_delivered_in_s", drained, "s"),
    ]
    extra = {"db": db, "processes": processes, "endpoints": endpoints, "events": events,
             "receiver_seconds": slow, "timeout_seconds": timeout}  # fmt: skip
    return print_report("webhooks_duplicates", "Webhook duplicates", figures, extra)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=("throughput", "isolation", "duplicates"),
                        default="throughput")  # fmt: skip
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--latency", type=int, default=100, help="gradings timed one by one")
    parser.add_argument("--backlog", type=int, default=300, help="deliveries queued, then drained")
    parser.add_argument("--slow", type=float, default=2.5, help="the slow receivers' answer time")
    parser.add_argument("--processes", type=int, default=2, help="server processes (duplicates)")
    parser.add_argument("--endpoints", type=int, default=10, help="slow endpoints (duplicates)")
    parser.add_argument("--events", type=int, default=30, help="gradings (duplicates)")
    parser.add_argument("--timeout", type=float, default=3.0, help="webhook timeout (duplicates)")
    args = parser.parse_args()
    if args.scenario == "isolation":
        run_isolation(args.db, args.latency, args.slow)
    elif args.scenario == "duplicates":
        run_duplicates(
            args.db, args.processes, args.endpoints, args.events, args.slow, args.timeout
        )
    else:
        run(args.db, args.latency, args.backlog)


if __name__ == "__main__":
    main()
