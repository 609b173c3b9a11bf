"""What an export holds: the gradings asked for (superseded ones without shadow ones), one
line a grading in JSON Lines, and an archive when one is asked for."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from sqlalchemy.engine import Engine

from storage import Store
from tests.support.gradings import add_many, shadow_regrade
from tests.support.keyed_judges import KEYS, PANEL_MODEL_SHOWN, graded_by_keyed_panel, keyed_panel
from tests.support.keys import session_key

EXPORTS = "/v1/exports/gradings"


async def test_include_superseded_does_not_pull_in_shadow_gradings(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """``include_superseded`` adds the gradings a promoted regrade replaced, and
    never a shadow regrade's (those need ``include=shadow``)."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2, "fail": 1}, agent="a")
    await shadow_regrade(store, passing=1)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        current = await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
        with_superseded = await client.get(
            EXPORTS, params={"format": "jsonl", "include_superseded": "true"}, headers=admin
        )
    assert current.status_code == with_superseded.status_code == 200
    assert current.headers["x-export-rows"] == "3"
    judges = {
        json.loads(line)["judge"]["model"] for line in with_superseded.text.split("\n") if line
    }
    assert "new-judge" not in judges, "shadow gradings exported without include=shadow"
    assert with_superseded.headers["x-export-rows"] == "3"


async def test_a_jsonl_export_has_one_line_per_grading_whatever_the_text(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """One grading a line, as ``X-Export-Rows`` counts, whatever separators Unicode
    takes for line ends the texts hold."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 1}, agent="agent\u2028two", model="m\x85x", run_id="r\u2029")
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        response = await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
    assert response.status_code == 200
    lines = response.content.decode("utf-8").splitlines()
    assert int(response.headers["x-export-rows"]) == len(lines) == 1, lines
    assert json.loads(lines[0])["id"]


async def test_an_archive_asked_of_the_sregym_export_is_an_archive_or_refused(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """``archive`` alone asks for the results folder as that archive, as ``--archive``
    does on the command line; with another format it is refused naming it."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 1}, agent="a")
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        response = await client.get(
            EXPORTS, params={"format": "sregym", "archive": "zip"}, headers=admin
        )
    assert response.status_code == 422 or response.headers["content-type"].startswith(
        "application/zip"
    ), (response.status_code, response.headers["content-type"])


async def test_every_export_names_where_a_panels_members_run_never_their_keys(
    api_client: Any, tokens: Any
) -> None:
    """A panel whose members take their keys in their base URLs' queries: each export
    format names the judge with every member's address, the keys masked (the grading
    objects of JSON Lines, their votes included; the judge's columns of both CSVs)."""
    agent, admin = await tokens("submitter"), await tokens("admin")
    async with api_client(**keyed_panel()) as client:
        await graded_by_keyed_panel(client, agent)
        exports = {
            fmt: await client.get(EXPORTS, params={"format": fmt}, headers=admin)
            for fmt in ("jsonl", "csv", "sregym")
        }
    for fmt, export in exports.items():
        assert export.status_code == 200, export.text
        assert not any(key in export.text for key in KEYS), fmt
    [line] = exports["jsonl"].text.splitlines()
    assert json.loads(line)["judge"]["model"] == PANEL_MODEL_SHOWN
    [row] = csv.DictReader(io.StringIO(exports["csv"].text))
    assert row["judge_model"] == PANEL_MODEL_SHOWN
    [row] = csv.DictReader(io.StringIO(exports["sregym"].text))
    assert row["judge"] == f"panel:{PANEL_MODEL_SHOWN}"
