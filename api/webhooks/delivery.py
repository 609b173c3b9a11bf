"""The webhook delivery worker inside ``serve`` (and ``worker``): one lane per endpoint.

A dispatcher looks for endpoints with a due delivery every ``SRE_JUDGE_POLL_SECONDS``,
and at once when a transaction of this process has written deliveries or one of its
lanes has ended, and starts a lane for each that has none running in this process. A
lane sends its endpoint's deliveries one at a time, in event order: each send is leased
on its own (``SRE_JUDGE_WEBHOOK_TIMEOUT_SECONDS`` + 10 s), resolved once and sent to the
address that was checked (:class:`api.webhooks.target.PinnedTransport`), signed as
Standard Webhooks asks (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``,
with the ``standardwebhooks`` library), and bounded as a whole by the timeout. Its
outcome is recorded with the lease of the endpoint's next delivery. A lane ends at a
failure or when nothing is due; lanes never wait for each other, so a slow or failing
receiver delays only its own deliveries. A delivery leased but not sent when the process
stops (a stop that came while the dispatcher leased it, or while a lane recorded its last
send) is given back unsent: due at once for whoever runs next, its attempt not counted.

A failed send is retried with exponential backoff (``SRE_JUDGE_WEBHOOK_RETRY_SECONDS``,
doubling, at most an hour apart) until it has failed for
``SRE_JUDGE_WEBHOOK_GIVE_UP_SECONDS`` (a day), counted from its first attempt (not from
its event, which may have waited behind the endpoint's earlier ones), then it is
dead-lettered (state ``dead``; an admin can redeliver it). Each endpoint has a circuit
breaker, kept in the database for every process:
``SRE_JUDGE_WEBHOOK_CIRCUIT_FAILURES`` failed attempts in a row (over all its
deliveries) open it, and none of its deliveries is attempted until its backoff
(doubling with each further failure, at most an hour) has passed; the next attempt is
the probe, and a 2xx closes it. A failed answer's ``Retry-After`` (seconds or
an HTTP date, RFC 9110 10.2.3) is honoured when it asks for longer than the backoff, up
to the hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import ssl
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import httpx
from standardwebhooks.webhooks import Webhook

from api.service.background import cancel_and_wait
from api.service.errors import InvalidRequest
from api.service.settings import Settings
from api.webhooks.outbox import on_committed
from api.webhooks.queries import Claimed, WebhookQueries
from api.webhooks.target import PinnedTransport, allowed_hosts
from judge.backends.http import parse_retry_after, tls_context
from storage import Store

__all__ = [
    "WebhookDelivery",
    "circuit_open_until",
    "retry_at",
    "signed_headers",
]

_log = logging.getLogger(__name__)
_MAX_DELAY = 3600.0
#: how much longer than a send's deadline its lease lasts
_LEASE_MARGIN = 10.0


def signed_headers(claimed: Claimed, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one send of ``body``."""
    return {
        "content-type": "application/json",
        "webhook-id": claimed.id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(claimed.secret).sign(claimed.id, now, body),
    }


def _backoff(settings: Settings, failures: int) -> float:
    """Seconds to wait after the ``failures``-th failure in a row (1-based): doubling, at
    most :data:`_MAX_DELAY` whatever the count (an endpoint failing for months included)."""
    doublings = min(max(failures - 1, 0), 64)
    return float(min(_MAX_DELAY, settings.webhook_retry_seconds * 2.0**doublings))


def retry_at(
    claimed: Claimed, now: datetime, settings: Settings, *, asked: float | None = None
) -> datetime | None:
    """When to try again after a failed attempt, or None once it is time to give up.

    ``asked`` is the receiver's ``Retry-After`` in seconds: waited for when it is longer
    than the backoff, never longer than the longest backoff (an hour). It is time to give
    up once the delivery has failed for ``webhook_give_up_seconds`` since the first
    attempt of its series, however long it waited behind the endpoint's earlier events.
    """
    failing = (now - claimed.first_attempt_at).total_seconds()
    if failing >= settings.webhook_give_up_seconds:
        return None
    delay = _backoff(settings, claimed.attempts) * random.uniform(0.8, 1.0)
    if asked is not None:
        delay = max(delay, min(asked, _MAX_DELAY))
    return now + timedelta(seconds=delay)


