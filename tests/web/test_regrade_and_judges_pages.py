"""A regrade job's page and the judges page show their figures as the API gives them:
each kappa with its interval or why it is undefined, the held items, and the configured
judge as it grades now; every link on a job's page opens for those who see it, and the
jobs list reaches every job."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from sqlalchemy.engine import Engine

from judge.backends.scripted import ScriptedBackend
from storage import Store
from storage.quality_tables import CalibrationRunRecord
from tests.regrade.test_regrade_api import _finished
from tests.support.judge_server import sregym_reply
from tests.support.keys import session_key
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

OTHER = "openai:other@http://127.0.0.1:9/v1"
PASS, FAIL = sregym_reply(set(IDS), evidence="USER_PORT=9999"), sregym_reply(set())


async def _submit(c: Any, agent: dict[str, str], i: int) -> None:
    response = await c.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": f"{DIAGNOSIS} (attempt {i})", "ground_truth": TRUTH},
        headers=agent,
    )
    assert response.status_code == 201, response.text


async def _finished_job(
    c: Any, agent: dict[str, str], admin: dict[str, str], n: int
) -> tuple[str, dict[str, Any]]:
    """A finished regrade of ``n`` submissions with ``OTHER``, and its flip report."""
    for i in range(n):
        await _submit(c, agent, i)
    job = await c.post("/v1/regrade-jobs", json={"judge": OTHER}, headers=admin)
    job_id = job.json()["id"]
    await _finished(c, admin, job_id)
    flips = (await c.get(f"/v1/regrade-jobs/{job_id}/flips", headers=admin)).json()
    return job_id, flips


def _flip_summary(page: str) -> str:
    return page.split('data-testid="flip-report"', 1)[1].split("<h3>", 1)[0]


async def test_regrade_page_says_why_a_kappa_is_undefined(api_client: Any, tokens: Any) -> None:
    """An undefined kappa is shown as undefined, with the reason, as the flips answer
    gives it."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    settings = scripted_judge(PASS)
    settings["backends"][OTHER] = ScriptedBackend([FAIL], model="other")
    async with api_client(**settings) as c:
        await _submit(c, agent, 0)
        job = await c.post("/v1/regrade-jobs", json={"judge": OTHER}, headers=admin)
        job_id = job.json()["id"]
        await _finished(c, admin, job_id)
        flips = (await c.get(f"/v1/regrade-jobs/{job_id}/flips", headers=admin)).json()
        reason = flips["agreement"]["verdicts"]["undefined"]
        assert flips["agreement"]["verdicts"]["kappa"] is None and reason
        await sign_in(c, admin)
        summary = _flip_summary((await c.get(f"/regrades/{job_id}")).text)
        assert "undefined" in summary and reason.split(":")[0] in summary, summary


async def test_regrade_page_gives_each_kappa_its_interval(api_client: Any, tokens: Any) -> None:
    """Every figure comes with its n and 95% interval: each kappa of the flip report too."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    settings = scripted_judge(PASS, PASS, FAIL, FAIL)
    settings["backends"][OTHER] = ScriptedBackend([PASS, FAIL, FAIL, FAIL], model="other")
    async with api_client(**settings) as c:
        for i in range(4):
            await _submit(c, agent, i)
        job = await c.post("/v1/regrade-jobs", json={"judge": OTHER}, headers=admin)
        job_id = job.json()["id"]
        await _finished(c, admin, job_id)
        flips = (await c.get(f"/v1/regrade-jobs/{job_id}/flips", headers=admin)).json()
        answers = flips["agreement"]["answers"]
        assert answers["kappa"] is not None and answers["ci_low"] is not None
        await sign_in(c, admin)
        summary = _flip_summary((await c.get(f"/regrades/{job_id}")).text)
        assert str(answers["kappa"]) in summary  # the kappa is there
        shown = {str(answers["ci_low"]), f"{answers['ci_low']:.3f}", f"{answers['ci_low']:.2f}"}
        assert any(s in summary for s in shown), summary


async def test_every_link_on_a_regrade_page_opens_for_its_adjudicator(
    api_client: Any, tokens: Any
) -> None:
    """An adjudicator sees a job's page and follows each of its links, the flips as CSV
    included (the same rows the API's ``?format=csv`` gives an admin's token)."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    admin = await tokens("admin", "Root")
    settings = scripted_judge(PASS)
    settings["backends"][OTHER] = ScriptedBackend([FAIL], model="other")
    async with api_client(**settings) as c:
        job_id, _ = await _finished_job(c, agent, admin, 1)
        await sign_in(c, ada)
        page = (await c.get(f"/regrades/{job_id}")).text
        links = {unescape(h) for h in re.findall(r'href="(/[^"]*)"', page)}
        assert f"/regrades/{job_id}/flips.csv" in links
        failing = {}
        for href in links - {h for h in links if h.startswith(("/static/", "/schema"))}:
            opened = await c.get(href.split("#")[0], follow_redirects=False)
            if opened.status_code >= 400:
                failing[href] = opened.status_code
        assert not failing, failing
        csv = await c.get(f"/regrades/{job_id}/flips.csv")
        api = await c.get(f"/v1/regrade-jobs/{job_id}/flips?format=csv", headers=admin)
        assert csv.headers["content-type"].startswith("text/csv")
        assert csv.text == api.text and job_id in csv.headers["content-disposition"]


