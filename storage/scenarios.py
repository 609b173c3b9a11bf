"""Scenarios: registering, changing and loading them; every ground truth kept as a version.

A scenario's row holds its newest ground truth and version number; each version is
also a row of ``scenario_version``. A changed ground truth makes a new version; a
changed title, tag list or set is written in place (audited) and keeps the version.
Loading many scenarios is one transaction and idempotent: each item says whether it
was ``created``, ``unchanged``, given a ``new_version`` or ``updated`` in place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.audit.records import RecordRow
from storage.canonical import sha256_hex
from storage.database import AuditBatch, Database
from storage.errors import Conflict, NotFound, PreconditionFailed
from storage.scenario_tables import DEFAULT_SCENARIO_SET, ScenarioVersionRecord
from storage.tables import ScenarioRecord

__all__ = [
    "SCENARIO_ID_MAX_LENGTH",
    "SCENARIO_ID_PATTERN",
    "LoadOutcome",
    "ScenarioChange",
    "ScenarioRepository",
    "ScenarioSpec",
    "scenario_id_problem",
]

#: what a scenario id may hold: segments of letters, digits and ``_.:-``, each starting
#: with a letter or a digit, joined by ``/`` (SREGym's problem ids nest). No empty, ``.``
#: or ``..`` segment and no ``/`` at the end: a URL path would lose them, and the id
#: could never be read back
SCENARIO_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*(/[A-Za-z0-9][A-Za-z0-9_.:-]*)*$"
SCENARIO_ID_MAX_LENGTH = 128
#: a path ending so would name the versions of a scenario, not a scenario
_VERSIONS_SUFFIX = re.compile(r"/versions(/[0-9]+)?$")


def scenario_id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a scenario id, or None when it can: the one rule of the
    API's registrations and of the scenarios an import registers."""
    if not 1 <= len(value) <= SCENARIO_ID_MAX_LENGTH:
        return f"scenario ids are 1 to {SCENARIO_ID_MAX_LENGTH} characters"
    if not re.fullmatch(SCENARIO_ID_PATTERN, value):
        return (
            "scenario ids are segments of letters, digits and _.:- joined by '/', each "
            "starting with a letter or a digit"
        )
    # reserved: exports name a ground truth its submitter sent ``inline:<claimed id>``
    if value.startswith("inline:"):
        return "scenario ids may not start with 'inline:' (reserved)"
    if _VERSIONS_SUFFIX.search(value):
        return "scenario ids may not end with /versions or /versions/<n>"
    return None


LoadOutcome = Literal["created", "unchanged", "new_version", "updated"]


@dataclass(frozen=True)
class ScenarioSpec:
    """A scenario as registered or loaded; None leaves an existing scenario's value."""

    id: str
    ground_truth: str
    title: str | None = None
    tags: tuple[str, ...] | None = None
    scenario_set: str | None = None
    #: where a new scenario's ground truth came from, or why it changed (kept with the
    #: version it makes)
    note: str = ""


@dataclass(frozen=True)
class ScenarioChange:
    """What writing one spec did."""

    scenario: ScenarioRecord
    outcome: LoadOutcome
    #: the fields written in place (title, tags, scenario_set), for ``updated``
    changed: tuple[str, ...] = field(default=())


def _truth_facts(truth: str) -> dict[str, Any]:
    """What the audit log keeps of a ground truth: never its text."""
    return {"control": truth == "", "ground_truth_sha256": sha256_hex(truth)}


def _taken(existing: ScenarioRecord, spec: ScenarioSpec) -> str:
    """Why registering ``spec`` conflicts with ``existing``: both ground truths' hashes."""
    stored, sent = sha256_hex(existing.ground_truth), sha256_hex(spec.ground_truth)
    same = "the same ground truth" if stored == sent else "another ground truth"
    return (
        f"scenario {spec.id!r} already exists with {same} (version {existing.version}): "
        f"stored sha256 {stored}, sent sha256 {sent}; a new ground truth is a new version "
        "(PUT /v1/scenarios/{id} with If-Match)"
    )


