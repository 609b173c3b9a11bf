"""The grading page's failure tags (with a note) and its links to the other gradings of
the same submission, among them the one a promoted regrade replaced it with."""

from __future__ import annotations

import html
import re
from typing import Any

from tests.support.judge_server import sregym_reply
from tests.support.regrades import promote_regrade, shadow_regrade
from tests.support.submissions import IDS, graded, scripted_judge
from tests.web.conftest import sign_in

SPEC = "openai:scripted@http://127.0.0.1:9/v1"


async def test_tags_from_the_vocabulary_with_a_note_are_added_and_removed(
    api_client: Any, tokens: Any
) -> None:
    """A tag with a note is added from the page (once, though the form is sent twice)
    and removed; the note shows as text."""
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
        form = {"_csrf": csrf, "tag": "misread-unit", "note": "<b>millicores</b> as cores"}
        added = await c.post(f"{url}/tags", data=form, follow_redirects=False)
        assert added.status_code == 303
        twice = await c.post(f"{url}/tags", data=form, follow_redirects=False)  # a double click
        assert twice.status_code == 303 and twice.headers["location"] == added.headers["location"]
        page = (await c.get(url)).text
        assert page.count('<span class="tag">misread-unit</span>') == 1
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


async def test_a_refused_tag_brings_the_page_back_with_the_note_kept_and_why(
    api_client: Any, tokens: Any
) -> None:
    """A failure tag the page refuses (none chosen, one no longer in the vocabulary, a
    note over 2,000 characters) answers 422 with the grading's page: the tag form holds
    the note as typed, and says beside it why nothing was tagged."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    note = "the agent read the port from the wrong config map, twice"
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, ada)
        url = f"/gradings/{grading['id']}"
        for sent, why in (
            ({"tag": "no-such-tag-anymore", "note": note}, "not in the failure-tag vocabulary"),
            ({"tag": "", "note": note}, "choose a tag of the vocabulary"),
            ({"tag": "misread-unit", "note": "x" * 2001}, "at most 2000 characters"),
        ):
            refused = await c.post(f"{url}/tags", data={"_csrf": csrf, **sent, "q.agent": "alpha"})
            assert refused.status_code == 422, refused.status_code
            form = refused.text.split('data-testid="tag-form"', 1)[1].split("</form>", 1)[0]
            kept = re.search(r'name="note"[^>]*value="([^"]*)"', form)
            assert kept and kept.group(1) == sent["note"], "the note typed is lost"
            error = form.split('data-testid="tag-error">', 1)[1].split("</p>", 1)[0]
            assert why in html.unescape(error)
            assert 'name="q.agent" value="alpha"' in form  # the walk goes along
        again = (await c.get(url)).text
        assert "No failure tags." in again and 'data-testid="tag-error"' not in again


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


async def test_a_superseded_grading_links_its_replacement_and_refuses_overrides_and_tags(
    api_client: Any, tokens: Any
) -> None:
    """A grading a promoted regrade replaced says so and links the grading in force, and
    offers no override or tag form. A form sent from a page opened before the promote
    comes back (409) saying why nothing was saved and where to go, not as a stale page
    to send again; nothing is stored."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    replies = scripted_judge(sregym_reply(set(IDS)), sregym_reply(set(IDS[:3])))
    async with api_client(**replies) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, ada)
        url = f"/gradings/{grading['id']}"
        tagged = await c.post(f"/v1{url}/tags", json={"tag": "misread-unit"}, headers=ada)
        assert tagged.status_code == 201, tagged.text
        before = (await c.get(url)).text  # opened before the promote
        revision = re.search(r'name="revision" value="(\d+)"', before)
        assert revision
        await promote_regrade(c, admin, SPEC)
        new = (await c.get(f"/v1{url}", headers=ada)).json()["superseded_by"]
        assert new
        page = (await c.get(url)).text
        assert f'data-testid="superseded-by">grading {new}</a>' in page
        assert f'href="/gradings/{new}"' in page
        assert 'data-testid="tag-form"' not in page and 'action="' + url + '/overrides"' not in page
        sent = [
            (f"{url}/overrides", {"revision": revision.group(1), "kind": "verdict",
                                  "verdict": "fail", "reason": "names the wrong fault"}),
            (f"{url}/tags", {"tag": "over-explored", "note": "read every log"}),
            (f"{url}/tags/{tagged.json()['id']}/remove", {}),
        ]  # fmt: skip
        for action, form in sent:
            refused = await c.post(action, data={"_csrf": csrf, **form})
            assert refused.status_code == 409, (action, refused.status_code)
            error = refused.text.split('data-testid="form-error">', 1)[1].split("</p>", 1)[0]
            assert "Not saved" in error and f"superseded by grading {new}" in error
            assert f'href="/gradings/{new}"' in refused.text
            assert 'data-testid="conflict"' not in refused.text  # no "send it again"
        stored = (await c.get(f"/v1{url}", headers=ada)).json()
    assert stored["overrides"] == []
    assert [t["tag"] for t in stored["tags"]] == ["misread-unit"]
