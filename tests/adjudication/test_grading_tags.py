"""The grading page's failure tags (with a note) and its links to the other gradings of
the same submission."""

from __future__ import annotations

from typing import Any

from tests.support.judge_server import sregym_reply
from tests.support.regrades import shadow_regrade
from tests.support.submissions import IDS, graded, scripted_judge
from tests.web.conftest import sign_in

SPEC = "openai:scripted@http://127.0.0.1:9/v1"


async def test_tags_from_the_vocabulary_with_a_note_are_added_and_removed(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, ada)
        url = f"/gradings/{grading['id']}"
        page = (await c.get(url)).text
        assert '<option value="misread-unit"' in page and "No failure tags." in page
        unknown = await c.post(f"{url}/tags", data={"_csrf": csrf, "tag": "made-up"})
        assert unknown.status_code == 422 and "vocabulary" in unknown.text
        no_csrf = await c.post(f"{url}/tags", data={"tag": "misread-unit"})
        assert no_csrf.status_code == 403
        added = await c.post(
            f"{url}/tags",
            data={"_csrf": csrf, "tag": "misread-unit", "note": "<b>millicores</b> as cores"},
            follow_redirects=False,
        )
        assert added.status_code == 303
        page = (await c.get(url)).text
        assert '<span class="tag">misread-unit</span>' in page
        assert "&lt;b&gt;millicores&lt;/b&gt; as cores" in page
        api = (await c.get(f"/v1/gradings/{grading['id']}", headers=ada)).json()
        assert api["tags"][0]["author"] == "Ada"
        tag_id = api["tags"][0]["id"]
        for beyond in (2**31, 10**25):  # no tag has such an id: 422 naming it, not a 500
            refused = await c.post(f"{url}/tags/{beyond}/remove", data={"_csrf": csrf})
            deleted = await c.delete(f"/v1/gradings/{grading['id']}/tags/{beyond}", headers=ada)
            for answer in (refused, deleted):
                assert answer.status_code == 422 and "tag_id" in answer.text, answer.text
        await c.post(f"{url}/tags/{tag_id}/remove", data={"_csrf": csrf})
        assert (await c.get(f"/v1/gradings/{grading['id']}", headers=ada)).json()["tags"] == []
        assert "grading.untagged" in (await c.get(url)).text


async def test_a_submitter_can_neither_see_the_tag_form_nor_tag(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, agent)
        url = f"/gradings/{grading['id']}"
        assert 'data-testid="tag-form"' not in (await c.get(url)).text
        refused = await c.post(f"{url}/tags", data={"_csrf": csrf, "tag": "misread-unit"})
        assert refused.status_code == 403


async def test_a_shadow_regrade_is_one_click_away_from_the_grading(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    replies = scripted_judge(sregym_reply(set(IDS)), sregym_reply(set(IDS[:3])))
    async with api_client(**replies) as c:
        grading = await graded(c, agent)
        await shadow_regrade(c, admin, SPEC)
        await sign_in(c, admin)
        page = (await c.get(f"/gradings/{grading['id']}")).text
        assert 'data-testid="related"' in page and "shadow regrade" in page
        shadow = page.split('data-testid="related"')[1].split('href="')[1].split('"')[0]
        back = (await c.get(shadow)).text
        assert f'href="/gradings/{grading["id"]}"' in back and "current" in back
