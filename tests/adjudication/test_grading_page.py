"""One grading's page: side by side, overrides with ETag conflicts, hostile text, roles."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from storage import Store
from tests.storage.helpers import sregym_rubric
from tests.support.judge_server import sregym_reply
from tests.support.keys import session_key
from tests.support.sregym_results import write_sregym_attempt, write_sregym_results
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, graded, scripted_judge
from tests.web.conftest import sign_in

SIX_WITHOUT_D1Q1 = {"D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1"}
QUOTE = "sets USER_PORT=9999"
HOSTILE = (
    "The user-service deployment in hotel sets USER_PORT=9999.\n"
    "<script>alert('xss')</script>\n"
    "<img src=x onerror=alert(1)>\n"
    '<a href="javascript:alert(2)">details</a>\n'
    '<button hx-post="/gradings/x/overrides" hx-vals=\'{"verdict":"pass"}\'>Approve</button>\n'
    "{{ 7*7 }}"
)


def _revision(html: str) -> str:
    match = re.search(r'name="revision" value="(\d+)"', html)
    assert match
    return match.group(1)


async def test_the_page_shows_ground_truth_beside_the_diagnosis_with_evidence_marked(
    api_client: Any, tokens: Any
) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        await sign_in(c, adj)
        page = (await c.get(f"/gradings/{grading['id']}")).text
        assert "<dt>component</dt><dd>user-service</dd>" in page
        assert "<dt>namespace</dt><dd>hotel</dd>" in page
        assert f'<mark class="ev-verified" title="D1-Q2">{QUOTE}</mark>' in page
        assert '<mark class="ev-grounding" title="ground truth">user-service</mark>' in page
        for question in IDS:
            assert f'id="q-{question}"' in page
        assert "verdict-fail" in page and 'data-testid="history"' in page
        assert "judge.call" in page


def _card(page: str, question: str) -> str:
    """The HTML of one question's card."""
    return page.split(f'id="q-{question}"', 1)[1].split('<section class="card', 1)[0]


async def test_one_quote_reads_the_same_on_every_card_citing_it(
    api_client: Any, tokens: Any
) -> None:
    # D1-Q3 ("avoids naming another component") asks for no quote; the same quote that
    # backs D1-Q2 is found for it too, and the card says the question needs none
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        await sign_in(c, adj)
        page = (await c.get(f"/gradings/{grading['id']}")).text
        unneeded = _card(page, "D1-Q3")
        assert "found in the diagnosis (this question asks for no quote)" in unneeded
        assert "NOT" not in unneeded and "ev-verified" in unneeded
        verified = _card(page, "D1-Q2")
        assert "found in the diagnosis" in verified and "ev-verified" in verified


async def test_a_vetoed_or_unquoted_yes_says_why_on_its_own_card(
    api_client: Any, tokens: Any
) -> None:
    unnamed = "The frontend fails: the USER_PORT variable is 9999 instead of 8086."
    quote = "the USER_PORT variable is 9999"
    reply = json.loads(sregym_reply(set(IDS), evidence=quote).strip("`json\n"))
    for item in reply:
        item["evidence"] = "" if item["id"] == "D3-Q2" else quote
    adj = await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(json.dumps(reply))) as c:
        grading = await graded(c, adj, unnamed)
        await sign_in(c, adj)
        page = (await c.get(f"/gradings/{grading['id']}")).text
    vetoed = _card(page, "D1-Q1")
    assert 'data-testid="veto-D1-Q1"' in vetoed
    assert "Vetoed by <code>grounding.component</code>" in vetoed
    assert "the diagnosis does not name deployment/user-service" in vetoed
    assert "The judge&#39;s yes counts as no." in vetoed
    assert "ev-verified" not in vetoed and "ev-overruled" in vetoed
    empty = _card(page, "D3-Q2")
    assert 'data-testid="quote-D3-Q2"' in empty and "ev-unverified" in empty
    assert "NOT verified: the judge quoted nothing from the diagnosis" in empty
    assert "Flagged by <code>evidence.empty</code>" in empty
    assert "veto-" not in _card(page, "D2-Q1")
    assert 'data-testid="detail"' in page and "grounding vetoed D1-Q1" in page


