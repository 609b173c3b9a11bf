"""Scenarios as a dataset over HTTP: listed with filters and signed cursors, loaded in
bulk (JSON Lines or YAML) idempotently, their ground truth versioned with If-Match."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from sqlalchemy import select
from sqlmodel import col

from api.scenarios.queries import ScenarioFilter, ScenarioQueries
from storage import AuditRecord, Store, make_engine
from storage.keys import ServiceKey
from storage.migrate import migrate_to
from storage.scenarios import ScenarioSpec
from tests.conftest import POSTGRES_ADMIN_URL, _postgres_url
from tests.storage.helpers import new_submission, submit
from tests.support.lock_waits import race_at_audit

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"


def _jsonl(*items: dict[str, Any]) -> str:
    return "\n".join(json.dumps(item) for item in items) + "\n"


SCENARIOS = [
    {"id": "hotel/user-port", "ground_truth": TRUTH, "set": "public", "title": "port"},
    {"id": "hotel/geo-down", "ground_truth": "[fault_spec] component=pod/geo", "set": "public"},
    {"id": "social/media-oom", "ground_truth": "[fault_spec] component=pod/oom", "set": "held-out"},
    {"id": "healthy", "ground_truth": "", "set": "held-out", "tags": ["control"]},
]  # fmt: skip


def _field(answer: Any) -> str:
    """The field a problem+json answer names."""
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.text
    return str(answer.json()["errors"][0]["field"])


async def _load(client: Any, headers: dict[str, str], body: str, **params: str) -> Any:
    media = "application/yaml" if params.get("format") == "yaml" else "application/jsonl"
    headers = {**headers, "Content-Type": media}
    return await client.post("/v1/scenarios:bulk", content=body, headers=headers, params=params)


async def test_a_bulk_load_again_changes_nothing_and_says_so_per_item(
    api_client: Any, tokens: Any
) -> None:
    admin = await tokens("admin")
    async with api_client() as client:
        first = await _load(client, admin, _jsonl(*SCENARIOS))
        again = await _load(client, admin, _jsonl(*SCENARIOS))
        fixed = [dict(SCENARIOS[0], ground_truth=TRUTH + " (fixed)", note="typo"), SCENARIOS[1]]
        fixed[1] = dict(fixed[1], title="geo is down")
        as_yaml = yaml.safe_dump({"scenarios": fixed})
        changed = await _load(client, admin, as_yaml, format="yaml")
        versions = await client.get("/v1/scenarios/hotel/user-port/versions", headers=admin)
        first_version = await client.get("/v1/scenarios/hotel/user-port/versions/1", headers=admin)
    assert first.status_code == 200, first.text
    assert [i["outcome"] for i in first.json()["items"]] == ["created"] * 4
    assert again.json()["counts"] == {"unchanged": 4}
    assert [(i["outcome"], i["version"]) for i in changed.json()["items"]] == [
        ("new_version", 2),
        ("updated", 1),
    ]
    assert changed.json()["items"][1]["changed"] == ["title"]
    listed = versions.json()
    assert listed["current_version"] == 2
    assert [(v["version"], v["note"]) for v in listed["items"]] == [(1, ""), (2, "typo")]
    assert first_version.json()["ground_truth"] == TRUTH


async def test_changed_names_the_fields_as_a_request_does(api_client: Any, tokens: Any) -> None:
    """``changed`` of a PUT and of a bulk load item names the fields written in place as
    a request sends them: a new set is ``set``, whatever the table calls it."""
    admin = await tokens("admin")
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "a", "ground_truth": "x"}, headers=admin
        )
        assert made.status_code == 201, made.text
        put = await client.put(
            "/v1/scenarios/a",
            json={"ground_truth": "x", "set": "public"},
            headers={**admin, "If-Match": made.headers["ETag"]},
        )
        bulk = await _load(
            client, admin, _jsonl({"id": "a", "ground_truth": "x", "set": "held-out"})
        )
    assert put.status_code == 200 and put.json()["outcome"] == "updated", put.text
    assert put.json()["changed"] == ["set"], put.text
    assert bulk.json()["items"][0]["changed"] == ["set"], bulk.text


async def test_a_bad_item_stores_nothing_and_the_problem_names_it(
    api_client: Any, tokens: Any
) -> None:
    admin = await tokens("admin")
    bad = [SCENARIOS[0], {"id": "x/y", "set": "public"}]
    duplicate = [SCENARIOS[0], SCENARIOS[0]]
    async with api_client() as client:
        missing = await _load(client, admin, _jsonl(*bad))
        twice = await _load(client, admin, yaml.safe_dump(duplicate), format="yaml")
        broken = await _load(client, admin, _jsonl(SCENARIOS[0]) + "{not json\n")
        reserved = await _load(client, admin, _jsonl({"id": "a/versions/2", "ground_truth": ""}))
        long_tag = await _load(client, admin, _jsonl({**SCENARIOS[0], "tags": ["x" * 65]}))
        deep = await _load(client, admin, "[" * 5000 + "]" * 5000, format="yaml")
        nested = "[" * 100_000 + "]" * 100_000
        deep_line = await _load(client, admin, _jsonl(SCENARIOS[0]) + nested + "\n")
        deep_json = await _load(client, admin, nested, format="json")
        after = await client.get("/v1/scenarios", headers=admin)
    assert missing.status_code == 422
    assert missing.headers["content-type"].startswith("application/problem+json")
    assert _field(missing) == "items[1].ground_truth"
    assert _field(twice) == "items[1].id"
    assert _field(broken) == "items[1]"
    assert _field(reserved) == "items[0].id"
    assert long_tag.status_code == 422 and _field(long_tag) == "items[0].tags[0]", long_tag.text
    assert deep.status_code == 422 and _field(deep) == "body", deep.text
    assert "nest" in deep.json()["detail"]
    assert deep_line.status_code == 422 and _field(deep_line) == "items[1]", deep_line.text
    assert deep_json.status_code == 422 and _field(deep_json) == "body", deep_json.text
    assert "nested too deeply" in deep_line.json()["detail"] + deep_json.json()["detail"]
    assert after.json()["items"] == []


async def test_a_bad_item_of_a_json_body_is_named_items_i(api_client: Any, tokens: Any) -> None:
    """An item of a JSON list, of ``{"scenarios": [...]}`` or a single JSON object holding
    what no database stores (a NUL) is named ``items[i].field``, as in JSON Lines."""
    admin = await tokens("admin")
    bad = b'{"id": "a", "ground_truth": "t"}, {"id": "b", "ground_truth": "t\\u0000"}'
    bodies = {
        "list": b"[" + bad + b"]",
        "mapping": b'{"scenarios": [' + bad + b"]}",
        "object": b'{"id": "b", "ground_truth": "t\\u0000"}',
        "lines": bad.replace(b"}, {", b"}\n{") + b"\n",
    }
    fields = {}
    async with api_client() as client:
        for name, body in bodies.items():
            media = "application/jsonl" if name == "lines" else "application/json"
            answer = await client.post(
                "/v1/scenarios:bulk", content=body, headers={**admin, "Content-Type": media}
            )
            assert answer.status_code == 422, answer.text
            fields[name] = _field(answer)
    assert fields == {
        "list": "items[1].ground_truth", "mapping": "items[1].ground_truth",
        "object": "items[0].ground_truth", "lines": "items[1].ground_truth",
    }  # fmt: skip


async def test_a_list_element_is_named_by_one_json_path_whatever_is_wrong_with_it(
    api_client: Any, tokens: Any
) -> None:
    """A tag of the wrong type and a tag holding a NUL are both ``items[0].tags[0]``:
    a place in an item is a JSON path, list positions in brackets."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        typed = await _load(client, admin, '{"id": "a", "ground_truth": "xy", "tags": [5]}\n')
        nul = await _load(client, admin, '{"id": "a", "ground_truth": "xy", "tags": ["\\u0000"]}\n')
    assert typed.status_code == nul.status_code == 422, (typed.text, nul.text)
    assert [e["field"] for e in nul.json()["errors"]] == ["items[0].tags[0]"], nul.text
    assert [e["field"] for e in typed.json()["errors"]] == ["items[0].tags[0]"], typed.text
    assert typed.json()["detail"].startswith("line 1: tags[0]: "), typed.text


