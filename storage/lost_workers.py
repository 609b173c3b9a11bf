"""Workers lost while they held a grading: each loss audited once, and counted.

A worker that holds a grading's lease and is killed (or cut off from the database)
stores no outcome and never gives the lease back: the lease runs out in its hands. What
then clears that lease audits the loss (``LEASE_EXPIRED``, naming the worker): the claim
that takes the grading over (``storage.queue``), a judge move (``storage.pending_judges``),
the cancel of a regrade job whose item it is (``api.regrade.job_queries``) and the
claim's sweep of a cancelled job's abandoned items (``storage.regrade.lifecycle``). All
but the takeover clear the lease's holder and keep its expiry, so that the next claim
counts the losses recorded already (``Claim.lost_workers``) without auditing them again.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.canonical import iso_utc
from storage.database import AuditBatch
from storage.tables import AuditRecord, GradingRecord

__all__ = ["LEASE_EXPIRED", "workers_lost"]

#: the audit event of a lease that ran out in its worker's hands, appended by what
#: clears it (a claim that takes the grading over, a judge move, a cancel): the worker
#: was lost, with no outcome stored and the lease not given back
LEASE_EXPIRED = "grading.lease_expired"


def workers_lost(
    session: Session,
    taken: Sequence[GradingRecord],
    actor: str,
    into: AuditBatch,
    *,
    audited: Sequence[GradingRecord] = (),
) -> dict[str, int]:
    """Audit ``into`` the batch that ``actor`` clears the leases of ``taken``, gradings
    whose leases ran out in their workers' hands (``LEASE_EXPIRED``: the worker lost, the
    claim it lost); how many workers each of them, and each of ``audited`` (whose loss
    is audited already), has lost, counted in the audit log, which keeps every loss.
    One query, only when there are such gradings."""
    if not taken and not audited:
        return {}
    query = (
        select(col(AuditRecord.entity_id), func.count())
        .where(
            col(AuditRecord.entity_id).in_([g.id for g in (*taken, *audited)]),
            col(AuditRecord.entity_type) == "grading",
            col(AuditRecord.event) == LEASE_EXPIRED,
        )
        .group_by(col(AuditRecord.entity_id))
    )
    before: dict[str, int] = {g: n for g, n in session.execute(query)}
    lost = {g.id: before.get(g.id, 0) for g in audited}
    for grading in taken:
        lost[grading.id] = before.get(grading.id, 0) + 1
        expired = grading.lease_expires_at
        into.add(
            {
                "event": LEASE_EXPIRED,
                "entity_type": "grading",
                "entity_id": grading.id,
                "actor": actor,
                "payload": {
                    "grading_id": grading.id,
                    "worker": grading.lease_owner,
                    "claim_count": grading.claim_count,
                    "expired_at": iso_utc(expired) if expired is not None else None,
                    "lost_workers": lost[grading.id],
                },
            }
        )
    return lost
