"""``GET /v1/gradings`` filters by judge and rubric as reports label them, as the
workbench's list does, so a report's group lists the gradings behind it."""

from __future__ import annotations

from typing import Any

import pytest

from judge.backends.scripted import ScriptedBackend
from tests.api.conftest import ClientFactory
from tests.support.regrades import promote_regrade
from tests.support.submissions import DIAGNOSIS, graded

NEW_JUDGE = "scripted:fail"


async def _listed(client: Any, admin: dict[str, str], **params: str) -> set[str]:
    reply = await client.get("/v1/gradings", params=params, headers=admin)
    assert reply.status_code == 200, reply.text
    return {g["id"] for g in reply.json()["items"]}


async def test_the_list_filters_by_the_judge_a_report_names(
    api_client: ClientFactory, tokens: Any
) -> None:
    """A promoted regrade's grading is listed under its new judge (``backend:model`` or
    the model alone), the others under the judge that graded them."""
    backends = {NEW_JUDGE: ScriptedBackend.for_mode("fail")}
    async with api_client(backends=backends) as client:
        admin = await tokens("admin")
        first = await graded(client, admin, DIAGNOSIS + " (first)")
        await promote_regrade(client, admin, NEW_JUDGE)
        second = await graded(client, admin, DIAGNOSIS + " (second)")
        by_submission = {
            g["submission_id"]: g["id"]
            for g in (await client.get("/v1/gradings", headers=admin)).json()["items"]
        }
        regraded = by_submission[first["submission_id"]]
        assert await _listed(client, admin, judge=NEW_JUDGE) == {regraded}
        assert await _listed(client, admin, judge="fail") == {regraded}
        assert await _listed(client, admin, judge="scripted:pass") == {second["id"]}
        assert await _listed(client, admin, judge="scripted:none") == set()


async def test_the_list_filters_by_rubric_id_and_version(
    api_client: ClientFactory, tokens: Any
) -> None:
    async with api_client() as client:
        admin = await tokens("admin")
        one = await graded(client, admin)
        rubric_id, version = one["rubric"]["id"], one["rubric"]["version"]
        assert one["id"] in await _listed(client, admin, rubric=rubric_id)
        assert one["id"] in await _listed(client, admin, rubric=f"{rubric_id}@{version}")
        assert await _listed(client, admin, rubric=f"{rubric_id}@no-such-version") == set()
        assert await _listed(client, admin, rubric="no-such-rubric") == set()


@pytest.mark.parametrize("rubric", ["sregym-rca@", "@v1", " "])
async def test_a_rubric_filter_naming_no_rubric_is_refused_naming_it(
    api_client: ClientFactory, tokens: Any, rubric: str
) -> None:
    async with api_client() as client:
        admin = await tokens("admin")
        reply = await client.get("/v1/gradings", params={"rubric": rubric}, headers=admin)
        assert reply.status_code == 422, reply.text
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert [e["field"] for e in reply.json()["errors"]] == ["rubric"]