async def test_the_regrade_page_lists_the_held_items_as_the_api_does(
    api_client: Any, tokens: Any
) -> None:
    """Under the default pass policy an uncalibrated judge's passes are held: the page
    counts and links the held items (graded on both sides, a verdict not in force), as
    the API's flip report lists them under ``held``."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    settings = scripted_judge(FAIL, FAIL)
    settings["backends"][OTHER] = ScriptedBackend([PASS, FAIL], model="other")
    async with api_client(pass_policy="qualified", **settings) as c:
        job_id, flips = await _finished_job(c, agent, admin, 2)
        assert flips["held"]["count"] == 1, flips["held"]
        held_id = flips["held"]["items"][0]["grading_id"]
        await sign_in(c, admin)
        report = (await c.get(f"/regrades/{job_id}")).text.split('data-testid="flip-report"')[1]
        assert "1 held for a human" in report and "Held for a human: 1" in report
        held = report.split('data-testid="held"', 1)[1].split("</ul>", 1)[0]
        assert f'href="/gradings/{held_id}"' in held and "verdict fail → held" in held


async def test_the_regrades_list_reaches_every_job_through_its_older_pages(
    api_client: Any, tokens: Any
) -> None:
    """The list shows the newest 100 jobs and links to the older ones; following the
    links reaches the oldest job, each job once. Its times say they are UTC."""
    admin = await tokens("admin", "Root")
    async with api_client() as c:
        ids = []
        for _ in range(101):  # over an empty selection: each job is done at once
            job = await c.post("/v1/regrade-jobs", json={"judge": "scripted:fail"}, headers=admin)
            assert job.status_code == 201, job.text
            ids.append(job.json()["id"])
        await sign_in(c, admin)
        first = (await c.get("/regrades")).text
        assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d UTC</td>", first), "no UTC time"
        shown = re.findall(r'<a href="/regrades/([0-9a-f]+)">', first)
        older = re.search(r'<a href="(/regrades\?cursor=[^"]*)" data-testid="older-jobs">', first)
        assert len(shown) == 100 and older, "no link to the older jobs"
        second = (await c.get(unescape(older.group(1)))).text
        shown += re.findall(r'<a href="/regrades/([0-9a-f]+)">', second)
        assert sorted(shown) == sorted(ids)  # every job, each once
        assert 'data-testid="older-jobs"' not in second
        forged = await c.get("/regrades?cursor=not-a-cursor")
        assert forged.status_code == 400


async def test_judges_page_flags_the_configured_judge_when_only_another_identity_ran(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A qualified run of the same spec under an older rubric version is another
    identity: the configured judge, whose gradings are provisional, is flagged as having
    no run, and the other identity is not tagged "configured"."""
    store = Store(engine, key=session_key())
    await store.calibration.add_run(
        CalibrationRunRecord(
            judge_spec="openai:scripted", rubric_id="sregym-rca", rubric_version="v0+old",
            gold_name="gold.jsonl", gold_sha256="0" * 64, n=40, verdict_kappa=0.9,
            qualified=True,
        )
    )  # fmt: skip
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS)) as c:
        response = await c.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        grading_id = response.json()["id"]
        rates = (await c.get("/v1/stats/pass-rates?inline=include", headers=ada)).json()
        assert rates["overall"]["provisional"] == 1, rates  # the service: provisional
        await sign_in(c, ada)
        page = (await c.get("/judges")).text
        flagged = 'data-testid="configured"' in page
        configured_cards = [
            card.split("</h2>", 1)[0]
            for card in page.split('data-testid="judge"')[1:]
            if '<span class="tag">configured</span>' in card.split("</h2>", 1)[0]
        ]
        shown_qualified = any("status-qualified" in h for h in configured_cards)
        assert flagged and not shown_qualified, (grading_id, configured_cards)
