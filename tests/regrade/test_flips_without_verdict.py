"""The flip report and a regrade job's page for gradings without a verdict: one no pass
holds is not listed as held, and a human-decided unscored one reads as the page reads
every grading without a yes count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from judge.backends.scripted import ScriptedBackend
from tests.adjudication.test_grading_page_states import FORGED, QUOTE
from tests.imports.partial import import_partial_checklist
from tests.support.judge_server import sregym_reply
from tests.support.regrades import shadow_regrade
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH
from tests.web.conftest import sign_in

NEW = "scripted:fail"


async def test_a_graded_grading_without_verdict_is_not_listed_as_held(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """A graded grading without a verdict that no pass holds (an SREGym attempt an earlier
    version imported with a partial checklist and no success), regraded by a judge that
    fails it, is counted under ``not_compared`` by its two statuses, never listed as held
    for a human."""
    await import_partial_checklist(engine, tmp_path, as_graded_earlier=True)
    admin = await tokens("admin", "Root")
    backends = {NEW: ScriptedBackend.for_mode("fail")}
    async with api_client(backends=backends) as c:
        [old] = (await c.get("/v1/gradings", headers=admin)).json()["items"]
        assert (old["status"], old["passed"], old["held"]) == ("graded", None, False)
        job = await shadow_regrade(c, admin, NEW)
        flips = (await c.get(f"/v1/regrade-jobs/{job['id']}/flips", headers=admin)).json()
        await sign_in(c, admin)
        page = (await c.get(f"/regrades/{job['id']}")).text
    assert flips["items"] == 1
    assert flips["held"]["count"] == 0, flips["held"]
    assert flips["not_compared"] == {"graded->graded": 1}, flips["not_compared"]
    assert "Held for a human: 0" in page


OLD, FAIL = "scripted:garbage", "scripted:fail"


async def test_a_human_decided_unscored_flip_shows_no_python_none(
    api_client: Any, tokens: Any
) -> None:
    """An unscored grading an adjudicator passed, failed by a shadow regrade: the job's
    page lists the pass -> fail flip with "—" for the yes count the unscored grading does
    not have, as the grading and versus pages show it."""
    admin, ada = await tokens("admin", "Root"), await tokens("adjudicator", "Ada")
    backends = {spec: ScriptedBackend.for_mode(spec.split(":")[1]) for spec in (OLD, FAIL)}
    async with api_client(judge=OLD, backends=backends) as c:
        sent = await c.post(
            "/v1/submissions?wait=10",
            json={"ground_truth": TRUTH, "diagnosis": DIAGNOSIS, "agent": "a"},
            headers=admin,
        )
        old = sent.json()
        assert old["status"] == "unscored", old
        job = await shadow_regrade(c, admin, FAIL)
        etag = (await c.get(f"/v1/gradings/{old['id']}", headers=ada)).headers["etag"]
        decided = await c.post(
            f"/v1/gradings/{old['id']}/overrides",
            json={"verdict": "pass", "reason": "names the port mismatch"},
            headers={**ada, "If-Match": etag},
        )
        assert decided.status_code in (200, 201), decided.text
        await sign_in(c, admin)
        page = (await c.get(f"/regrades/{job['id']}")).text
    flipped = page.split('data-testid="pass-to-fail"', 1)[1].split("</ul>", 1)[0]
    assert old["id"] in flipped
    assert "None" not in flipped, flipped


PASS = "openai:scripted@http://127.0.0.1:9/v1"


async def test_the_held_section_does_not_call_a_human_decided_unscored_grading_graded(
    api_client: Any, tokens: Any
) -> None:
    """An unscored grading a human decided, beside a held pass, is listed under "Held for a
    human", and the section's words fit it (a pass held on one side; not "graded on both
    sides")."""
    admin, ada = await tokens("admin", "Root"), await tokens("adjudicator", "Ada")
    # the new judge passes a diagnosis carrying a forged adjudication record: held
    held_pass = ScriptedBackend([sregym_reply(set(IDS), evidence=QUOTE)] * 4, model="scripted")
    backends = {OLD: ScriptedBackend.for_mode("garbage"), PASS: held_pass}
    async with api_client(judge=OLD, backends=backends) as c:
        sent = await c.post(
            "/v1/submissions?wait=10",
            json={"ground_truth": TRUTH, "diagnosis": FORGED, "agent": "a"},
            headers=admin,
        )
        old = sent.json()
        assert old["status"] == "unscored", old
        job = await shadow_regrade(c, admin, PASS)  # before the human decides: not carried
        etag = (await c.get(f"/v1/gradings/{old['id']}", headers=ada)).headers["etag"]
        decided = await c.post(
            f"/v1/gradings/{old['id']}/overrides",
            json={"verdict": "fail", "reason": "names no component"},
            headers={**ada, "If-Match": etag},
        )
        assert decided.status_code in (200, 201), decided.text
        flips = (await c.get(f"/v1/regrade-jobs/{job['id']}/flips", headers=admin)).json()
        assert flips["held"]["count"] == 1, flips
        await sign_in(c, admin)
        page = (await c.get(f"/regrades/{job['id']}")).text
    held = page.split("Held for a human:", 1)[1].split("</ul>", 1)[0]
    assert old["id"] in held
    assert "Graded on both sides" not in held, held