TWICE = '{"id": "hotel/user-port", "ground_truth": "port 9999", "ground_truth": "port 8086"}'


@pytest.mark.parametrize(
    ("media", "body", "field"),
    [
        ("application/jsonl", f"{TWICE}\n", "items[0].ground_truth"),
        ("application/json", f"[{TWICE}]", "items[0].ground_truth"),
        ("application/json", f'{{"scenarios": [{TWICE}]}}', "items[0].ground_truth"),
        ("application/json", TWICE, "items[0].ground_truth"),
        ("application/json", '{"scenarios": [], "scenarios": []}', "body"),
        (
            "application/yaml",
            "- id: a\n  ground_truth: port 9999\n  tags: [x]\n- id: b\n  ground_truth: b\n"
            "  ground_truth: port 8086\n",
            "items[1].ground_truth",
        ),
        ("application/yaml", "scenarios: []\nscenarios: []\n", "body"),
    ],
    ids=["jsonl", "json-list", "json-scenarios", "json-object", "json-body", "yaml", "yaml-body"],
)
async def test_a_key_given_twice_in_a_load_is_refused_and_named(
    api_client: Any, tokens: Any, media: str, body: str, field: str
) -> None:
    """A key an item gives twice (which of its values the writer meant is unknown) is a
    422 naming the item and the key, and nothing is stored, in every format; the key
    ``scenarios`` given twice is the body's fault."""
    admin = await tokens("admin")
    async with api_client() as client:
        loaded = await client.post(
            "/v1/scenarios:bulk", content=body, headers={**admin, "Content-Type": media}
        )
        listed = await client.get("/v1/scenarios", headers=admin)
    assert loaded.status_code == 422, loaded.text
    assert _field(loaded) == field
    assert "is given twice" in loaded.json()["detail"]
    assert "port 8086" not in loaded.text and "port 9999" not in loaded.text
    assert listed.json()["items"] == []