def circuit_open_until(failures: int, now: datetime, settings: Settings) -> datetime | None:
    """Until when an endpoint with ``failures`` failed attempts in a row rests; None while
    fewer than ``webhook_circuit_failures`` keep its circuit closed."""
    threshold = settings.webhook_circuit_failures
    if failures < threshold:
        return None
    return now + timedelta(seconds=_backoff(settings, failures - threshold + 1))


class WebhookDelivery:
    """Delivers the outbox of one store; start it with the grading workers.

    ``verify`` is what TLS certificates are checked against (default: httpx's, the
    certifi bundle or ``SSL_CERT_FILE``); a seam for tests with their own authority.
    """

    def __init__(
        self, store: Store, settings: Settings, *, verify: ssl.SSLContext | None = None
    ) -> None:
        self._store = store
        self._queries = WebhookQueries(store.db)
        self._settings = settings
        self._allow = allowed_hosts(settings.webhook_allow_hosts)
        self._verify = verify
        self._task: asyncio.Task[None] | None = None
        #: endpoint id -> the lane delivering to it in this process
        self._lanes: dict[str, asyncio.Task[None]] = {}
        #: set while stopping: a lane ends after its send in flight
        self._stopping = False
        #: set when this process committed deliveries, or a lane ended: dispatch before
        #: the next poll
        self._wake = asyncio.Event()
        #: this process committed deliveries since the last dispatch: lease at once
        self._told = False
        self._stop_listening: Callable[[], None] | None = None

    @property
    def _lease_seconds(self) -> float:
        return self._settings.webhook_timeout_seconds + _LEASE_MARGIN

    def start(self) -> None:
        """Start the dispatcher."""
        if self._task is None:
            loop = asyncio.get_running_loop()

            def told() -> None:
                self._told = True
                self._wake.set()

            def wake_up() -> None:  # from the committing thread
                loop.call_soon_threadsafe(told)

            self._stop_listening = on_committed(self._store.db.engine, wake_up)
            self._task = asyncio.create_task(self._run(), name="webhook-delivery")

    async def stop(self) -> None:
        """Stop: no new send starts, the sends in flight finish (each within the timeout)
        and are recorded; a lane that overruns is cancelled (its lease runs out and its
        delivery is sent again)."""
        self._stopping = True
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        try:
            if self._task is not None:
                await cancel_and_wait(self._task)
            lanes = list(self._lanes.values())
            if lanes:
                grace = self._settings.webhook_timeout_seconds + 2
                _, overran = await asyncio.wait(lanes, timeout=grace)
                for lane in overran:
                    lane.cancel()
                await asyncio.gather(*overran, return_exceptions=True)
        finally:
            self._task = None
            self._lanes.clear()
            self._stopping = False

    async def _run(self) -> None:
        while True:
            told, self._told = self._told, False  # of new deliveries: lease without a look
            try:
                await self._dispatch(look=not told)
            except asyncio.CancelledError:
                raise
            except Exception:  # the database away for a moment: try again later
                _log.exception("webhook dispatch failed")
            try:
                async with asyncio.timeout(self._settings.poll_seconds):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def _dispatch(self, *, look: bool = True) -> list[asyncio.Task[None]]:
        """Start a lane for each endpoint with a due delivery and no lane here yet
        (``look``: see :meth:`WebhookQueries.claim_due`)."""
        claim = asyncio.ensure_future(
            self._queries.claim_due(
                lease_seconds=self._lease_seconds, skip=frozenset(self._lanes), look=look
            )
        )
        try:
            claimed = await asyncio.shield(claim)
        except asyncio.CancelledError:  # stopped while the lease committed: none is sent
            with contextlib.suppress(Exception):
                if leased := await claim:
                    await self._queries.give_back(leased)
            raise
        if self._stopping and claimed:
            await self._queries.give_back(claimed)
            return []
        started = []
        for first in claimed:
            lane = asyncio.create_task(self._lane(first), name=f"webhook-lane-{first.endpoint_id}")
            self._lanes[first.endpoint_id] = lane
            lane.add_done_callback(self._forget_lane)
            started.append(lane)
        return started

    def _forget_lane(self, lane: asyncio.Task[None]) -> None:
        """Drop an ended lane and have the dispatcher look once more: a delivery committed
        while the lane wound down (closing its client) was skipped as the lane's."""
        for endpoint_id, running in list(self._lanes.items()):
            if running is lane:
                del self._lanes[endpoint_id]
        if not self._stopping:
            self._wake.set()

    async def deliver_due(self) -> int:
        """Start the lanes of every endpoint with something due and wait until each has
        nothing due left; how many lanes ran."""
        lanes = await self._dispatch()
        await asyncio.gather(*lanes)
        return len(lanes)

    async def _lane(self, first: Claimed) -> None:
        """One endpoint's due deliveries, one at a time, until a failure or none is due.

        Its own client: connections (pooled by address) are never shared with another
        endpoint, nor is a slow receiver's pool with anyone.
        """
        transport = PinnedTransport(self._allow, verify=self._verify or tls_context())
        async with httpx.AsyncClient(
            transport=transport, follow_redirects=False, trust_env=False,
            timeout=self._settings.webhook_timeout_seconds,
        ) as http:  # fmt: skip
            claimed: Claimed | None = first
            while claimed is not None:
                try:
                    if self._stopping:  # leased before the stop was seen: no new send
                        await self._queries.give_back([claimed])
                        return
                    claimed = await self._deliver(http, claimed)
                except asyncio.CancelledError:
                    raise
                except Exception:  # the record did not commit: the lease runs out
                    _log.exception("recording a webhook attempt failed")
                    return

    async def _send(
        self, http: httpx.AsyncClient, claimed: Claimed
    ) -> tuple[int | None, str | None, float | None]:
        """Post one delivery within the timeout: (HTTP status, error, the wait a failed
        answer's ``Retry-After`` asks for)."""
        body = json.dumps({**claimed.payload, "id": claimed.id}, separators=(",", ":"))
        timeout = self._settings.webhook_timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                headers = signed_headers(claimed, body, self._store.db.clock())
                # the status line decides: the body is never read, so a receiver that
                # answers with a large or endless one costs neither memory nor the timeout
                request = http.build_request("POST", claimed.url, content=body, headers=headers)
                response = await http.send(request, stream=True)
                await response.aclose()
        except InvalidRequest as refused:
            return None, f"refused target: {refused.detail}", None
        except TimeoutError:
            return None, f"no answer within {timeout:g} s", None
        except Exception as failed:  # every send ends in a recorded attempt
            # httpx.HTTPError and anything else (httpx.InvalidURL is no HTTPError): an
            # exception let through would leave the delivery leased again and again,
            # never recorded nor given up, and the endpoint's later events behind it
            return None, f"{type(failed).__name__}: {failed}", None
        status = response.status_code
        if 200 <= status < 300:
            return status, None, None
        return status, f"HTTP {status}", parse_retry_after(response.headers)

    async def _deliver(self, http: httpx.AsyncClient, claimed: Claimed) -> Claimed | None:
        """Send, record, and lease the endpoint's next delivery after a success."""
        started = time.perf_counter()
        status, error, retry_after = await self._send(http, claimed)
        duration = (time.perf_counter() - started) * 1000
        now = self._store.db.clock()
        failed = error is not None
        return await self._queries.record_attempt(
            claimed,
            status=status,
            error=error,
            duration_ms=duration,
            retry_at=retry_at(claimed, now, self._settings, asked=retry_after) if failed else None,
            circuit_open_until=(
                circuit_open_until(claimed.endpoint_failures + 1, now, self._settings)
                if failed
                else None
            ),
            lease_next=None if failed or self._stopping else self._lease_seconds,
        )
