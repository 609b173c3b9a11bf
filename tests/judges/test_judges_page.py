"""The judges page: calibration runs per judge identity, each judge qualified or
provisional (the latest run decides); adjudicators only."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from storage import Store
from storage.quality_tables import CalibrationRunRecord
from tests.web.conftest import sign_in


async def test_judges_page_says_provisional_until_a_run_qualifies(
    api_client: Any, tokens: Any
) -> None:
    ada = await tokens("adjudicator", "Ada")
    agent = await tokens("submitter")
    async with api_client() as c:
        await sign_in(c, ada)
        page = (await c.get("/judges")).text
        assert 'data-testid="configured"' in page and "status-provisional" in page
        await sign_in(c, agent)
        for path in ("/judges", "/regrades"):
            assert (await c.get(path)).status_code == 403


async def test_judges_page_lists_runs_per_judge_with_the_latest_deciding(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    store = Store(engine, key=service_key)
    common = {"rubric_id": "sregym-rca", "rubric_version": "v1", "gold_name": "gold.jsonl",
              "gold_sha256": "0" * 64, "n": 40}  # fmt: skip
    await store.calibration.add_run(
        CalibrationRunRecord(judge_spec="openai:big", verdict_kappa=0.4, **common)
    )
    await store.calibration.add_run(
        CalibrationRunRecord(judge_spec="openai:big", qualified=True, verdict_kappa=0.8, **common)
    )
    await store.calibration.add_run(
        CalibrationRunRecord(judge_spec="ollama:small", verdict_kappa=0.1, **common)
    )
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        await sign_in(c, ada)
        page = (await c.get("/judges")).text
        big, small = (
            page.split("<code>openai:big</code>")[1],
            page.split("<code>ollama:small</code>")[1],
        )
        assert big.split("</h2>")[0].count("status-qualified") == 1
        assert small.split("</h2>")[0].count("status-provisional") == 1
        assert "0.800" in big and "0.400" in big
