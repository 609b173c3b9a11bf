"""A judge that changed behind its name: storing its new digest and saying so.

The backend pool's digest tracker (``judge.identity``) tells :func:`digest_listener` of
every digest it learns; the digest is stored when it is not the one stored last for the
judge's name (``storage.judge_digests``). A digest that could not be stored (a busy
database) is told, and stored, again at the tracker's next use of the judge; meanwhile
qualification goes by the digest the tracker learned. When it replaces another, the
judge changed: the transaction audits ``judge.changed`` (the webhook event of that
name), the metric ``sre_judge_judge_changes_total`` counts it, a warning is logged, and
the judge's qualification is provisional until a calibration run measures the new model
(``storage.calibration.holds``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from api.service.metrics import Metrics
from api.service.services import Services
from judge.identity import DigestChange
from storage.judge_digests import JudgeDigestRecord

__all__ = ["digest_listener", "record_digest"]

log = logging.getLogger("sre_judge.judges")


async def record_digest(
    services: Services, change: DigestChange, *, metrics: Metrics | None = None
) -> JudgeDigestRecord | None:
    """Store the digest of ``change`` if new for the judge's name; the row, or None."""
    name = change.judge
    row = await services.store.judge_digests.learn(name, change.current, actor="service")
    if row is not None and row.changed:
        if metrics is not None:
            metrics.judge_changes.labels(name).inc()
        log.warning(
            "judge %s changed behind its name: model digest %s -> %s; cached replies of the "
            "old model are not reused and its qualification is provisional until a "
            "calibration run measures the new one",
            name,
            row.previous_digest,
            row.digest,
        )
    return row


def digest_listener(
    services: Services, metrics: Metrics | None = None
) -> Callable[[DigestChange], Awaitable[bool]]:
    """The listener that stores (and announces) the digests the pool's tracker learns;
    one it could not store is left to be told again (a grading goes on meanwhile)."""

    async def listen(change: DigestChange) -> bool:
        try:
            await record_digest(services, change, metrics=metrics)
        except Exception:
            log.exception("storing the model digest of judge %s failed", change.judge)
            return False
        return True

    return listen
