"""Skipping from the grading page during a walk, and assigning from the queue page: the
walk goes on without revisiting (also an item a promote regrade replaced meanwhile),
notes and assignees are shown by name to everyone. An override, a failure tag or a blind
label on an item of the walk keeps the walk."""

from __future__ import annotations

import asyncio
import html
import re
from typing import Any

from tests.support.judge_server import sregym_reply
from tests.support.submissions import IDS, scripted_judge
from tests.web.conftest import csrf_of, sign_in

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
#: fails whose quotes are not in the diagnosis: queued, and not held
QUEUED = sregym_reply(set(IDS[:3]), evidence="not in the diagnosis at all")


async def _submit(
    client: Any, headers: dict[str, str], diagnosis: str, agent: str, run_id: str | None = None
) -> str:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": diagnosis, "ground_truth": TRUTH, "agent": agent, "run_id": run_id},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _row(page: str, grading_id: str) -> str:
    """The queue page's row of ``grading_id``."""
    return page.split(f'data-grading="{grading_id}"', 1)[1].split("</tr>", 1)[0]


def _opened(location: str) -> str:
    """The grading a ``/gradings/{id}?...`` location opens."""
    return location.split("/gradings/", 1)[1].split("?", 1)[0]


async def test_skipping_walks_on_once_and_leaves_the_note_for_others(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(**scripted_judge(*[QUEUED] * 5)) as c:
        made = [await _submit(c, agent, f"{DIAGNOSIS} Attempt {n}.", "beta") for n in range(4)]
        await _submit(c, agent, DIAGNOSIS, "alpha")  # outside the filter
        csrf = await sign_in(c, ada)
        location = await c.get("/queue/next?q.agent=beta", follow_redirects=False)
        location = location.headers["location"]
        visited: list[str] = []
        while location.startswith("/gradings/"):  # skip every item, a note on some
            grading_id = _opened(location)
            visited.append(grading_id)
            page = (await c.get(location)).text
            assert 'data-testid="skip"' in page and "Skip (s)" in page
            form = page.split('data-testid="skip"', 1)[1].split("</form>", 1)[0]
            walk = dict(re.findall(r'<input type="hidden" name="(q\.[^"]+)" value="([^"]*)"', form))
            assert walk["q.agent"] == "beta"
            note = f"over to someone else <i>{len(visited)}</i>" if len(visited) % 2 else ""
            skipped = await c.post(
                f"/gradings/{grading_id}/skip",
                data={"_csrf": csrf, "note": note, **walk},
                follow_redirects=False,
            )
            assert skipped.status_code == 303, skipped.text
            assert skipped.headers["location"].startswith(f"/queue/next?after={grading_id}")
            onward = await c.get(skipped.headers["location"], follow_redirects=False)
            location = onward.headers["location"]
            assert len(visited) <= 4, visited
        assert location == "/queue?agent=beta&end=true"
        assert sorted(visited) == sorted(made) and len(set(visited)) == 4  # each once

        c.cookies.clear()
        await sign_in(c, bob)
        queue = (await c.get("/queue?agent=beta")).text
        assert 'data-testid="progress"><strong>4</strong> to review' in queue  # still queued
        first_row = _row(queue, visited[0])
        assert "Skipped by Ada" in first_row
        assert "over to someone else &lt;i&gt;1&lt;/i&gt;" in first_row  # escaped
        second_row = _row(queue, visited[1])
        assert "Skipped by Ada" in second_row and "over to someone else" not in second_row
        page = (await c.get(f"/gradings/{visited[0]}")).text
        shown = page.split('data-testid="skip-note"', 1)[1].split("</p>", 1)[0]
        assert "Skipped by Ada" in shown and "over to someone else &lt;i&gt;1&lt;/i&gt;" in shown
        claimed = await c.get(f"/gradings/{visited[0]}?claim=true")  # Ada gave her claim back
        assert "You are reviewing this grading (Bob)" in claimed.text

        bob_csrf = csrf_of(page)
        too_long = await c.post(
            f"/gradings/{visited[0]}/skip", data={"_csrf": bob_csrf, "note": "x" * 2001}
        )
        assert too_long.status_code == 422 and "note" in too_long.text


async def _skip_on(c: Any, csrf: str, location: str) -> str:
    """Skip the item ``location`` opens, as its page's Skip form does; where the walk
    goes next."""
    grading_id = _opened(location)
    page = (await c.get(location)).text
    form = page.split('data-testid="skip"', 1)[1].split("</form>", 1)[0]
    walk = dict(re.findall(r'<input type="hidden" name="(q\.[^"]+)" value="([^"]*)"', form))
    skipped = await c.post(
        f"/gradings/{grading_id}/skip",
        data={"_csrf": csrf, "note": "later", **walk},
        follow_redirects=False,
    )
    assert skipped.status_code == 303, skipped.text
    onward = await c.get(skipped.headers["location"], follow_redirects=False)
    return str(onward.headers["location"])


async def test_a_walk_does_not_visit_a_skipped_item_again_after_a_promote_replaces_it(
    api_client: Any, tokens: Any
) -> None:
    """Ada skips the first item; while she is on the second, a promote regrade of the
    first item's run replaces its grading (still queued, her skip note on it: a review in
    progress follows the item). Skipping on, the walk ends after the third item: the
    first keeps its place in the queue, before the items already walked."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    spec = "openai:scripted@http://127.0.0.1:9/v1"
    async with api_client(**scripted_judge(*[QUEUED] * 4)) as c:
        made = [
            await _submit(c, agent, f"{DIAGNOSIS} Attempt {n}.", "beta", run_id=f"run-{n}")
            for n in range(3)
        ]
        csrf = await sign_in(c, ada)
        location = (await c.get("/queue/next", follow_redirects=False)).headers["location"]
        assert _opened(location) == made[0]
        location = await _skip_on(c, csrf, location)
        assert _opened(location) == made[1]

        job = await c.post(
            "/v1/regrade-jobs",
            json={"judge": spec, "mode": "promote", "filter": {"run_id": "run-0"}},
            headers=admin,
        )
        assert job.status_code == 201, job.text
        for _ in range(100):
            state = (await c.get(f"/v1/regrade-jobs/{job.json()['id']}", headers=admin)).json()
            if state["state"] == "done":
                break
            await asyncio.sleep(0.05)
        replaced = (await c.get(f"/v1/gradings/{made[0]}", headers=ada)).json()["superseded_by"]
        assert replaced, "the first item's grading was replaced"
        queued = (await c.get("/v1/review-queue", headers=ada)).json()["items"]
        assert [i["grading"]["id"] for i in queued] == [replaced, made[1], made[2]]
        assert queued[0]["skipped"]["by"] == "Ada"

        visited = [made[0], made[1]]
        location = await _skip_on(c, csrf, location)
        while location.startswith("/gradings/") and len(visited) < 6:
            visited.append(_opened(location))
            location = await _skip_on(c, csrf, location)
    assert visited == made
    assert location == "/queue?end=true"


async def test_assigning_from_the_queue_page_and_the_assigned_to_me_filter(
    api_client: Any, tokens: Any
) -> None:
    agent, root = await tokens("submitter", "agent"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    await tokens("adjudicator", "Bob")
    async with api_client(**scripted_judge(*[QUEUED] * 3)) as c:
        made = [await _submit(c, agent, f"{DIAGNOSIS} Attempt {n}.", "beta") for n in range(3)]
        listed = (await c.get("/v1/tokens", headers=root)).json()
        ids = {t["name"]: t["id"] for t in listed}
        csrf = await sign_in(c, root)
        queue = (await c.get("/queue?agent=beta")).text
        control = _row(queue, made[0]).split('data-testid="assign-form"', 1)[1]
        names = re.findall(r'<option value="[^"]*"[^>]*>([^<]*)</option>', control)
        assert names == ["no one", "Ada", "Bob", "Root"]  # reviewers only, by name
        assert '<input type="hidden" name="q.agent" value="beta">' in control

        assigned = await c.post(
            f"/gradings/{made[0]}/assign",
            data={"_csrf": csrf, "assignee": ids["Ada"], "q.agent": "beta"},
            follow_redirects=False,
        )
        assert assigned.status_code == 303, assigned.text
        assert assigned.headers["location"] == f"/queue?agent=beta#row-{made[0]}"
        await c.post(
            f"/gradings/{made[1]}/assign",
            data={"_csrf": csrf, "assignee": ids["Bob"]},
            follow_redirects=False,
        )
        queue = (await c.get("/queue?agent=beta")).text
        cell = _row(queue, made[0]).split('data-testid="assignee"', 1)[1]
        assert cell.split("</span>", 1)[0].endswith(">Ada")
        assert f'<option value="{ids["Ada"]}" selected>Ada</option>' in cell
        assert ids["Ada"] not in _row(queue, made[0]).split("<select", 1)[0]  # ids in values only

        refused = await c.post(
            f"/gradings/{made[2]}/assign",
            data={"_csrf": csrf, "assignee": ids["agent"]},
            follow_redirects=False,
        )
        assert refused.status_code == 422 and "only adjudicators and admins review" in refused.text

        c.cookies.clear()
        ada_csrf = await sign_in(c, ada)
        mine = (await c.get("/queue?assigned=me")).text
        assert 'data-testid="progress"><strong>1</strong> to review' in mine
        assert made[0] in mine and made[1] not in mine
        assert 'value="me" selected' in mine
        start = await c.get("/queue/next?q.assigned=me", follow_redirects=False)
        assert start.headers["location"].startswith(f"/gradings/{made[0]}?claim=true")
        assert "q.assigned=me" in start.headers["location"]
        page = (await c.get(start.headers["location"])).text
        assert "Assigned to Ada." in page
        unassigned = await c.post(
            f"/gradings/{made[0]}/assign",
            data={"_csrf": ada_csrf, "assignee": "", "q.assigned": "me"},
            follow_redirects=False,
        )
        assert unassigned.headers["location"] == f"/queue?assigned=me#row-{made[0]}"
        assert made[0] not in (await c.get("/queue?assigned=me")).text
        assert "Assigned to" not in (await c.get(f"/gradings/{made[0]}")).text

        c.cookies.clear()
        agent_csrf = await sign_in(c, agent)
        forbidden = await c.post(
            f"/gradings/{made[2]}/assign",
            data={"_csrf": agent_csrf, "assignee": ids["Ada"]},
            follow_redirects=False,
        )
        assert forbidden.status_code == 403
        skip = await c.post(
            f"/gradings/{made[2]}/skip", data={"_csrf": agent_csrf}, follow_redirects=False
        )
        assert skip.status_code == 403
        assert 'data-testid="skip"' not in (await c.get(f"/gradings/{made[2]}")).text


async def test_an_assignment_sent_with_filters_refused_stores_nothing(
    api_client: Any, tokens: Any
) -> None:
    """An assignment whose form carries the queue's filters wrong (``q.provisional``
    other than true or false) is refused (422 naming the field) and assigns nothing:
    the item stays unassigned, with no ``review.assigned`` in its history."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(QUEUED)) as c:
        made = await _submit(c, agent, f"{DIAGNOSIS} Attempt 0.", "beta")
        csrf = await sign_in(c, ada)
        refused = await c.post(
            f"/gradings/{made}/assign",
            data={"_csrf": csrf, "assignee": "Ada", "q.provisional": "maybe"},
            follow_redirects=False,
        )
        history = (await c.get(f"/v1/gradings/{made}/history", headers=ada)).json()["events"]
        queued = (await c.get("/v1/review-queue", headers=ada)).json()["items"]
    assert refused.status_code == 422 and "q.provisional" in refused.text
    assert "review.assigned" not in [e["event"] for e in history]
    assert [(i["grading"]["id"], i["assigned_to"]) for i in queued] == [(made, None)]