class ScenarioRepository:
    """Registered scenarios and the versions of their ground truths."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def get(self, scenario_id: str) -> ScenarioRecord | None:
        """A scenario by id, or None."""
        return await self._db.run_read(lambda session: session.get(ScenarioRecord, scenario_id))

    async def create(self, spec: ScenarioSpec, *, actor: str) -> ScenarioRecord:
        """Register a scenario as version 1; raises Conflict when the id is taken, naming
        the stored version's ground-truth SHA-256 and the one sent (the same text, or not)."""

        def register(session: Session) -> ScenarioRecord:
            existing = session.get(ScenarioRecord, spec.id)
            if existing is not None:
                raise Conflict(_taken(existing, spec), field="id")
            return self._insert(session, spec, actor=actor)

        try:
            return await self._db.run(register)
        except IntegrityError:
            raise Conflict(f"scenario {spec.id!r} already exists", field="id") from None

    def ensure(
        self, session: Session, spec: ScenarioSpec, *, actor: str, into: AuditBatch | None = None
    ) -> int:
        """Register ``spec`` in the caller's transaction unless its id exists; then the
        newest version whose ground truth is ``spec.ground_truth`` (0 when none is).
        ``into``: a registration's audit event is collected there (``Database.audit``)."""
        values = self._row(spec, actor=actor)
        table = ScenarioRecord.__table__  # type: ignore[attr-defined]
        if self._db.insert_ignore(session, table, values):
            record = ScenarioRecord(**values)
            self._first_version(session, record, spec.note, actor=actor, into=into)
            return 1
        query = (
            select(col(ScenarioVersionRecord.version))
            .where(
                col(ScenarioVersionRecord.scenario_id) == spec.id,
                col(ScenarioVersionRecord.ground_truth) == spec.ground_truth,
            )
            .order_by(col(ScenarioVersionRecord.version).desc())
            .limit(1)
        )
        return int(session.execute(query).scalar_one_or_none() or 0)

    def _row(self, spec: ScenarioSpec, *, actor: str) -> dict[str, Any]:
        now = self._db.clock()
        return {
            "id": spec.id,
            "ground_truth": spec.ground_truth,
            "title": spec.title or "",
            "tags": list(spec.tags or ()),
            "scenario_set": spec.scenario_set or DEFAULT_SCENARIO_SET,
            "version": 1,
            "created_by": actor,
            "created_at": now,
            "updated_at": now,
        }

    def _insert(self, session: Session, spec: ScenarioSpec, *, actor: str) -> ScenarioRecord:
        record = ScenarioRecord(**self._row(spec, actor=actor))
        session.add(record)
        session.flush()
        self._first_version(session, record, spec.note, actor=actor)
        return record

    def _first_version(
        self,
        session: Session,
        record: ScenarioRecord,
        note: str,
        *,
        actor: str,
        into: AuditBatch | None = None,
    ) -> None:
        """Version 1 of ``record``'s ground truth, with the note it was registered with,
        and its audit record (collected ``into`` a batch when one is given)."""
        first = ScenarioVersionRecord(
            scenario_id=record.id,
            version=1,
            ground_truth=record.ground_truth,
            note=note,
            created_by=actor,
            created_at=record.created_at,
        )
        session.add(first)
        session.flush()
        self._db.audit(
            session,
            "scenario.created",
            entity_type="scenario",
            entity_id=record.id,
            actor=actor,
            payload={
                "id": record.id,
                "title": record.title,
                "tags": list(record.tags),
                "set": record.scenario_set,
                "note": note,
                **_truth_facts(record.ground_truth),
            },
            rows=[record, first],
            into=into,
        )

    async def update(
        self, spec: ScenarioSpec, *, expected_revision: int, actor: str
    ) -> ScenarioChange:
        """Change a scenario whose revision (its ETag) is ``expected_revision``.

        NotFound for an unknown id; PreconditionFailed when another change came first.
        """

        def change(session: Session) -> ScenarioChange:
            record = self._locked(session, spec.id)
            if record is None:
                raise NotFound(f"no scenario with id {spec.id!r}")
            if record.revision != expected_revision:
                raise PreconditionFailed(
                    f"scenario {spec.id!r} is at revision {record.revision} (version "
                    f"{record.version}), not {expected_revision}: it changed since you read it",
                    current_revision=record.revision,
                )
            return self._apply(session, record, spec, actor=actor)

        return await self._db.run(change)

    async def load(self, specs: Sequence[ScenarioSpec], *, actor: str) -> list[ScenarioChange]:
        """Create or change every scenario of ``specs`` in one transaction, in order.

        Every existing scenario of the load is locked first, in id order, before the
        first audit record (the lock order of ``storage.database``). A load that creates
        a scenario another load created at the same moment (a row lock holds no row that
        does not exist yet: PostgreSQL) fails on its key and is run once more, finding
        the row then."""

        def load_all(session: Session) -> list[ScenarioChange]:
            records = self._locked_all(session, {spec.id for spec in specs})
            changes = []
            for spec in specs:
                record = records.get(spec.id)
                if record is None:
                    record = records[spec.id] = self._insert(session, spec, actor=actor)
                    changes.append(ScenarioChange(record, "created"))
                else:
                    changes.append(self._apply(session, record, spec, actor=actor))
            return changes

        try:
            return await self._db.run(load_all)
        except IntegrityError:
            return await self._db.run(load_all)

    def _locked(self, session: Session, scenario_id: str) -> ScenarioRecord | None:
        query = select(ScenarioRecord).where(col(ScenarioRecord.id) == scenario_id)
        if self._db.postgres:
            query = query.with_for_update()
        return session.execute(query).scalar_one_or_none()

    def _locked_all(self, session: Session, scenario_ids: set[str]) -> dict[str, ScenarioRecord]:
        """The existing scenarios of ``scenario_ids`` by id, locked in id order (one query)."""
        query = (
            select(ScenarioRecord)
            .where(col(ScenarioRecord.id).in_(sorted(scenario_ids)))
            .order_by(col(ScenarioRecord.id))
        )
        if self._db.postgres:
            query = query.with_for_update()
        return {record.id: record for record in session.execute(query).scalars()}

    def _apply(
        self, session: Session, record: ScenarioRecord, spec: ScenarioSpec, *, actor: str
    ) -> ScenarioChange:
        """Write what ``spec`` changes of ``record``: a new version, fields in place, or
        nothing."""
        wanted = {
            "title": spec.title,
            "tags": list(spec.tags) if spec.tags is not None else None,
            "scenario_set": spec.scenario_set,
        }
        changed = tuple(
            name
            for name, value in wanted.items()
            if value is not None and getattr(record, name) != value
        )
        new_truth = spec.ground_truth != record.ground_truth
        if not new_truth and not changed:
            return ScenarioChange(record, "unchanged")
        now = self._db.clock()
        for name in changed:
            setattr(record, name, wanted[name])
        written: list[RecordRow] = [record]
        if new_truth:
            record.version += 1
            record.ground_truth = spec.ground_truth
            version = ScenarioVersionRecord(
                scenario_id=record.id,
                version=record.version,
                ground_truth=spec.ground_truth,
                note=spec.note,
                created_by=actor,
                created_at=now,
            )
            session.add(version)
            written.append(version)
        else:
            record.in_place_changes += 1
        record.updated_at = now
        session.flush()
        payload = {
            "id": record.id,
            "version": record.version,
            "revision": record.revision,
            "changed": list(changed),
        }
        if new_truth:
            payload |= {"note": spec.note, **_truth_facts(spec.ground_truth)}
        event = "scenario.versioned" if new_truth else "scenario.updated"
        self._db.audit(
            session,
            event,
            entity_type="scenario",
            entity_id=record.id,
            actor=actor,
            payload=payload,
            rows=written,
        )
        return ScenarioChange(record, "new_version" if new_truth else "updated", changed)