async def test_a_repeated_id_names_the_first_item_as_the_load_numbers_it(
    api_client: Any, tokens: Any
) -> None:
    """``detail`` numbers a load's items from 1 (``item 2``, ``line 2``), the item an id
    repeats too; ``field`` numbers them from 0 (``items[1]``)."""
    admin = await tokens("admin")
    twice = [{"id": "a", "ground_truth": "t"}, {"id": "a", "ground_truth": "u"}]
    async with api_client() as client:
        by_yaml = await _load(client, admin, yaml.safe_dump(twice), format="yaml")
        by_lines = await _load(client, admin, _jsonl(*twice))
    assert by_yaml.status_code == 422 and by_lines.status_code == 422
    assert _field(by_yaml) == _field(by_lines) == "items[1].id"
    assert by_yaml.json()["detail"] == "item 2: id 'a' is also item 1"
    assert by_lines.json()["detail"] == "line 2: id 'a' is also line 1"


async def test_a_ground_truth_too_big_or_holding_a_nul_is_named_by_its_item_or_line(
    api_client: Any, tokens: Any
) -> None:
    """A ground truth over the size limit, on the third line of JSON Lines (a blank line
    before it), is ``line 3`` in ``detail``; one holding a NUL, in the second item of a
    YAML list, is ``item 2``: as every other bad item is named."""
    admin = await tokens("admin")
    first = {"id": "a", "ground_truth": "[fault_spec] component=pod/a || x"}
    big = _jsonl(first) + "\n" + _jsonl({"id": "b", "ground_truth": "x" * 2000})
    nul = '- id: a\n  ground_truth: x\n- id: b\n  ground_truth: "a\\0b"\n'
    async with api_client(max_text_bytes=1024, start_workers=False) as client:
        too_big = await _load(client, admin, big)
        with_nul = await _load(client, admin, nul, format="yaml")
    assert too_big.status_code == with_nul.status_code == 422, (too_big.text, with_nul.text)
    assert _field(too_big) == _field(with_nul) == "items[1].ground_truth"
    assert too_big.json()["detail"].startswith("line 3: ground_truth is 2000 bytes"), too_big.text
    assert with_nul.json()["detail"].startswith("item 2: ground_truth "), with_nul.text