async def test_overriding_one_answer_flips_the_verdict_and_joins_the_history(
    api_client: Any, tokens: Any
) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, adj)
        url = f"/gradings/{grading['id']}"
        shown = (await c.get(url)).text
        assert '<input type="hidden" name="shown" value="FAIL">' in shown
        revision = _revision(shown)
        form = {"_csrf": csrf, "revision": revision, "kind": "answer", "question_id": "D1-Q1"}
        form["shown"] = "FAIL"  # the verdict the page showed, as its forms send it
        missing = await c.post(f"{url}/overrides", data={**form, "answer": "yes", "reason": ""})
        assert missing.status_code == 422 and 'data-testid="form-error"' in missing.text
        response = await c.post(
            f"{url}/overrides",
            data={**form, "answer": "yes", "reason": "names user-service as origin"},
            follow_redirects=False,
        )
        assert response.status_code == 303, response.text
        location = response.headers["location"]
        assert location.endswith("#q-D1-Q1")  # back at the card, where j moves on
        # the flip is confirmed, with the verdict's move, in the card just overridden
        back = (await c.get(location.split("#", 1)[0])).text
        card = back.split('id="q-D1-Q1"', 1)[1].split("</section>", 1)[0]
        assert 'data-testid="saved"' in card and "Verdict FAIL → <strong>PASS</strong>" in card
        assert back.count('data-testid="saved"') == 1
        page = (await c.get(url)).text
        assert 'data-testid="saved"' not in page  # only right after the save
        assert 'data-testid="effective-verdict">PASS<' in page
        assert "overridden (judge: no)" in page
        assert "grading.overridden" in page and "names user-service as origin" in page
        api = (await c.get(f"/v1/gradings/{grading['id']}", headers=adj)).json()
        assert api["passed"] is True and api["overrides"][0]["author"] == "Ada"


async def test_a_verdict_override_of_an_unscored_grading_reads_as_that_verdict(
    api_client: Any, tokens: Any
) -> None:
    """A verdict override decides an unscored grading: its page, the list and the queue
    show that verdict (as ``passed`` on the API), not UNSCORED."""
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(**scripted_judge("garbage", "garbage again")) as client:
        grading = await graded(client, agent)
        assert grading["status"] == "unscored"
        response = await client.post(
            f"/v1/gradings/{grading['id']}/overrides",
            json={"verdict": "pass", "reason": "read it myself: names the port"},
            headers={**adj, "If-Match": f'"{grading["revision"]}"'},
        )
        assert response.status_code == 201 and response.json()["passed"] is True
        await sign_in(client, adj)
        page = (await client.get(f"/gradings/{grading['id']}")).text
        listed = (await client.get("/gradings")).text
    effective = page.split('data-testid="effective-verdict">', 1)[1].split("<", 1)[0]
    assert effective == "PASS"
    assert "UNSCORED" not in listed


async def test_the_override_forms_offer_my_last_reasons_then_the_failure_tags(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    reply = sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE)
    async with api_client(**scripted_judge(reply, reply)) as c:
        first, second = await graded(c, agent), await graded(c, agent)
        csrf = await sign_in(c, ada)
        url = f"/gradings/{first['id']}"
        reason = "names <b>user-service</b> as origin"
        form = {"_csrf": csrf, "revision": _revision((await c.get(url)).text)}
        form |= {"kind": "answer", "question_id": "D1-Q1", "answer": "yes", "reason": reason}
        assert (await c.post(f"{url}/overrides", data=form)).status_code == 200
        page = (await c.get(f"/gradings/{second['id']}")).text
        datalist = page.split('<datalist id="canned-reasons"')[1].split("</datalist>")[0]
        canned = re.findall(r'<option value="([^"]*)">', datalist)
        assert canned[0] == "names &lt;b&gt;user-service&lt;/b&gt; as origin"  # mine, escaped
        assert any(r.startswith("misread-unit") for r in canned)  # the failure tags
        assert page.count('list="canned-reasons"') >= 10  # the verdict form and each answer's
        await c.get("/logout")
        await sign_in(c, agent)
        assert "canned-reasons" not in (await c.get(url)).text


async def test_a_stale_page_shows_what_changed_and_keeps_the_input(
    api_client: Any, tokens: Any
) -> None:
    agent, adj, other = (
        await tokens("submitter"),
        await tokens("adjudicator", "Ada"),
        await tokens("adjudicator", "Bob"),
    )
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, adj)
        url = f"/gradings/{grading['id']}"
        revision = _revision((await c.get(url)).text)
        etag = (await c.get(f"/v1{url}", headers=other)).headers["etag"]
        bob = await c.post(
            f"/v1{url}/overrides",
            json={"verdict": "fail", "reason": "Bob says the diagnosis guesses"},
            headers={**other, "If-Match": etag},
        )
        assert bob.status_code == 201
        stale = await c.post(
            f"{url}/overrides",
            data={
                "_csrf": csrf,
                "revision": revision,
                "seen": "",
                "kind": "answer",
                "question_id": "D1-Q1",
                "answer": "yes",
                "reason": "my careful reason",
            },
        )
        assert stale.status_code == 409
        assert 'data-testid="conflict"' in stale.text
        assert "Bob" in stale.text and "Bob says the diagnosis guesses" in stale.text
        assert 'value="my careful reason"' in stale.text
        assert f'name="revision" value="{revision}"' not in stale.text
        api = (await c.get(f"/v1{url}", headers=adj)).json()
        assert [o["author"] for o in api["overrides"]] == ["Bob"]


