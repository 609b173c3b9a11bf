"""The webhook delivery worker inside ``serve`` (and ``worker``).

It leases due deliveries from the outbox (each endpoint's oldest pending one, so events
arrive in order), signs each as Standard Webhooks asks (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``, with the ``standardwebhooks`` library),
posts it, and records the attempt: a 2xx delivers it; anything else is retried with
exponential backoff (``SRE_JUDGE_WEBHOOK_RETRY_SECONDS``, doubling, at most an hour
apart) until it has failed for ``SRE_JUDGE_WEBHOOK_GIVE_UP_SECONDS`` (a day), then it is
dead-lettered (state ``dead``; an admin can redeliver it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from datetime import datetime, timedelta

import httpx
from standardwebhooks.webhooks import Webhook

from api.service.errors import InvalidRequest
from api.service.settings import Settings
from api.service.webhooks import allowed_hosts, check_target
from storage import Store
from storage.webhooks.repository import Claimed

__all__ = ["WebhookDelivery", "retry_at", "signed_headers"]

_log = logging.getLogger(__name__)
_MAX_DELAY = 3600.0


def signed_headers(claimed: Claimed, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one send of ``body``."""
    return {
        "content-type": "application/json",
        "webhook-id": claimed.id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(claimed.secret).sign(claimed.id, now, body),
    }


def retry_at(claimed: Claimed, now: datetime, settings: Settings) -> datetime | None:
    """When to try again after a failed attempt, or None once it is time to give up."""
    if (now - claimed.created_at).total_seconds() >= settings.webhook_give_up_seconds:
        return None
    delay = min(_MAX_DELAY, settings.webhook_retry_seconds * 2 ** (claimed.attempts - 1))
    return now + timedelta(seconds=delay * random.uniform(0.8, 1.0))


class WebhookDelivery:
    """Delivers the outbox of one store; start it with the grading workers."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self._store = store
        self._settings = settings
        self._allow = allowed_hosts(settings.webhook_allow_hosts)
        self._task: asyncio.Task[None] | None = None
        self._http: httpx.AsyncClient | None = None

    def start(self) -> None:
        """Start the delivery loop."""
        if self._task is None:
            self._http = httpx.AsyncClient(
                timeout=self._settings.webhook_timeout_seconds, follow_redirects=False
            )
            self._task = asyncio.create_task(self._run(), name="webhook-delivery")

    async def stop(self) -> None:
        """Stop the loop (a delivery in flight is abandoned; its lease runs out)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _run(self) -> None:
        while True:
            try:
                sent = await self.deliver_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database away for a moment: try again later
                _log.exception("webhook delivery round failed")
                sent = 0
            if not sent:
                await asyncio.sleep(self._settings.poll_seconds)

    async def deliver_due(self) -> int:
        """One round: lease what is due, each endpoint's deliveries in order, endpoints
        concurrently; how many endpoints had something to send."""
        lease = self._settings.webhook_timeout_seconds + 10
        batches = await self._store.webhooks.claim_due(lease_seconds=lease)
        await asyncio.gather(*(self._deliver_in_order(b) for b in batches))
        return len(batches)

    async def _deliver_in_order(self, batch: list[Claimed]) -> None:
        """One endpoint's deliveries one after another; those behind a failure wait."""
        for index, claimed in enumerate(batch):
            if not await self._deliver(claimed):
                await self._store.webhooks.release(batch[index + 1 :])
                return

    async def _deliver(self, claimed: Claimed) -> bool:
        assert self._http is not None
        body = json.dumps({**claimed.payload, "id": claimed.id}, separators=(",", ":"))
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        try:
            await check_target(claimed.url, self._allow)
            now = self._store.db.clock()
            response = await self._http.post(
                claimed.url, content=body, headers=signed_headers(claimed, body, now)
            )
            status = response.status_code
            if not 200 <= status < 300:
                error = f"HTTP {status}"
        except InvalidRequest as refused:
            error = f"refused target: {refused.detail}"
        except httpx.HTTPError as failed:
            error = f"{type(failed).__name__}: {failed}"
        duration = (time.perf_counter() - started) * 1000
        now = self._store.db.clock()
        delivered = error is None
        await self._store.webhooks.record_attempt(
            claimed,
            status=status,
            error=error,
            duration_ms=duration,
            retry_at=None if delivered else retry_at(claimed, now, self._settings),
        )
        return delivered