async def test_the_note_of_a_new_scenario_is_kept_with_version_1(
    api_client: Any, tokens: Any, store: Store
) -> None:
    """The ``note`` of a registration or of a bulk item that creates a scenario is kept
    with version 1 of its ground truth, and in the audit record of its creation."""
    admin = await tokens("admin")
    note = "from SREGym v1.2"
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "one", "ground_truth": TRUTH, "note": note}, headers=admin
        )
        loaded = await _load(
            client, admin, _jsonl({"id": "two", "ground_truth": "t", "note": note})
        )
        first = await client.get("/v1/scenarios/one/versions/1", headers=admin)
        second = await client.get("/v1/scenarios/two/versions/1", headers=admin)
    assert made.status_code == 201 and loaded.status_code == 200, loaded.text
    assert first.json()["note"] == second.json()["note"] == note
    query = select(AuditRecord).where(col(AuditRecord.event) == "scenario.created")
    with store.db.sessions(read=True)() as session, session.begin():
        created = {r.entity_id: r.payload for r in session.execute(query).scalars()}
    assert {created["one"]["note"], created["two"]["note"]} == {note}


async def test_the_list_filters_and_pages_with_signed_cursors(api_client: Any, tokens: Any) -> None:
    admin = await tokens("admin")
    async with api_client() as client:
        await _load(client, admin, _jsonl(*SCENARIOS[:2]))
        between = datetime.now(UTC).isoformat()
        await _load(client, admin, _jsonl(*SCENARIOS[2:]))
        seen: list[str] = []
        cursor = None
        for _ in range(5):
            params = {"limit": "1"} | ({"cursor": cursor} if cursor else {})
            page = (await client.get("/v1/scenarios", params=params, headers=admin)).json()
            seen += [item["id"] for item in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        held_out = await client.get("/v1/scenarios", params={"set": "held-out"}, headers=admin)
        hotel = await client.get("/v1/scenarios", params={"id_prefix": "hotel/"}, headers=admin)
        late = await client.get("/v1/scenarios", params={"created_after": between}, headers=admin)
        early = await client.get("/v1/scenarios", params={"created_before": between}, headers=admin)
        forged = await client.get(
            "/v1/scenarios", params={"cursor": "eyJ4Ijox.AAAA"}, headers=admin
        )
        bad_limit = await client.get("/v1/scenarios", params={"limit": "0"}, headers=admin)
    assert seen == sorted(s["id"] for s in SCENARIOS)
    assert {i["id"] for i in held_out.json()["items"]} == {"social/media-oom", "healthy"}
    assert [i["id"] for i in hotel.json()["items"]] == ["hotel/geo-down", "hotel/user-port"]
    assert {i["id"] for i in late.json()["items"]} == {"social/media-oom", "healthy"}
    assert {i["id"] for i in early.json()["items"]} == {"hotel/geo-down", "hotel/user-port"}
    assert forged.status_code == 400 and _field(forged) == "cursor"
    assert bad_limit.status_code in (400, 422)


@pytest.mark.postgres
async def test_an_id_prefix_matches_ids_literally_and_in_their_case(
    api_client: Any, tokens: Any
) -> None:
    """Ids are case-sensitive (``hotel/a`` and ``HOTEL/b`` are two): SQLite's LIKE folds
    ASCII case, so ``HOTEL/`` listed ``hotel/...`` there and not on PostgreSQL."""
    admin = await tokens("admin")
    async with api_client() as client:
        for scenario_id in ("hotel/user-port", "HOTEL/other", "hotel_x/y"):
            sent = {"id": scenario_id, "ground_truth": "gt"}
            assert (await client.post("/v1/scenarios", json=sent, headers=admin)).is_success
        listed = {
            prefix: [
                item["id"]
                for item in (
                    await client.get("/v1/scenarios", params={"id_prefix": prefix}, headers=admin)
                ).json()["items"]
            ]
            for prefix in ("HOTEL/", "hotel/", "hotel_", "Hotel")
        }
    assert listed == {
        "HOTEL/": ["HOTEL/other"], "hotel/": ["hotel/user-port"], "hotel_": ["hotel_x/y"],
        "Hotel": [],
    }  # fmt: skip


#: valid scenario ids whose code point order and an English collation's order differ
ORDER_IDS = ["A", "B", "a", "b", "a_b", "aB", "a-b", "a.b", "a/b", "a1", "hotel/A", "hotel/a"]


@contextmanager
def _english_database(db_backend: str, tmp_path: Path) -> Iterator[str]:
    """A database of its own: a SQLite file, or on PostgreSQL one whose collation is
    English (ICU ``en-US``, as a cluster made with an English locale has), not ``C``."""
    if db_backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'order.db'}"
        return
    name = f"srejudge_test_{secrets.token_hex(6)}"
    try:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                f'CREATE DATABASE "{name}" TEMPLATE template0 '
                "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
            )
    except psycopg.Error as exc:  # a server without ICU
        pytest.skip(f"no PostgreSQL database with an en-US collation: {exc}")
    try:
        yield _postgres_url(name)
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_the_list_is_in_code_point_order_whatever_the_database_collation(
    db_backend: str, tmp_path: Path, service_key: ServiceKey
) -> None:
    """Scenarios are listed, page after page, in the order of their ids' code points
    (``A`` before ``a``, ``aB`` before ``a_b``) on SQLite and on a PostgreSQL database
    whose collation is English alike."""
    with _english_database(db_backend, tmp_path) as url:
        engine = make_engine(url)
        try:
            migrate_to(engine)
            store = Store(engine, key=service_key)
            for scenario_id in reversed(ORDER_IDS):
                spec = ScenarioSpec(id=scenario_id, ground_truth=f"truth of {scenario_id}")
                await store.scenarios.create(spec, actor="admin")
            queries = ScenarioQueries(store.db)
            seen: list[str] = []
            cursor: str | None = None
            while True:  # pages of three, as a client pages
                rows, cursor = await queries.page(ScenarioFilter(), after=cursor, limit=3)
                seen += [r.id for r in rows]
                if cursor is None:
                    break
        finally:
            engine.dispose()
    assert seen == sorted(ORDER_IDS)


