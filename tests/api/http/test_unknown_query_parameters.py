"""A ``/v1`` route refuses query parameters it does not take, and a parameter it takes
once given twice: 400, problem+json naming each one in ``errors[].field``, before
anything of the route runs. A filter with a misspelt name, one the route does not have,
or all but the last value of a repeated one, never answers about other rows instead.
Every parameter the OpenAPI document lists for a route is taken; pages, ``/schema`` and
the probes take any query."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from storage import Store
from tests.support.gradings import add_many
from tests.support.keys import session_key
from tests.support.submissions import DIAGNOSIS, TRUTH, count_submissions

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

UNKNOWN = "Unknown query parameter"
REPEATED = "Repeated query parameter"


def _refused(answer: Any, *names: str, title: str = UNKNOWN) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    problem = answer.json()
    assert problem["title"] == title
    assert [e["field"] for e in problem["errors"]] == list(names)
    for name in names:
        assert name in problem["detail"]


@pytest.mark.parametrize(
    ("role", "path", "names"),
    [
        ("admin", "/v1/exports/gradings?format=csv&passed=true", ["passed"]),
        ("adjudicator", "/v1/stats/pass-rates?passed=true", ["passed"]),
        ("adjudicator", "/v1/review-queue?judge=x", ["judge"]),
        ("admin", "/v1/gradings?agnet=x&agent=y&colour=red&agnet=z", ["agnet", "colour"]),
    ],
)
async def test_a_filter_the_route_does_not_take_is_400_naming_it(
    api_client: Any, tokens: Any, engine: Engine, role: str, path: str, names: list[str]
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 2, "fail": 1}, agent="a")
    headers = await tokens(role)
    async with api_client(start_workers=False) as client:
        _refused(await client.get(path, headers=headers), *names)


async def test_a_refused_request_changes_nothing(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    submitter = await tokens("submitter")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client(start_workers=False) as client:
        answer = await client.post("/v1/submissions?wiat=5", json=body, headers=submitter)
        _refused(answer, "wiat")
        assert await count_submissions(engine) == 0
        taken = await client.post("/v1/submissions", json=body, headers=submitter)
    assert taken.status_code == 202, taken.text


async def test_the_filters_a_route_takes_still_select(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2}, agent="a")
    await add_many(store, {"fail": 1}, agent="b")
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        listed = await client.get("/v1/gradings?agent=b&limit=10", headers=admin)
        rates = await client.get("/v1/stats/pass-rates?agent=a&group_by=agent", headers=admin)
        arms = "a.inline=include&b.agent=b&b.inline=include"
        compared = await client.get(f"/v1/stats/compare?a.agent=a&{arms}", headers=admin)
        misspelt_arm = await client.get(f"/v1/stats/compare?a.agnet=a&{arms}", headers=admin)
    assert listed.status_code == 200, listed.text
    assert [g["submission"]["agent"] for g in listed.json()["items"]] == ["b"]
    assert rates.status_code == 200, rates.text
    assert compared.status_code == 200, compared.text
    # a comparison reads its arms itself, and refuses an arm's unknown field itself
    assert misspelt_arm.status_code == 422, misspelt_arm.text
    assert misspelt_arm.json()["errors"][0]["field"] == "a.agnet"


async def test_pages_schema_and_probes_take_any_query(api_client: Any) -> None:
    async with api_client(start_workers=False) as client:
        for path in ("/healthz?x=1", "/login?x=1", "/schema/openapi.json?x=1"):
            answer = await client.get(path)
            assert answer.status_code == 200, (path, answer.text)
        options = await client.options("/v1/gradings?x=1")
    assert options.status_code in (200, 204), options.text


async def test_every_documented_query_parameter_is_taken(api_client: Any) -> None:
    """Each operation of the document, sent without a token with every query parameter
    it lists: the guard's 401 answers (the parameters were taken); with one more
    parameter, unknown, the answer is the 400 naming it, a comparison's included (it
    reads only its arms, ``a.<field>`` and ``b.<field>``, itself)."""
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
        checked = 0
        for template, item in document["paths"].items():
            if not template.startswith("/v1/"):
                continue
            path = re.sub(r"\{[^}]+\}", "1", template)
            for method, operation in item.items():
                if method not in ("get", "post", "put", "patch", "delete"):
                    continue
                query = {
                    p["name"]: "1" for p in operation.get("parameters", []) if p["in"] == "query"
                }
                answer = await client.request(method, path, params=query)
                assert answer.status_code == 401, (method, template, answer.text)
                extra = await client.request(method, path, params={**query, "zz_unknown": "1"})
                _refused(extra, "zz_unknown")
                checked += 1
    assert checked > 40


async def test_a_comparison_names_each_unknown_parameter_before_the_token_check(
    api_client: Any, tokens: Any
) -> None:
    """A comparison refuses a parameter that is no arm field and not its own (``agent``,
    the filter of the other reports) with the 400 naming each, token or none; an arm's
    unknown field stays its own 422."""
    admin = await tokens("admin")
    arms = "a.model=m&b.model=n"
    async with api_client(start_workers=False) as client:
        anonymous = await client.get(f"/v1/stats/compare?agent=x&{arms}")
        named = await client.get(f"/v1/stats/compare?agent=x&colour=red&{arms}", headers=admin)
        arm_field = await client.get(f"/v1/stats/compare?a.colour=red&{arms}", headers=admin)
    _refused(anonymous, "agent")
    _refused(named, "agent", "colour")
    assert arm_field.status_code == 422, arm_field.text
    assert [e["field"] for e in arm_field.json()["errors"]] == ["a.colour"]


@pytest.mark.parametrize(
    ("role", "path", "names"),
    [
        ("admin", "/v1/gradings?agent=a&agent=b", ["agent"]),
        ("adjudicator", "/v1/stats/pass-rates?group_by=agent&group_by=model", ["group_by"]),
        ("adjudicator", "/v1/stats/compare?a.model=m&b.model=n&a.model=o", ["a.model"]),
        ("admin", "/v1/gradings?limit=1&agent=a&limit=2&agent=a", ["limit", "agent"]),
    ],
)
async def test_a_parameter_given_twice_is_400_naming_it(
    api_client: Any, tokens: Any, engine: Engine, role: str, path: str, names: list[str]
) -> None:
    """A filter given twice is refused naming it, never narrowed to its last value
    (``group_by=agent,model`` is how a list is written), an arm's field included."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2}, agent="a")
    await add_many(store, {"fail": 1}, agent="b")
    headers = await tokens(role)
    async with api_client(start_workers=False) as client:
        _refused(await client.get(path, headers=headers), *names, title=REPEATED)
        anonymous = await client.get(path)
        listed = await client.get("/v1/stats/pass-rates?group_by=agent,model", headers=headers)
    _refused(anonymous, *names, title=REPEATED)  # before the token check
    assert listed.status_code == 200, listed.text
    assert listed.json()["group_by"] == ["agent", "model"]
