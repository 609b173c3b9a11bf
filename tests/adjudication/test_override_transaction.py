"""An override is one transaction: the grading read and checked, the override and its
label written, the verdict recomputed, the review closed, the event audited (with its
webhook deliveries) and the grading read back, all or nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from storage import verify_chain
from storage.audit import ChainKey
from storage.keys import ServiceKey
from tests.support.judge_server import sregym_reply
from tests.support.submissions import graded, scripted_judge
from tests.support.transactions import QUIET, counting
from tests.web.conftest import sign_in

SIX_WITHOUT_D1Q1 = {"D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1"}
OVERRIDE = {"question_id": "D1-Q1", "answer": "yes", "reason": "names user-service"}

#: the engine matters here (its snapshot isolation): run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def test_an_override_is_one_transaction_on_the_api_and_on_the_page(
    api_client: Any, tokens: Any, engine: Engine, service_key: ServiceKey
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    reply = sregym_reply(SIX_WITHOUT_D1Q1, evidence="sets USER_PORT=9999")
    async with api_client(**scripted_judge(reply, reply)) as client:
        first, second = await graded(client, agent), await graded(client, agent)
    async with api_client(**QUIET) as client:
        url = f"/v1/gradings/{first['id']}"
        etag = (await client.get(url, headers=ada)).headers["etag"]
        with counting(engine) as api:
            response = await client.post(
                f"{url}/overrides", json=OVERRIDE, headers={**ada, "If-Match": etag}
            )
        assert response.status_code == 201, response.text
        assert response.json()["passed"] is True, response.json()
        assert api.transactions == 1, f"{api} for one override"

        csrf = await sign_in(client, ada)
        page = f"/gradings/{second['id']}"
        found = re.search(r'name="revision" value="(\d+)"', (await client.get(page)).text)
        assert found
        form = {"_csrf": csrf, "revision": found.group(1), "kind": "answer", **OVERRIDE}
        with counting(engine) as web:
            response = await client.post(f"{page}/overrides", data=form, follow_redirects=False)
        assert response.status_code == 303, response.text
        # the signed-in session is looked up, then the override is one transaction
        assert web.transactions == 2, f"{web} for one override from the page"
        print(f"override statements: API {api.statements}, page {web.statements}")
        # the page redirects: its override reads nothing back (17 when it read the grading
        # object back and read the review row before writing it), nor the webhook
        # endpoints the engine read before (12 when it did); on SQLite the audit chain's
        # head is not read either (PostgreSQL reads it under its lock: 12)
        limit = 11 if engine.dialect.name == "sqlite" else 12
        assert web.statements <= limit, f"{web} for one override from the page"
        # the state each override's event records is the state the tables hold
        report = await verify_chain(engine, key=ChainKey.of(service_key))
        assert report.ok, report