async def test_an_update_needs_the_current_etag_and_makes_a_version(
    api_client: Any, tokens: Any
) -> None:
    admin = await tokens("admin")
    fixed = {"ground_truth": TRUTH + "!", "note": "typo"}
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": TRUTH}, headers=admin
        )
        path = "/v1/scenarios/hotel/user-port"
        unconditional = await client.put(path, json=fixed, headers=admin)
        stale = await client.put(path, json=fixed, headers={**admin, "If-Match": '"7"'})
        updated = await client.put(
            path, json=fixed, headers={**admin, "If-Match": made.headers["ETag"]}
        )
        replayed = await client.put(
            path, json=fixed, headers={**admin, "If-Match": made.headers["ETag"]}
        )
        bad_set = await client.put(
            path, json={**fixed, "set": "no spaces"}, headers={**admin, "If-Match": '"2"'}
        )
        unknown = await client.put(
            "/v1/scenarios/nope", json=fixed, headers={**admin, "If-Match": '"1"'}
        )
        now = await client.get(path, headers=admin)
        old = await client.get(f"{path}/versions/1", headers=admin)
        no_such = await client.get(f"{path}/versions/3", headers=admin)
    assert made.headers["ETag"] == '"1"'
    assert unconditional.status_code == 428 and _field(unconditional) == "If-Match"
    assert stale.status_code == 412
    assert updated.status_code == 200, updated.text
    assert updated.json()["outcome"] == "new_version" and updated.headers["ETag"] == '"2"'
    assert replayed.status_code == 412  # the ETag it named is no longer current
    assert bad_set.status_code == 422 and _field(bad_set) == "set"
    assert unknown.status_code == 404
    assert now.json()["ground_truth"] == TRUTH + "!" and now.json()["version"] == 2
    assert now.headers["ETag"] == '"2"'
    assert old.json()["ground_truth"] == TRUTH
    assert no_such.status_code == 404