async def test_an_override_during_a_walk_keeps_the_walk(api_client: Any, tokens: Any) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(*[QUEUED] * 2)) as c:
        made = [await _submit(c, agent, f"{DIAGNOSIS} Attempt {n}.", "beta") for n in range(2)]
        csrf = await sign_in(c, ada)
        page = (await c.get(f"/gradings/{made[0]}?claim=true&q.agent=beta&q.seen=1")).text
        form = page.split('action="/gradings/' + made[0] + '/overrides"', 2)[2].split("</form>")[0]
        assert '<input type="hidden" name="q.agent" value="beta">' in form
        revision = form.split('name="revision" value="', 1)[1].split('"', 1)[0]
        sent = {
            "_csrf": csrf,
            "revision": revision,
            "kind": "answer",
            "question_id": "D1-Q1",
            "answer": "yes",
            "reason": "names the deployment",
            "shown": "FAIL",
            "q.agent": "beta",
            "q.seen": "1",
        }
        saved = await c.post(f"/gradings/{made[0]}/overrides", data=sent, follow_redirects=False)
        stale = await c.post(
            f"/gradings/{made[0]}/overrides",
            data={**sent, "reason": "sent from a stale page"},
            follow_redirects=False,
        )
        assert stale.status_code == 409  # the page again, the walk still in its forms
        assert '<input type="hidden" name="q.agent" value="beta">' in stale.text
        for action in ("next", "done", "skip"):  # and in its Next, Done and Skip
            shown = stale.text.split(f'data-testid="{action}"', 1)[0 if action == "next" else 1]
            part = shown.rsplit("<a ", 1)[1] if action == "next" else shown.split("</form>")[0]
            assert "q.agent=beta" in part or 'name="q.agent" value="beta"' in part, action
        location = saved.headers["location"]
        saved_at = f"/gradings/{made[0]}?saved=D1-Q1&was=FAIL&q.agent=beta&q.seen=1"
        assert location.startswith(saved_at)
        back = (await c.get(location)).text
        assert 'data-testid="saved"' in back
        nxt = back.split('data-testid="next"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
        onward = await c.get(nxt.replace("&amp;", "&"), follow_redirects=False)
        assert onward.headers["location"].startswith(f"/gradings/{made[1]}?claim=true")
        assert "q.agent=beta" in onward.headers["location"]


def _walk_fields(form: str) -> dict[str, str]:
    """The walk (``q.`` hidden fields) a form of a page carries."""
    fields = re.findall(r'<input type="hidden" name="(q\.[^"]+)" value="([^"]*)"', form)
    return {name: html.unescape(value) for name, value in fields}


def _link(page: str, key: str) -> str:
    """The href of the page's link bound to ``key`` (``data-key``)."""
    match = re.search(rf'<a [^>]*href="([^"]+)"[^>]*data-key="{key}"', page)
    assert match, f"no link bound to {key} on the page"
    return html.unescape(match.group(1))


async def _beta_walk(client: Any, agent: dict[str, str]) -> tuple[list[str], list[str]]:
    """A beta item, two alpha items queued behind it and a second beta item: (the beta
    ids, the alpha ids)."""
    beta = [await _submit(client, agent, f"{DIAGNOSIS} Beta 0.", "beta")]
    alpha = [await _submit(client, agent, f"{DIAGNOSIS} Alpha {n}.", "alpha") for n in range(2)]
    beta.append(await _submit(client, agent, f"{DIAGNOSIS} Beta 1.", "beta"))
    return beta, alpha


async def test_tagging_and_untagging_during_a_walk_keep_the_walk(
    api_client: Any, tokens: Any
) -> None:
    """On a walk through the filtered queue the tag form and each tag's remove form carry
    the walk, and after adding or removing a tag the page comes back at the tags on the
    same walk: Next (``n``) opens the next item under the filter."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(*[QUEUED] * 4)) as c:
        beta, alpha = await _beta_walk(c, agent)
        csrf = await sign_in(c, ada)
        start = await c.get("/queue/next?q.agent=beta", follow_redirects=False)
        first = _opened(start.headers["location"])
        page = (await c.get(start.headers["location"])).text
        form = page.split('data-testid="tag-form"', 1)[1].split("</form>", 1)[0]
        walk = _walk_fields(form)
        assert walk["q.agent"] == "beta" and walk["q.seen"] == "1" and "q.key" in walk

        tagged = await c.post(
            f"/gradings/{first}/tags",
            data={"_csrf": csrf, "tag": "misread-unit", "note": "units", **walk},
            follow_redirects=False,
        )
        assert tagged.status_code == 303, tagged.text
        location = tagged.headers["location"]
        assert location.startswith(f"/gradings/{first}?q.agent=beta&") and location.endswith(
            "#tags"
        )
        page = (await c.get(location)).text
        remove = page.split(f'action="/gradings/{first}/tags/', 1)[1].split("</form>", 1)[0]
        assert _walk_fields(remove) == walk
        tag_id = remove.split("/remove", 1)[0]
        untagged = await c.post(
            f"/gradings/{first}/tags/{tag_id}/remove",
            data={"_csrf": csrf, **walk},
            follow_redirects=False,
        )
        assert untagged.headers["location"] == location
        page = (await c.get(location)).text
        onward = await c.get(_link(page, "n"), follow_redirects=False)
        opened = _opened(onward.headers["location"])
        assert {first, opened} == set(beta) and opened not in alpha
        assert "q.agent=beta" in onward.headers["location"]


async def test_a_blind_label_during_a_walk_keeps_the_walk(api_client: Any, tokens: Any) -> None:
    """On a walk through the filtered queue, "Label blind (``b``)" and the label form
    carry the walk, and the saved labels' page leads on along it: its Next (``n``) opens
    the next item under the filter, "Open the grading" the labelled item on the walk."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(*[QUEUED] * 4)) as c:
        beta, alpha = await _beta_walk(c, agent)
        csrf = await sign_in(c, ada)
        start = await c.get("/queue/next?q.agent=beta", follow_redirects=False)
        first = _opened(start.headers["location"])
        page = (await c.get(start.headers["location"])).text
        blind = _link(page, "b")
        assert blind.startswith(f"/gradings/{first}/label?") and "q.agent=beta" in blind
        form = await c.get(blind)
        assert form.status_code == 200
        labels = form.text.split('data-testid="labels"', 1)[1].split("</form>", 1)[0]
        walk = _walk_fields(labels)
        assert walk["q.agent"] == "beta"

        saved = await c.post(
            f"/gradings/{first}/label",
            data={"_csrf": csrf, **{f"q-{q}": "no" for q in IDS}, "verdict": "fail", **walk},
        )
        assert saved.status_code == 200, saved.text
        opened_again = re.search(r'<a class="button" href="([^"]+)">Open the grading', saved.text)
        assert opened_again and "q.agent=beta" in html.unescape(opened_again.group(1))
        onward = await c.get(_link(saved.text, "n"), follow_redirects=False)
        opened = _opened(onward.headers["location"])
        assert {first, opened} == set(beta) and opened not in alpha
        assert "q.agent=beta" in onward.headers["location"]


async def _promote_run(c: Any, admin: dict[str, str], run_id: str) -> None:
    spec = "openai:scripted@http://127.0.0.1:9/v1"
    job = await c.post(
        "/v1/regrade-jobs",
        json={"judge": spec, "mode": "promote", "filter": {"run_id": run_id}},
        headers=admin,
    )
    assert job.status_code == 201, job.text
    for _ in range(100):
        state = (await c.get(f"/v1/regrade-jobs/{job.json()['id']}", headers=admin)).json()
        if state["state"] == "done":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the regrade did not finish")


async def test_next_from_an_item_promoted_while_open_walks_on_not_back_to_it(
    api_client: Any, tokens: Any
) -> None:
    """Ada opens the first item of a walk; while she reads it a promote regrade replaces
    its grading (still queued, in the same tier, her claim following it). Next (n) goes
    on to the second item, never back to the item she walked past under its new
    grading."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(*[QUEUED] * 4)) as c:
        made = [
            await _submit(c, agent, f"{DIAGNOSIS} Attempt {n}.", "beta", run_id=f"run-{n}")
            for n in range(3)
        ]
        await sign_in(c, ada)
        location = (await c.get("/queue/next", follow_redirects=False)).headers["location"]
        assert _opened(location) == made[0]
        page = (await c.get(location)).text  # opened: claimed by Ada
        nxt = html.unescape(
            re.search(r'href="(/queue/next\?[^"]+)"[^>]*data-testid="next"', page)[1]
        )

        await _promote_run(c, admin, "run-0")
        replaced = (await c.get(f"/v1/gradings/{made[0]}", headers=ada)).json()["superseded_by"]
        assert replaced
        queued = (await c.get("/v1/review-queue", headers=ada)).json()["items"]
        assert [i["grading"]["id"] for i in queued] == [replaced, made[1], made[2]]

        onward = await c.get(nxt, follow_redirects=False)
        assert onward.status_code == 303
        opened = _opened(onward.headers["location"])
        assert opened != replaced, "Next reopened the item just walked past (its new grading)"
        assert opened == made[1]


async def test_next_from_an_item_promoted_while_open_gives_the_item_back(
    api_client: Any, tokens: Any
) -> None:
    """As above: the claim followed the item onto the grading in force, and Next, walking
    past the item, gives it back at once (that grading's claim released): Bob's queue
    lists it again."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(**scripted_judge(*[QUEUED] * 4)) as c:
        made = [
            await _submit(c, agent, f"{DIAGNOSIS} Attempt {n}.", "beta", run_id=f"run-{n}")
            for n in range(3)
        ]
        await sign_in(c, ada)
        location = (await c.get("/queue/next", follow_redirects=False)).headers["location"]
        page = (await c.get(location)).text  # opened: claimed by Ada
        nxt = html.unescape(
            re.search(r'href="(/queue/next\?[^"]+)"[^>]*data-testid="next"', page)[1]
        )

        await _promote_run(c, admin, "run-0")
        replaced = (await c.get(f"/v1/gradings/{made[0]}", headers=ada)).json()["superseded_by"]
        before = (await c.get("/v1/review-queue", headers=bob)).json()["items"]
        assert replaced not in [i["grading"]["id"] for i in before]  # Ada holds it

        onward = await c.get(nxt, follow_redirects=False)  # walked past, not opened
        assert onward.status_code == 303
        after = (await c.get("/v1/review-queue", headers=bob)).json()["items"]
        assert replaced in [i["grading"]["id"] for i in after], "Ada still holds the item"
