"""Signed pagination cursors: honoured by every store that shares the service key,
refused when edited, forged, from another list or signed with another key."""

from __future__ import annotations

import base64
import json

import pytest
from sqlalchemy.engine import Engine

from storage import InvalidCursor, Store
from storage.canonical import iso_utc
from storage.cursors import CursorCodec
from storage.keys import ServiceKey
from tests.conftest import Clock
from tests.storage.helpers import submit

KEY = ServiceKey(b"k" * 32)


async def _first_cursor(store: Store, clock: Clock, *, gradings: int = 3) -> str:
    for _ in range(gradings):
        await submit(store)
        clock.advance(1)
    _, cursor = await store.gradings.page(limit=1)
    assert cursor is not None
    return cursor


def _flip(text: str, index: int) -> str:
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


async def test_a_cursor_issued_by_one_store_works_on_another_sharing_the_key(
    engine: Engine, clock: Clock
) -> None:
    first = Store(engine, clock=clock, key=KEY)
    second = Store(engine, clock=clock, key=ServiceKey(b"k" * 32))
    cursor = await _first_cursor(first, clock)
    on_first, _ = await first.gradings.page(after=cursor, limit=5)
    on_second, _ = await second.gradings.page(after=cursor, limit=5)
    assert [v.grading.id for v in on_second] == [v.grading.id for v in on_first]
    assert len(on_second) == 2


async def test_a_cursor_signed_with_another_key_is_refused(engine: Engine, clock: Clock) -> None:
    cursor = await _first_cursor(Store(engine, clock=clock, key=KEY), clock)
    other = Store(engine, clock=clock, key=ServiceKey(b"o" * 32))
    with pytest.raises(InvalidCursor) as raised:
        await other.gradings.page(after=cursor)
    assert raised.value.field == "cursor"


async def test_an_edited_cursor_is_refused(engine: Engine, clock: Clock) -> None:
    store = Store(engine, clock=clock, key=KEY)
    cursor = await _first_cursor(store, clock)
    payload, tag = cursor.split(".")
    for edited in (_flip(payload, 3), f"{payload}.{_flip(tag, 0)}", payload, cursor + "A"):
        with pytest.raises(InvalidCursor):
            await store.gradings.page(after=edited)


async def test_a_well_formed_unsigned_position_is_refused(store: Store) -> None:
    """What a client could build from an issued cursor's visible half: a real position."""
    view = (await submit(store)).grading
    raw = json.dumps([view.created_at.isoformat(), view.id]).encode()
    unsigned = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    for forged in (unsigned, f"{unsigned}.", f"{unsigned}.{'A' * 22}"):
        with pytest.raises(InvalidCursor):
            await store.gradings.page(after=forged)


async def test_a_cursor_of_the_lists_earlier_order_is_refused(engine: Engine, clock: Clock) -> None:
    """A cursor signed when the list of gradings was ordered by ``(listed_at, id)`` alone
    holds no submission to continue after: it is refused, telling the client to start
    again from the first page, rather than listing a submission twice or leaving one
    out."""
    store = Store(engine, clock=clock, key=KEY)
    grading = (await submit(store)).grading
    earlier = CursorCodec(KEY, "gradings").encode([iso_utc(grading.listed_at), grading.id])
    with pytest.raises(InvalidCursor, match="start again from the first page"):
        await store.gradings.page(after=earlier)


def test_a_cursor_is_url_safe_and_bound_to_its_list() -> None:
    gradings, other = CursorCodec(KEY, "gradings"), CursorCodec(KEY, "scenarios")
    cursor = gradings.encode(["2026-01-01T00:00:00+00:00", "g-1\u00e9/?&="])
    assert all(c.isalnum() or c in "-_." for c in cursor)
    assert gradings.decode(cursor) == ["2026-01-01T00:00:00+00:00", "g-1\u00e9/?&="]
    with pytest.raises(InvalidCursor):
        other.decode(cursor)


@pytest.mark.parametrize("cursor", ["", ".", "a.b.c", "\u00e9.x", "x" * 600, "%%%.@@@"])
def test_malformed_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        CursorCodec(KEY, "gradings").decode(cursor)


@pytest.mark.parametrize(
    "position",
    [
        ["9999-12-31T23:59:59-14:00", "s" * 32, "a" * 32],
        ["2026-01-01T00:00:00", "s" * 32, "a" * 32],
        ["2026-01-01T00:00:00+00:00", "s" * 32, "a\u0000b"],
        ["2026-01-01T00:00:00+00:00", "s\u0000t", "a" * 32],
        ["2026-01-01T00:00:00+00:00", "s" * 32, 7],
        ["2026-01-01T00:00:00+00:00", None, "a" * 32],
        ["2026-01-01T00:00:00+00:00", "s" * 32, "a" * 32, "b"],
        ["2026-01-01T00:00:00+00:00"],
        [],
    ],
)
async def test_a_signed_position_no_grading_can_have_is_still_refused(
    engine: Engine, position: list[object]
) -> None:
    """Should the key leak, a signed cursor still never carries a NUL or an unstorable date
    to the database."""
    signed = CursorCodec(KEY, "gradings").encode(position)
    with pytest.raises(InvalidCursor):
        await Store(engine, key=KEY).gradings.page(after=signed)
