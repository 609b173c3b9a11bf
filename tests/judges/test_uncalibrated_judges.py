"""A judge no calibration run qualified is never called qualified: not in reports (API
and the command line's table), not in the grading object, not for its unscored gradings.

SREGym's own verdicts, imported as gradings of the external judge ``external:sregym``,
come from a judge that ran outside the service and has no calibration run; they were
counted as a qualified judge's ("every judge had qualified").
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.reports.filters import ReportFilter
from api.reports.rates import pass_rate_report
from api.reports.tables import pass_rate_table
from api.tabular import write_csv
from storage import Store
from storage.keys import ServiceKey
from tests.storage.helpers import sregym_rubric
from tests.support.sregym_results import write_sregym_results

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"


async def _import_sregym(store: Store, base: Path) -> None:
    fixture = write_sregym_results(base)
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root),
        read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )
    assert report.submissions == 45 and report.problems == []


async def test_imported_sregym_verdicts_are_provisional_in_every_report(
    api_client: Any, tokens: Any, engine: Engine, service_key: ServiceKey, tmp_path: Path
) -> None:
    store = Store(engine, key=service_key)
    await _import_sregym(store, tmp_path)
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        params = {"group_by": "provisional,judge"}
        rates = (await client.get("/v1/stats/pass-rates", params=params, headers=headers)).json()
        listed = (await client.get("/v1/gradings", params={"limit": 100}, headers=headers)).json()
        plain = (await client.get("/v1/stats/pass-rates", headers=headers)).json()
    groups = {(g["key"]["provisional"], g["key"]["judge"]) for g in rates["groups"]}
    assert groups == {("provisional", "external:sregym")}, rates["groups"]
    overall = plain["overall"]
    assert overall["n"] > 0 and overall["provisional"] == overall["total"]
    assert not any("every judge had qualified" in line for line in plain["scope"])
    assert any(line.startswith("PROVISIONAL:") for line in plain["scope"]), plain["scope"]
    assert listed["items"] and {g["provisional"] for g in listed["items"]} == {True}
    # the command line's table (sre-judge report pass-rates --group-by provisional)
    report = await pass_rate_report(store, ReportFilter(), group_by=["provisional"])
    out = io.StringIO()
    write_csv(pass_rate_table(report), out)
    assert "qualified" not in out.getvalue() and "provisional," in out.getvalue()


async def test_an_unscored_grading_of_an_uncalibrated_judge_is_provisional(
    api_client: Any, tokens: Any
) -> None:
    headers = await tokens("submitter")
    async with api_client(judge="scripted:garbage") as client:
        body = {"diagnosis": "user-service listens on 9999", "ground_truth": TRUTH}
        done = await client.post("/v1/submissions?wait=30", json=body, headers=headers)
    assert done.status_code == 201, done.text
    grading = done.json()
    assert grading["status"] == "unscored" and grading["provisional"] is True
