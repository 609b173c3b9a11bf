"""Regrade jobs on pages: the list, one job's progress and flip report with links,
pause/resume/cancel for admins only."""

from __future__ import annotations

import asyncio
from typing import Any

from judge.backends.scripted import ScriptedBackend
from tests.support.judge_server import sregym_reply
from tests.support.submissions import IDS, graded, scripted_judge
from tests.web.conftest import sign_in

SPEC = "openai:scripted@http://127.0.0.1:9/v1"
#: a second judge, so the regrade is not answered from the first one's cache
OTHER = "openai:other@http://127.0.0.1:9/v1"


async def _finished(client: Any, admin: dict[str, str], job_id: str) -> dict[str, Any]:
    for _ in range(200):
        job = (await client.get(f"/v1/regrade-jobs/{job_id}", headers=admin)).json()
        if job["state"] in ("done", "failed", "cancelled"):
            return dict(job)
        await asyncio.sleep(0.05)
    raise AssertionError(f"job never finished: {job}")


async def test_a_regrade_job_shows_progress_and_links_each_flipped_grading(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    # a pass quoting the diagnosis (a yes without its quote would be held for a human)
    settings = scripted_judge(sregym_reply(set(IDS), evidence="USER_PORT=9999"))
    settings["backends"][OTHER] = ScriptedBackend([sregym_reply(set())], model="other")
    async with api_client(**settings) as c:
        grading = await graded(c, agent)
        job = await c.post("/v1/regrade-jobs", json={"judge": OTHER}, headers=admin)
        job_id = job.json()["id"]
        await _finished(c, admin, job_id)
        await sign_in(c, ada)
        listed = (await c.get("/regrades")).text
        assert f'href="/regrades/{job_id}"' in listed and "state-done" in listed
        page = (await c.get(f"/regrades/{job_id}")).text
        assert f'data-progress-url="/regrades/{job_id}/progress"' in page
        assert "started by Root" in page and "<td>Root</td>" in listed  # names, not token ids
        # a job naming no rubric grades each submission with its own, and says so
        assert "each submission's rubric" in page and "each submission's<" in listed
        assert "pass → fail: 1" in page and f'href="/gradings/{grading["id"]}"' in page
        # the kappas are counted as the flips are: on effective answers, which it says
        flips = page.split('data-testid="flip-report"', 1)[1]
        assert "effective answers and verdicts" in flips and "judges' own" not in flips
        assert 'data-testid="job-pause"' not in page  # adjudicators look, admins act
        progress = (await c.get(f"/regrades/{job_id}/progress")).json()
        assert progress["done"] == 1 and progress["total"] == 1 and progress["final"] is True


async def test_only_admins_pause_resume_or_cancel(api_client: Any, tokens: Any) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as c:
        await graded(c, agent)
        empty = {"judge": SPEC, "filter": {"agent": "nobody-has-this-agent"}}
        job = await c.post("/v1/regrade-jobs", json=empty, headers=admin)  # done at once
        job_id = job.json()["id"]
        csrf = await sign_in(c, ada)
        refused = await c.post(f"/regrades/{job_id}/pause", data={"_csrf": csrf})
        assert refused.status_code == 403
        csrf = await sign_in(c, admin)
        page = (await c.get(f"/regrades/{job_id}")).text
        assert 'data-testid="job-cancel"' not in page  # an empty job is done: no actions
        done_already = await c.post(f"/regrades/{job_id}/pause", data={"_csrf": csrf})
        assert done_already.status_code == 409  # an empty job is done: nothing to pause
        unknown = await c.post(f"/regrades/{job_id}/explode", data={"_csrf": csrf})
        assert unknown.status_code == 404


async def test_a_judge_key_in_the_jobs_base_url_is_shown_masked(
    api_client: Any, tokens: Any
) -> None:
    """A judge behind a proxy that takes its key in the query: the job's pages (open to
    adjudicators) and its API object show the base URL with the key masked."""
    secret = "sk-live-0123456789abcdef"
    keyed = f"openai:m@http://127.0.0.1:9/v1?api_key={secret}"
    agent, root = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(backends={keyed: ScriptedBackend.for_mode("pass")}) as c:
        await graded(c, agent)
        created = await c.post("/v1/regrade-jobs", json={"judge": keyed}, headers=root)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        shown = [created.text, (await c.get(f"/v1/regrade-jobs/{job_id}", headers=root)).text]
        await sign_in(c, ada)
        for path in ("/regrades", f"/regrades/{job_id}"):
            page = await c.get(path)
            assert page.status_code == 200 and job_id in page.text
            shown.append(page.text)
    for text in shown:
        assert secret not in text
        assert "api_key=***" in text


async def test_a_judge_key_in_the_filter_of_a_job_is_shown_masked(
    api_client: Any, tokens: Any
) -> None:
    """A job that regrades the gradings of a judge named with its base URL, whose query
    carries its key: the job's filter, on its pages and in its API object, names that
    judge's address with the key masked."""
    secret = "sk-live-fedcba9876543210"
    keyed = f"openai:m@http://127.0.0.1:9/v1?api_key={secret}"
    root, ada = await tokens("admin", "Root"), await tokens("adjudicator", "Ada")
    async with api_client() as c:
        body = {"filter": {"judge": keyed}, "judge": "scripted:fail"}
        created = await c.post("/v1/regrade-jobs", json=body, headers=root)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        shown = [created.text, (await c.get(f"/v1/regrade-jobs/{job_id}", headers=root)).text]
        await sign_in(c, ada)
        shown += [(await c.get(path)).text for path in ("/regrades", f"/regrades/{job_id}")]
    assert created.json()["filter"]["judge"] == "openai:m@http://127.0.0.1:9/v1?api_key=***"
    for text in shown:
        assert secret not in text