async def test_a_stale_page_names_the_failure_tags_added_or_removed_meanwhile(
    api_client: Any, tokens: Any
) -> None:
    """A failure tag added or removed moves the grading's revision (the API's ETag), so an
    override sent from a page opened before is refused (409). What changed is named: the
    tag, who added or removed it and its note; no cause that did not happen."""
    agent = await tokens("submitter")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, ada)
        url = f"/gradings/{grading['id']}"

        async def override_after(change: Any) -> str:
            """The conflict an override from a page opened before ``change`` meets."""
            page = (await c.get(url)).text
            seen = re.search(r'name="seen" value="([^"]*)"', page)
            assert seen
            await change()
            refused = await c.post(
                f"{url}/overrides",
                data={
                    "_csrf": csrf,
                    "revision": _revision(page),
                    "seen": seen.group(1),
                    "kind": "answer",
                    "question_id": "D1-Q1",
                    "answer": "yes",
                    "reason": "the diagnosis names user-service",
                },
            )
            assert refused.status_code == 409, refused.status_code
            text: str = refused.text
            assert 'value="the diagnosis names user-service"' in text
            return text.split('data-testid="conflict"', 1)[1].split("</section>", 1)[0]

        async def tag() -> None:
            sent = {"tag": "misread-unit", "note": "cores vs millicores"}
            tagged = await c.post(f"/v1{url}/tags", json=sent, headers=bob)
            assert tagged.status_code == 201, tagged.text

        async def untag() -> None:
            [tag_id] = [t["id"] for t in (await c.get(f"/v1{url}", headers=bob)).json()["tags"]]
            removed = await c.delete(f"/v1{url}/tags/{tag_id}", headers=bob)
            assert removed.status_code in (200, 204), removed.text

        added = await override_after(tag)
        assert "Bob: failure tag" in added and "misread-unit</span> added" in added
        assert "cores vs millicores" in added
        assert "regraded" not in added and "withdrawn" not in added
        removed = await override_after(untag)
        assert "Bob: failure tag" in removed and "misread-unit</span> removed" in removed
        assert "added" not in removed  # the tag added before this page was opened is not news


