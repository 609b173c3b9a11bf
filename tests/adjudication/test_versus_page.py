"""Two gradings of one attempt side by side: each question's answers with the differences
marked, the dimensions' yes counts and both verdicts, one click from the grading page."""

from __future__ import annotations

import re
from typing import Any

from judge.backends.scripted import ScriptedBackend
from tests.support.app_client import AppClient
from tests.support.judge_server import sregym_reply
from tests.support.regrades import promote_regrade, shadow_regrade
from tests.support.submissions import IDS, graded, scripted_judge
from tests.web.conftest import sign_in

#: a second judge for the shadow regrade (the first judge's replies are cached)
OTHER = "openai:other@http://127.0.0.1:9/v1"
#: markup in the diagnosis, quoted as evidence: shown as text, never run
MARKUP = '<img src=x onerror="alert(1)">'
DIAGNOSIS = f"The user-service deployment in hotel sets USER_PORT=9999; logs show {MARKUP}."


def _two_judges(first: str, second: str) -> dict[str, Any]:
    """``api_client`` settings: the service's judge answers ``first``, OTHER ``second``."""
    settings = scripted_judge(first)
    settings["backends"][OTHER] = ScriptedBackend([second], model="other")
    return settings


async def _shadow_of(c: AppClient, grading_id: str, admin: dict[str, str]) -> str:
    """Regrade everything in shadow with the second judge; the shadow's id."""
    await shadow_regrade(c, admin, OTHER)
    page = (await c.get(f"/gradings/{grading_id}")).text
    found = re.search(rf'href="/gradings/{grading_id}/versus/([^"]+)"', page)
    assert found, "no side-by-side link on the grading page"
    return found.group(1)


async def test_two_judges_answers_side_by_side_with_the_differences_marked(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    replies = _two_judges(
        sregym_reply(set(IDS), evidence=MARKUP), sregym_reply(set(IDS[:3]), evidence=MARKUP)
    )
    async with api_client(**replies) as c:
        grading = await graded(c, agent, DIAGNOSIS)
        await sign_in(c, admin)
        shadow = await _shadow_of(c, grading["id"], admin)
        response = await c.get(f"/gradings/{grading['id']}/versus/{shadow}")
        assert response.status_code == 200, response.text
        page = response.text
        assert "6 of 9 questions answered differently" in page
        rows = dict(re.findall(r'id="q-([^"]+)" class="[^"]*" data-differs="(yes|no)"', page))
        assert rows == {qid: ("no" if qid in IDS[:3] else "yes") for qid in IDS}
        assert "verdict-pass" in page and "verdict-fail" in page
        assert MARKUP not in page and "&lt;img src=x" in page


async def test_gradings_of_different_submissions_are_not_compared(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    reply = sregym_reply(set(IDS))
    async with api_client(**scripted_judge(reply, reply)) as c:
        first = await graded(c, agent)
        second = await graded(c, agent, DIAGNOSIS)
        await sign_in(c, ada)
        response = await c.get(f"/gradings/{first['id']}/versus/{second['id']}")
        assert response.status_code == 409
        assert "different submissions" in response.text


async def test_a_submitter_gets_neither_the_page_nor_the_link(api_client: Any, tokens: Any) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    replies = _two_judges(sregym_reply(set(IDS)), sregym_reply(set(IDS[:3])))
    async with api_client(**replies) as c:
        grading = await graded(c, agent)
        await sign_in(c, admin)
        shadow = await _shadow_of(c, grading["id"], admin)
        await c.get("/logout")
        await sign_in(c, agent)
        assert 'data-testid="versus-link"' not in (await c.get(f"/gradings/{grading['id']}")).text
        refused = await c.get(f"/gradings/{grading['id']}/versus/{shadow}")
        assert refused.status_code == 403


async def test_a_promoted_grading_a_later_promote_replaced_reads_superseded(
    api_client: Any, tokens: Any
) -> None:
    """The grading page's other gradings of the submission say of each whether it is
    current, a shadow regrade or superseded: a grading a promote made current reads
    superseded once a later promote replaces it, like the original it replaced."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    second_judge, third_judge = OTHER, "openai:third@http://127.0.0.1:9/v1"
    settings = _two_judges(sregym_reply(set(IDS)), sregym_reply(set(IDS[:6])))
    settings["backends"][third_judge] = ScriptedBackend([sregym_reply(set(IDS[:3]))], model="third")
    async with api_client(**settings) as c:
        first = await graded(c, agent)
        await promote_regrade(c, admin, second_judge)
        second = (await c.get(f"/v1/gradings/{first['id']}", headers=admin)).json()["superseded_by"]
        await promote_regrade(c, admin, third_judge)
        promoted = (await c.get(f"/v1/gradings/{second}", headers=admin)).json()
        third = promoted["superseded_by"]
        assert third and not promoted["is_current"]
        await sign_in(c, admin)
        page = (await c.get(f"/gradings/{third}")).text
    related = page.split('data-testid="related"', 1)[1].split("</nav>", 1)[0]
    links = dict(
        re.findall(r'<a href="/gradings/([^"/]+)">.*?·\s*(current|shadow regrade|superseded)</a>',
                   related, re.S)
    )  # fmt: skip
    assert links == {first["id"]: "superseded", second: "superseded"}


async def test_an_item_of_a_promote_regrade_not_yet_promoted_reads_as_one(
    api_client: Any, tokens: Any
) -> None:
    """The submission's other gradings say which regrade made each: an item of a promote
    job that has no result yet (pending, or its job cancelled) reads "promote regrade,
    not promoted yet", never "shadow regrade"."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(**_two_judges(sregym_reply(set(IDS)), sregym_reply(set(IDS)))) as c:
        original = (await graded(c, agent))["id"]
    async with api_client(
        backends={OTHER: ScriptedBackend(model="fail")}, start_workers=False
    ) as c:
        job = await c.post(
            "/v1/regrade-jobs", json={"judge": OTHER, "mode": "promote"}, headers=admin
        )
        assert job.status_code == 201, job.text
        await c.post(f"/v1/regrade-jobs/{job.json()['id']}/cancel", headers=admin)
        await sign_in(c, ada)
        page = (await c.get(f"/gradings/{original}")).text
    related = page.split('data-testid="related"', 1)[1].split("</nav>", 1)[0]
    item_link = related.split('<a href="/gradings/', 1)[1].split("</a>", 1)[0]
    assert "verdict-cancelled" in item_link  # the promote job's cancelled item
    assert "promote regrade, not promoted yet" in item_link, item_link
    assert "shadow regrade" not in item_link