async def test_only_admins_write_and_only_adjudicators_read_ground_truths(
    api_client: Any, tokens: Any
) -> None:
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    agent = await tokens("submitter")
    async with api_client() as client:
        await _load(client, admin, _jsonl(*SCENARIOS))
        as_agent = await client.get("/v1/scenarios", headers=agent)
        as_adjudicator = await client.get("/v1/scenarios", headers=adjudicator)
        load = await _load(client, adjudicator, _jsonl(*SCENARIOS))
        put = await client.put(
            "/v1/scenarios/healthy",
            json={"ground_truth": "x"},
            headers={**agent, "If-Match": '"1"'},
        )
    assert as_agent.status_code == 200
    for item in as_agent.json()["items"]:
        assert item["ground_truth"] is None and item["version"] is None
        assert item["title"] is None and item["tags"] == []
        assert "ground_truth" in item["withheld"]
    assert {i["ground_truth"] for i in as_adjudicator.json()["items"]} >= {TRUTH}
    assert load.status_code == 403 and put.status_code == 403


async def test_withheld_names_every_field_a_submitters_list_leaves_out(
    api_client: Any, tokens: Any
) -> None:
    """Every field a submitter's list of scenarios empties is named in ``withheld``, and
    nothing else: a null there means "not for you", never "none" (``updated_at`` is no
    "never updated")."""
    admin, submitter = await tokens("admin"), await tokens("submitter")
    described = {**SCENARIOS[0], "tags": ["port"]}  # every field given
    async with api_client() as client:
        await _load(client, admin, _jsonl(described))
        full = (await client.get("/v1/scenarios", headers=admin)).json()["items"][0]
        seen = (await client.get("/v1/scenarios", headers=submitter)).json()["items"][0]
    emptied = {k for k, v in full.items() if v not in (None, [], "") and seen[k] in (None, [])}
    assert emptied == set(seen["withheld"]), (emptied, seen["withheld"])


async def test_loads_creating_one_new_scenario_at_once_both_succeed(store: Store) -> None:
    """Two loads of the same new scenarios at the same moment: the row lock of a load
    holds no row that does not exist yet, so one of them failed on the scenario's key (a
    500 on PostgreSQL); it is run once more and finds them."""
    for round_ in range(3):
        specs = [
            ScenarioSpec(id=f"race/{round_}/{n}", ground_truth=f"truth {n}") for n in range(30)
        ]
        loads = [store.catalog.scenarios.load(specs, actor="admin") for _ in "ab"]
        first, second = await asyncio.gather(*loads)
        kinds = {change.outcome for change in (*first, *second)}
        assert kinds <= {"created", "unchanged"} and len(first) == len(second) == 30


async def test_a_bulk_load_while_a_submission_to_one_of_its_scenarios_is_stored_waits_for_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load changing two scenarios meets a submission to the second (which holds
    that scenario's row through its foreign key and is about to audit): the load locks
    every scenario it changes before it audits any, so it waits for the submission and
    both succeed."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    for sid in ("s1", "s2"):
        await store.catalog.create_scenario(id=sid, ground_truth=f"truth {sid}", actor="admin")
    await submit(store)  # the rubric version is stored: the racing submission audits once
    data = new_submission(scenario_id="s2", ground_truth="truth s2", ground_truth_source="scenario")
    specs = [
        ScenarioSpec("s1", "truth s1", title="renamed 1"),
        ScenarioSpec("s2", "truth s2", title="renamed 2"),
    ]
    _, changes = await race_at_audit(
        store,
        monkeypatch,
        "submission.received",
        submit(store, data),
        lambda: store.scenarios.load(specs, actor="admin"),
    )
    assert [c.outcome for c in changes] == ["updated", "updated"]