async def test_the_same_override_sent_twice_is_saved_once_and_answered_as_saved(
    api_client: Any, tokens: Any
) -> None:
    """A double click on "Make it YES" sends the form twice: the override is saved once,
    and the second answer is the first's (back at the card, saved), not a conflict
    saying it was not saved and inviting to send it again. An override that differs
    (another reason) from the same page is still a conflict."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        csrf = await sign_in(c, ada)
        url = f"/gradings/{grading['id']}"
        shown = (await c.get(url)).text
        seen = re.search(r'name="seen" value="([^"]*)"', shown)
        assert seen
        form = {
            "_csrf": csrf,
            "revision": _revision(shown),
            "seen": seen.group(1),
            "shown": "FAIL",
            "kind": "answer",
            "question_id": "D1-Q1",
            "answer": "yes",
            "reason": "names user-service as the origin",
        }
        first = await c.post(f"{url}/overrides", data=form, follow_redirects=False)
        second = await c.post(f"{url}/overrides", data=form, follow_redirects=False)
        other = {**form, "reason": "names user-service, and the port"}
        differs = await c.post(f"{url}/overrides", data=other, follow_redirects=False)
        stored = (await c.get(f"/v1{url}", headers=ada)).json()
        history = (await c.get(f"/v1{url}/history", headers=ada)).json()["events"]
    assert (first.status_code, second.status_code) == (303, 303), second.text
    assert second.headers["location"] == first.headers["location"]
    assert [o["reason"] for o in stored["overrides"]] == ["names user-service as the origin"]
    assert [e["event"] for e in history].count("grading.overridden") == 1
    assert differs.status_code == 409 and 'data-testid="conflict"' in differs.text


async def test_an_override_without_the_csrf_token_is_refused_and_stores_nothing(
    api_client: Any, tokens: Any
) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        await sign_in(c, adj)
        url = f"/gradings/{grading['id']}"
        body = {
            "revision": _revision((await c.get(url)).text),
            "verdict": "pass",
            "kind": "verdict",
        }
        for extra in ({}, {"_csrf": "forged"}):
            response = await c.post(f"{url}/overrides", data={**body, **extra, "reason": "x y z"})
            assert response.status_code == 403
        api = (await c.get(f"/v1{url}", headers=adj)).json()
        assert api["overrides"] == [] and api["passed"] is False


async def test_a_hostile_diagnosis_renders_as_inert_text(api_client: Any, tokens: Any) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent, diagnosis=HOSTILE)
        await sign_in(c, adj)
        page = (await c.get(f"/gradings/{grading['id']}")).text
        assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in page
        for raw in ("<script>alert", "<img src=x", 'href="javascript:', "<button hx-post"):
            assert raw not in page, raw
        assert "{{ 7*7 }}" in page  # the diagnosis is data, never a template
        assert re.findall(r"<script[^>]*>", page) == [
            '<script src="/static/web/workbench.js" defer>'
        ]


async def test_a_submitter_reads_its_own_grading_without_the_hidden_ground_truth(
    api_client: Any, tokens: Any
) -> None:
    admin, agent, stranger = (
        await tokens("admin"),
        await tokens("submitter", "agent"),
        await tokens("submitter", "stranger"),
    )
    reply = sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE)
    async with api_client(**scripted_judge(reply)) as c:
        made = await c.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        submitted = await c.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": "The user-service pod is broken.", "scenario_id": "hotel/user-port"},
            headers=agent,
        )
        assert submitted.status_code == 201, submitted.text
        grading_id = submitted.json()["id"]
        await sign_in(c, agent)
        page = await c.get(f"/gradings/{grading_id}")
        assert page.status_code == 200
        assert 'data-testid="ground-truth-withheld"' in page.text
        for secret in ("USER_PORT", "9999", "hotel</dd>"):
            assert secret not in page.text, secret
        assert '<form method="post" action="/gradings/' not in page.text  # read-only
        assert 'data-testid="history"' not in page.text
        listing = (await c.get("/gradings")).text
        assert grading_id in listing
        c.cookies.clear()
        await sign_in(c, stranger)
        assert (await c.get(f"/gradings/{grading_id}")).status_code == 404
        assert grading_id not in (await c.get("/gradings")).text


async def test_pages_showing_a_ground_truth_are_never_stored_by_a_cache(
    api_client: Any, tokens: Any
) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        await sign_in(c, adj)
        pages = [await c.get(path) for path in (f"/gradings/{grading['id']}", "/", "/queue")]
        login = await c.get("/login")
    assert TRUTH.split("||")[0].strip()[:20] in pages[0].text  # the page shows the truth
    for page in [*pages, login]:
        assert page.status_code == 200, page.url
        assert page.headers["cache-control"] == "no-store", page.url


async def test_an_imported_sregym_verdict_reads_with_question_texts_and_named_people(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """SREGym's own verdicts are stored against no rubric version of this service: the
    page shows them with the current rubric's question texts and dimension names (it asks
    the same nine questions); the verdict reads once; the history names people."""
    fixture = write_sregym_results(tmp_path)
    store = Store(engine, key=session_key())
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        listed = (await c.get("/v1/gradings?limit=1", headers=ada)).json()["items"][0]
        url = f"/gradings/{listed['id']}"
        csrf = await sign_in(c, ada)
        page = (await c.get(url)).text
        assert "Does the diagnosis name the component where the fault originates?" in page
        assert "Fault localization: " in page and "D1: " not in page
        verdict = page.split("Effective:", 1)[1].split("·", 1)[0]  # before "judge said"
        assert verdict.count("PASS") + verdict.count("FAIL") == 1, verdict
        form = {"_csrf": csrf, "revision": _revision(page), "kind": "verdict"}
        form |= {"verdict": "fail", "reason": "checked by hand"}
        assert (await c.post(f"{url}/overrides", data=form)).status_code == 200
        history = (await c.get(url)).text.split('data-testid="history"', 1)[-1]
        assert "grading.overridden</strong> by <span" in history and ">Ada</span>" in history


async def _import_attempt(
    engine: Engine, tmp_path: Path, checklist: list[dict[str, str]], *, success: bool
) -> None:
    """One SREGym attempt imported with SREGym's ``checklist`` and ``success``."""
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis=DIAGNOSIS, ground_truth=TRUTH, success=success
    )
    store = Store(engine, key=session_key())
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip


