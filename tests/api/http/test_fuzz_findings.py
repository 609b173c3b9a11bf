"""Defects the property-based runs led to, each kept as a regression test.

A text field the API accepted longer than its database column made PostgreSQL refuse the
insert (SQLite does not check lengths): a 500 on PostgreSQL only. The API's limit is
now the column's, so a longer value is a 422 naming the field on both databases.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.submissions import TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


@pytest.mark.parametrize(("length", "status"), [(256, 201), (257, 422), (300, 422)])
async def test_a_scenario_title_fits_its_column(
    api_client: Any, tokens: Any, length: int, status: int
) -> None:
    admin = await tokens("admin")
    body = {"id": f"scenario-{length}", "ground_truth": TRUTH, "title": "t" * length}
    async with api_client(start_workers=False) as client:
        answer = await client.post("/v1/scenarios", json=body, headers=admin)
    assert answer.status_code == status, answer.text
    if status == 422:
        assert [e["field"] for e in answer.json()["errors"]] == ["title"]


@pytest.mark.parametrize(("length", "status"), [(128, 201), (129, 422), (200, 422)])
async def test_a_token_name_fits_its_column(
    api_client: Any, tokens: Any, length: int, status: int
) -> None:
    admin = await tokens("admin")
    body = {"name": "n" * length, "role": "submitter"}
    async with api_client(start_workers=False) as client:
        answer = await client.post("/v1/tokens", json=body, headers=admin)
    assert answer.status_code == status, answer.text
    if status == 422:
        assert [e["field"] for e in answer.json()["errors"]] == ["name"]