async def test_an_imported_attempt_sregym_could_not_grade_is_decided_on_its_page(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """An imported verdict SREGym's judge could not grade has no answers: its page and its
    blind-label form ask the current rubric's questions with their texts; the page
    offers the verdict override, which decides it, and neither a flip of an answer it
    does not have nor a rule's verdict on answers it does not have."""
    failure = [
        {"id": q, "answer": "No", "evidence": "parse failure: no JSON", "confidence": "Low"}
        for q in IDS
    ]
    await _import_attempt(engine, tmp_path, failure, success=False)
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        [listed] = (await c.get("/v1/gradings", headers=ada)).json()["items"]
        assert listed["status"] == "unscored"
        url = f"/gradings/{listed['id']}"
        csrf = await sign_in(c, ada)
        page = (await c.get(url)).text
        label = (await c.get(f"{url}/label")).text
        form = {"_csrf": csrf, "revision": _revision(page), "kind": "verdict"}
        form |= {"verdict": "pass", "reason": "names the service and the port"}
        sent = await c.post(f"{url}/overrides", data=form)
        after = (await c.get(url)).text
    question = "Does the diagnosis name the component where the fault originates?"
    assert question in page and question in label
    assert label.count('type="radio"') == 2 * len(IDS)
    assert 'data-testid="verdict-override"' in page
    assert "data-min-yes" not in page and "data-flip" not in page
    assert sent.status_code == 200, sent.text
    effective = after.split('data-testid="effective-verdict">', 1)[1].split("<", 1)[0]
    assert effective == "PASS"


async def test_an_imported_checklist_missing_a_question_offers_the_verdict_only(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """A checklist SREGym wrote without one of the rubric's questions reads with the
    rubric's texts, the missing question unanswered; the rule cannot be applied to it, so
    the page neither previews the rule nor offers to flip an answer."""
    checklist = [{"id": q, "answer": "Yes", "evidence": QUOTE, "confidence": "High"} for q in IDS]
    await _import_attempt(engine, tmp_path, checklist[:8], success=True)
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        [listed] = (await c.get("/v1/gradings", headers=ada)).json()["items"]
        await sign_in(c, ada)
        page = (await c.get(f"/gradings/{listed['id']}")).text
    assert "Does the diagnosis name the component where the fault originates?" in page
    assert 'data-testid="answer-D3-Q2"' in page and 'data-testid="answer-D3-Q3"' not in page
    assert 'data-question="D3-Q3"' in page
    assert 'data-testid="verdict-override"' in page
    assert "data-min-yes" not in page and "data-flip" not in page


class _Selects(HTMLParser):
    """Every <select> of a page and whether it has an accessible name (a <label for>, a
    wrapping <label>, aria-label, aria-labelledby or title)."""

    def __init__(self) -> None:
        super().__init__()
        self.label_for: set[str] = set()
        self.in_label = 0
        self.selects: list[tuple[dict[str, str | None], bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "label":
            self.in_label += 1
            if a.get("for"):
                self.label_for.add(str(a["for"]))
        if tag == "select":
            self.selects.append((a, self.in_label > 0))

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self.in_label -= 1

    def unnamed(self) -> list[str]:
        """The names of the selects a screen reader has no label to announce for."""
        out = []
        for a, wrapped in self.selects:
            named = (
                wrapped
                or a.get("aria-label")
                or a.get("aria-labelledby")
                or a.get("title")
                or (a.get("id") and a["id"] in self.label_for)
            )
            if not named:
                out.append(str(a.get("name")))
        return out


@pytest.mark.parametrize("path", ["/queue", "/gradings", "GRADING"])
async def test_every_select_of_an_adjudicators_page_has_an_accessible_name(
    api_client: Any, tokens: Any, path: str
) -> None:
    """A screen reader announces each <select> by its name: the queue's filters, the
    gradings list's filters and the grading's verdict override all have one."""
    agent, adj = await tokens("submitter", "agent"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(set(IDS), evidence=QUOTE))) as c:
        grading = await graded(c, agent)
        await sign_in(c, adj)
        url = f"/gradings/{grading['id']}" if path == "GRADING" else path
        page = await c.get(url)
        assert page.status_code == 200, page.text[-400:]
    selects = _Selects()
    selects.feed(page.text)
    assert selects.selects and selects.unnamed() == [], f"{url}: selects without a name"
