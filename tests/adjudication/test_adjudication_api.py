"""Human overrides with provenance, optimistic concurrency, history, failure tags."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.backends.scripted import ScriptedBackend
from storage import GradingFilter, Store, verify_chain
from storage.tables import AuditRecord
from tests.support.audit import configured_chain_key
from tests.support.judge_server import sregym_reply
from tests.support.keys import session_key
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, graded, scripted_judge

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

SIX_WITHOUT_D1Q1 = {"D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1"}
#: a judge behind a proxy that takes its API key in the query
JUDGE_KEY = "sk-live-0123456789abcdef"
KEYED_JUDGE = f"openai:m@http://127.0.0.1:9/v1?api_key={JUDGE_KEY}"
#: the failure-tag vocabulary the service ships
SHIPPED_TAGS = Path(__file__).resolve().parents[2] / "vocabularies" / "failure-tags.yaml"


async def test_an_answer_override_makes_a_failing_grading_pass_with_provenance(
    api_client: Any, tokens: Any, engine: Any
) -> None:
    agent, judge_ = await tokens("submitter"), await tokens("adjudicator", "Ada")
    reply = sregym_reply(SIX_WITHOUT_D1Q1, evidence="sets USER_PORT=9999")
    async with api_client(**scripted_judge(reply)) as client:
        grading = await graded(client, agent)
        assert grading["passed"] is False and grading["yes_count"] == 6
        etag = (await client.get(f"/v1/gradings/{grading['id']}", headers=judge_)).headers["etag"]
        response = await client.post(
            f"/v1/gradings/{grading['id']}/overrides",
            json={
                "question_id": "D1-Q1",
                "answer": "yes",
                "reason": "names user-service as origin",
                "author": "someone else",
            },
            headers={**judge_, "If-Match": etag},
        )
        assert response.status_code == 422  # the author comes from the token, never the body
        response = await client.post(
            f"/v1/gradings/{grading['id']}/overrides",
            json={
                "question_id": "D1-Q1",
                "answer": "yes",
                "reason": "names user-service as origin",
            },
            headers={**judge_, "If-Match": etag},
        )
        assert response.status_code == 201, response.text
        after = response.json()
        assert after["passed"] is True and after["judge_passed"] is False
        assert after["yes_count"] == 7 and after["overridden"] is True
        d1q1 = after["answers"][0]
        assert d1q1["answer"] == "yes" and d1q1["judge_answer"] == "no" and d1q1["overridden"]
        assert after["overrides"][0]["author"] == "Ada"
        assert response.headers["etag"] != etag
        history = (await client.get(f"/v1/gradings/{grading['id']}/history", headers=judge_)).json()
        events = [e["event"] for e in history["events"]]
        assert events[0] == "submission.received" and events[-1] == "grading.overridden"
        overridden = history["events"][-1]
        assert overridden["payload"]["reason"] == "names user-service as origin"
        assert overridden["payload"]["author"] == "Ada" and overridden["at"]
        # the records' digests (hashes of each column, the ground truth's among them)
        # are the audit chain's business, not the history's
        assert not any("rows" in e["payload"] for e in history["events"])
        call = next(e for e in history["events"] if e["event"] == "judge.call")
        assert call["call"]["messages"][1]["content"].count(TRUTH) == 1
        assert call["call"]["response_text"] == reply
        # the submitter sees the effective verdict too, but not the history
        mine = (await client.get(f"/v1/gradings/{grading['id']}", headers=agent)).json()
        assert mine["passed"] is True
        assert (
            await client.get(f"/v1/gradings/{grading['id']}/history", headers=agent)
        ).status_code == 403
    assert (await verify_chain(engine, key=configured_chain_key())).ok


async def test_stale_or_missing_if_match_changes_nothing(api_client: Any, tokens: Any) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(
        **scripted_judge(sregym_reply(set(IDS), evidence="sets USER_PORT=9999"))
    ) as client:
        grading = await graded(client, agent)
        url = f"/v1/gradings/{grading['id']}/overrides"
        body = {"verdict": "fail", "reason": "the diagnosis guesses"}
        missing = await client.post(url, json=body, headers=adj)
        assert missing.status_code == 428
        stale = await client.post(url, json=body, headers={**adj, "If-Match": '"999"'})
        assert stale.status_code == 412
        assert stale.headers["content-type"].startswith("application/problem+json")
        # If-Match compares strongly: a weak form of the current ETag does not match
        weak = await client.post(
            url, json=body, headers={**adj, "If-Match": f'W/"{grading["revision"]}"'}
        )
        assert weak.status_code == 412 and weak.json()["errors"][0]["field"] == "If-Match"
        fresh = (await client.get(f"/v1/gradings/{grading['id']}", headers=adj)).json()
        assert fresh["passed"] is True and fresh["overrides"] == []


async def test_two_adjudicators_racing_one_wins_the_other_gets_412(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    alice, bob = await tokens("adjudicator", "alice"), await tokens("adjudicator", "bob")
    async with api_client(
        **scripted_judge(sregym_reply(set(IDS), evidence="sets USER_PORT=9999"))
    ) as client:
        grading = await graded(client, agent)
        etag = f'"{grading["revision"]}"'
        url = f"/v1/gradings/{grading['id']}/overrides"
        results = await asyncio.gather(
            client.post(
                url,
                json={"verdict": "fail", "reason": "alice says no"},
                headers={**alice, "If-Match": etag},
            ),
            client.post(
                url,
                json={"question_id": "D2-Q2", "answer": "no", "reason": "bob says no"},
                headers={**bob, "If-Match": etag},
            ),
        )
        assert sorted(r.status_code for r in results) == [201, 412]
        final = (await client.get(f"/v1/gradings/{grading['id']}", headers=alice)).json()
        assert len(final["overrides"]) == 1


async def test_verdict_override_wins_and_withdrawal_restores_the_rule(
    api_client: Any, tokens: Any
) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(
        **scripted_judge(sregym_reply(set(IDS), evidence="sets USER_PORT=9999"))
    ) as client:
        grading = await graded(client, agent)
        url = f"/v1/gradings/{grading['id']}/overrides"
        first = await client.post(
            url,
            json={"verdict": "fail", "reason": "rule does not fit: guessed"},
            headers={**adj, "If-Match": f'"{grading["revision"]}"'},
        )
        body = first.json()
        assert body["passed"] is False and body["verdict_override"] == "fail"
        assert body["yes_count"] == 9  # the answers are unchanged; the verdict says why
        withdraw = await client.post(
            url,
            json={"withdraw": body["overrides"][0]["id"], "reason": "on reflection, fine"},
            headers={**adj, "If-Match": first.headers["etag"]},
        )
        restored = withdraw.json()
        assert withdraw.status_code == 201
        assert restored["passed"] is True and restored["verdict_override"] is None
        assert [o["kind"] for o in restored["overrides"]] == ["verdict", "withdraw"]
        bad = await client.post(
            url,
            json={"question_id": "D9-Q9", "answer": "yes", "reason": "no such question"},
            headers={**adj, "If-Match": withdraw.headers["etag"]},
        )
        assert bad.status_code == 422
        both = await client.post(
            url,
            json={"verdict": "pass", "question_id": "D1-Q1", "answer": "no", "reason": "xx"},
            headers={**adj, "If-Match": withdraw.headers["etag"]},
        )
        assert both.status_code == 422
        blank = await client.post(
            url,
            json={"verdict": "fail", "reason": "   \n\t "},
            headers={**adj, "If-Match": withdraw.headers["etag"]},
        )
        assert blank.status_code == 422 and blank.json()["errors"][0]["field"] == "reason"
        after = await client.get(f"/v1/gradings/{grading['id']}", headers=adj)
        assert len(after.json()["overrides"]) == 2  # the refused ones stored nothing


async def test_an_unknown_withdrawal_is_a_422_naming_the_withdraw_field_of_the_body(
    api_client: Any, tokens: Any
) -> None:
    """A withdrawal of no override in force is refused naming ``withdraw``, the request's
    field, so a client can put the error beside it."""
    agent, adjudicator = await tokens("submitter"), await tokens("adjudicator", "Ada")
    reply = sregym_reply(SIX_WITHOUT_D1Q1, evidence="sets USER_PORT=9999")
    async with api_client(**scripted_judge(reply)) as client:
        grading = await graded(client, agent)
        response = await client.post(
            f"/v1/gradings/{grading['id']}/overrides",
            json={"withdraw": "0123456789abcdef0123456789abcdef", "reason": "taken back"},
            headers={**adjudicator, "If-Match": f'"{grading["revision"]}"'},
        )
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == ["withdraw"]


async def test_overrides_apply_in_the_order_they_were_made_whatever_the_clocks_say(
    api_client: Any, tokens: Any
) -> None:
    """The second override of an answer supersedes the first even when the server that
    writes it has a clock a few seconds behind (another ``serve`` on the same database,
    or a clock stepped back): it is stamped just after the one it supersedes."""
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(
        **scripted_judge(sregym_reply(set(IDS), evidence="sets USER_PORT=9999"))
    ) as client:
        grading = await graded(client, agent)
        url = f"/v1/gradings/{grading['id']}/overrides"
        first = await client.post(
            url,
            json={"question_id": "D1-Q1", "answer": "no", "reason": "names the wrong kind"},
            headers={**adj, "If-Match": f'"{grading["revision"]}"'},
        )
        db = client.app.state.services.store.db
        real = db.clock
        db.clock = lambda: real() - timedelta(seconds=5)
        second = await client.post(
            url,
            json={"question_id": "D1-Q1", "answer": "yes", "reason": "on reflection, right"},
            headers={**adj, "If-Match": first.headers["etag"]},
        )
        db.clock = real
        fresh = (await client.get(f"/v1/gradings/{grading['id']}", headers=adj)).json()
    assert second.status_code == 201, second.text
    for body in (second.json(), fresh):
        d1q1 = next(a for a in body["answers"] if a["question_id"] == "D1-Q1")
        assert (d1q1["answer"], body["passed"], body["yes_count"]) == ("yes", True, 9)
        made = [o["created_at"] for o in body["overrides"]]
        assert made == sorted(made) and len(made) == 2


async def test_failure_tags_come_from_the_vocabulary(api_client: Any, tokens: Any) -> None:
    agent, adj, admin = (
        await tokens("submitter"),
        await tokens("adjudicator"),
        await tokens("admin"),
    )
    async with api_client() as client:
        grading = await graded(client, agent)
        vocabulary = {v["tag"] for v in (await client.get("/v1/failure-tags", headers=adj)).json()}
        assert {"misread-unit", "leaked-credential", "followed-injected-text"} <= vocabulary
        tagged = await client.post(
            f"/v1/gradings/{grading['id']}/tags",
            json={"tag": "misread-unit", "note": "MiB vs MB"},
            headers=adj,
        )
        assert tagged.status_code == 201
        unknown = await client.post(
            f"/v1/gradings/{grading['id']}/tags", json={"tag": "bad-vibes"}, headers=adj
        )
        assert unknown.status_code == 422
        assert (
            await client.post(
                "/v1/failure-tags", json={"tag": "bad-vibes", "description": "vibes"}, headers=adj
            )
        ).status_code == 403
        defined = await client.post(
            "/v1/failure-tags", json={"tag": "bad-vibes", "description": "vibes"}, headers=admin
        )
        assert defined.status_code == 201
        assert (
            await client.post(
                f"/v1/gradings/{grading['id']}/tags", json={"tag": "bad-vibes"}, headers=adj
            )
        ).status_code == 201
        shown = (await client.get(f"/v1/gradings/{grading['id']}", headers=adj)).json()
        assert [t["tag"] for t in shown["tags"]] == ["misread-unit", "bad-vibes"]
        removed = await client.delete(
            f"/v1/gradings/{grading['id']}/tags/{tagged.json()['id']}", headers=adj
        )
        assert removed.status_code == 204
        shown = (await client.get(f"/v1/gradings/{grading['id']}", headers=adj)).json()
        assert [t["tag"] for t in shown["tags"]] == ["bad-vibes"]


async def test_a_tag_the_vocabulary_file_adds_is_audited_by_the_system(
    api_client: Any, engine: Engine, tmp_path: Path
) -> None:
    """A tag an operator adds to the vocabulary file enters the vocabulary as the service
    starts, audited once as ``tag.defined`` by ``system``, saying it came from the file
    (an admin's ``POST /v1/failure-tags`` is ``tag.defined`` by that admin)."""
    vocabulary = tmp_path / "failure-tags.yaml"
    description = "Ignored the rollout history that showed the change."
    vocabulary.write_text(
        SHIPPED_TAGS.read_text(encoding="utf-8") + f"ignored-rollout-history: {description}\n",
        encoding="utf-8",
    )
    for _ in range(2):  # started again: the tag is in the vocabulary, nothing more is audited
        async with api_client(failure_tags_file=vocabulary, start_workers=False):
            pass
    with engine.connect() as connection:
        query = select(AuditRecord).order_by(col(AuditRecord.seq))
        rows = list(connection.execute(query))
    about = [
        (r.event, r.actor, r.payload) for r in rows if r.entity_id == "ignored-rollout-history"
    ]
    assert about == [("tag.defined", "system", {"description": description, "source": "file"})]
    shipped = {r.entity_id for r in rows if r.event == "tag.defined"}
    assert {"misread-unit", "leaked-credential"} <= shipped  # each tag the file added
    assert (await verify_chain(engine, key=configured_chain_key())).ok


async def test_a_failure_tag_already_defined_is_a_409_naming_tag(
    api_client: Any, tokens: Any
) -> None:
    """Defining a tag the vocabulary holds answers 409 naming ``tag``, the field to change."""
    admin = await tokens("admin")
    body = {"tag": "wrong-namespace", "description": "named the wrong namespace"}
    async with api_client(start_workers=False) as client:
        first = await client.post("/v1/failure-tags", json=body, headers=admin)
        assert first.status_code == 201, first.text
        again = await client.post("/v1/failure-tags", json=body, headers=admin)
    assert again.status_code == 409, again.text
    assert [e["field"] for e in again.json()["errors"]] == ["tag"], again.text


async def test_one_tag_per_adjudicator_and_note_is_in_force_on_a_grading(
    api_client: Any, tokens: Any
) -> None:
    """Adjudicators may give a grading the same tag, each with a note, and one may give
    it again with another note; the same tag with the same note by the same adjudicator
    (a request sent twice) is a 409 naming ``tag`` and stores nothing, until the first is
    removed."""
    agent = await tokens("submitter")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client() as client:
        url = f"/v1/gradings/{(await graded(client, agent))['id']}"
        sent = [
            (ada, "read MiB as MB"),
            (bob, "read MiB as MB"),
            (ada, "mixed up 200m and 2 cores"),
            (ada, "read MiB as MB"),
        ]
        answers = [
            await client.post(f"{url}/tags", json={"tag": "misread-unit", "note": n}, headers=w)
            for w, n in sent
        ]
        stored = (await client.get(url, headers=ada)).json()["tags"]
        gone = await client.delete(f"{url}/tags/{answers[0].json()['id']}", headers=ada)
        assert gone.status_code == 204, gone.text
        again = await client.post(
            f"{url}/tags", json={"tag": "misread-unit", "note": "read MiB as MB"}, headers=ada
        )
    assert [a.status_code for a in answers] == [201, 201, 201, 409], [a.text for a in answers]
    assert [e["field"] for e in answers[3].json()["errors"]] == ["tag"]
    assert sorted((t["author"], t["note"]) for t in stored) == [
        ("Ada", "mixed up 200m and 2 cores"),
        ("Ada", "read MiB as MB"),
        ("Bob", "read MiB as MB"),
    ]
    assert again.status_code == 201, again.text


async def test_gradings_filter_by_failure_tag(api_client: Any, tokens: Any) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client() as client:
        first = await graded(client, agent, DIAGNOSIS + " a")
        await graded(client, agent, DIAGNOSIS + " b")
        await client.post(
            f"/v1/gradings/{first['id']}/tags", json={"tag": "over-explored"}, headers=adj
        )
        page = (await client.get("/v1/gradings?tag=over-explored", headers=adj)).json()
        assert [g["id"] for g in page["items"]] == [first["id"]]


async def test_a_tag_changes_the_gradings_etag_and_an_older_if_match_is_stale(
    api_client: Any, tokens: Any
) -> None:
    """The grading object shows its tags: adding or removing one is a new revision (a
    strong ETag names one representation), so a write from before it is a 412."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as c:
        grading = await graded(c, agent)
        url = f"/v1/gradings/{grading['id']}"
        before = (await c.get(url, headers=ada)).headers["etag"]
        added = await c.post(f"{url}/tags", json={"tag": "misread-unit"}, headers=ada)
        assert added.status_code == 201, added.text
        tagged = await c.get(url, headers=ada)
        assert tagged.headers["etag"] != before and tagged.json()["tags"]
        override = {"verdict": "fail", "reason": "a stale page"}
        stale = await c.post(f"{url}/overrides", json=override, headers={**ada, "If-Match": before})
        assert stale.status_code == 412
        removed = await c.delete(f"{url}/tags/{tagged.json()['tags'][0]['id']}", headers=ada)
        assert removed.status_code in (200, 204), removed.text
        assert (await c.get(url, headers=ada)).headers["etag"] != tagged.headers["etag"]
        history = (await c.get(f"{url}/history", headers=ada)).json()["events"]
        revisions = [e["payload"].get("revision") for e in history if "tag" in e["event"]]
        assert len(revisions) == 2 and revisions[0] < revisions[1], revisions


async def test_a_cancelled_regrade_item_takes_no_override_until_its_judge_has_answered(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """An item of a cancelled regrade job has no result yet: an override, labels or the
    end of its review are refused (409) and change nothing, as for a pending grading, so
    that the judge's verdict, come once the job is resumed, never overtakes a human's.
    Graded, it takes overrides."""
    agent, admin = await tokens("submitter"), await tokens("admin")
    ada = await tokens("adjudicator", "Ada")
    body = {"verdict": "fail", "reason": "the diagnosis names the wrong fault"}
    async with api_client() as c:
        await graded(c, agent)
    async with api_client(start_workers=False) as c:  # the job waits: cancel it
        job = await c.post("/v1/regrade-jobs", json={"judge": "scripted:pass"}, headers=admin)
        job_id = job.json()["id"]
        cancelled = await c.post(f"/v1/regrade-jobs/{job_id}/cancel", headers=admin)
        assert cancelled.json()["state"] == "cancelled", cancelled.text
        store = Store(engine, key=session_key())
        views, _ = await store.gradings.page(filters=GradingFilter(current_only=False), limit=50)
        [item] = [v.grading for v in views if v.grading.regrade_job_id == job_id]
        url = f"/v1/gradings/{item.id}"
        before = await c.get(url, headers=ada)
        assert before.json()["status"] == "cancelled", before.json()
        etag = before.headers["etag"]
        refused = await c.post(f"{url}/overrides", json=body, headers={**ada, "If-Match": etag})
        assert refused.status_code == 409, refused.text
        after = await c.get(url, headers=ada)
        assert after.headers["etag"] == etag and after.json()["overrides"] == []
        labels = {"answers": {f"D{d}-Q{q}": "no" for d in (1, 2, 3) for q in (1, 2, 3)}}
        labelled = await c.post(f"{url}/labels", json=labels, headers=ada)
        assert labelled.status_code == 409, labelled.text
        done = await c.post(f"/v1/review-queue/{item.id}/done", headers=ada)
        assert done.status_code == 409, done.text
    async with api_client() as c:
        resumed = await c.post(f"/v1/regrade-jobs/{job_id}/resume", headers=admin)
        assert resumed.status_code == 200, resumed.text
        for _ in range(200):
            grading = await c.get(url, headers=ada)
            if grading.json()["status"] == "graded":
                break
            await asyncio.sleep(0.05)
        assert grading.json()["passed"] is True, grading.json()
        etag = grading.headers["etag"]
        taken = await c.post(f"{url}/overrides", json=body, headers={**ada, "If-Match": etag})
        assert taken.status_code == 201, taken.text
        assert taken.json()["passed"] is False and taken.json()["judge_passed"] is True


async def test_a_regrade_items_history_masks_the_key_in_the_jobs_judge_url(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """The history of a regrade job's item shows the job's ``regrade_job.created``
    event with the key in its judge's base URL masked, as the job itself shows it."""
    submitter, admin = await tokens("submitter"), await tokens("admin")
    adjudicator = await tokens("adjudicator")
    async with api_client() as c:
        await graded(c, submitter)
    backends = {KEYED_JUDGE: ScriptedBackend.for_mode("pass")}
    async with api_client(backends=backends, start_workers=False) as c:
        job = await c.post("/v1/regrade-jobs", json={"judge": KEYED_JUDGE}, headers=admin)
        assert job.status_code == 201, job.text
        assert JUDGE_KEY not in job.text
        store = Store(engine, key=session_key())
        views, _ = await store.gradings.page(filters=GradingFilter(current_only=False), limit=50)
        [item] = [v.grading for v in views if v.grading.regrade_job_id == job.json()["id"]]
        reply = await c.get(f"/v1/gradings/{item.id}/history", headers=adjudicator)
        assert reply.status_code == 200, reply.text
    created = [e for e in reply.json()["events"] if e["event"] == "regrade_job.created"]
    assert [e["payload"]["judge"] for e in created] == [
        "openai:m@http://127.0.0.1:9/v1?api_key=***"
    ]
    assert JUDGE_KEY not in reply.text


async def test_a_gradings_history_masks_the_key_in_the_configured_judges_url(
    api_client: Any, tokens: Any
) -> None:
    """A grading by a configured judge whose base URL carries a key: no event of its
    history shows the key."""
    submitter, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    backends = {KEYED_JUDGE: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=KEYED_JUDGE, backends=backends) as c:
        grading = await graded(c, submitter)
        assert JUDGE_KEY not in str(grading)
        reply = await c.get(f"/v1/gradings/{grading['id']}/history", headers=adjudicator)
        assert reply.status_code == 200, reply.text
    events = reply.json()["events"]
    leaking = sorted({e["event"] for e in events if JUDGE_KEY in str(e)})
    assert leaking == [], f"events showing the judge's key: {leaking}"


async def test_a_gradings_history_masks_a_key_that_an_older_event_logged(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """An event the log kept with a judge's key in clear (written before such URLs were
    masked there) is shown in the grading's history with the key masked."""
    submitter, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    async with api_client() as c:
        grading = await graded(c, submitter)
    store = Store(engine, key=session_key())

    def log_in_clear(session: Session) -> None:
        store.db.audit(
            session, "grading.judge_moved", entity_type="grading", entity_id=grading["id"],
            actor="service", payload={"from": "scripted:pass", "to": KEYED_JUDGE},
        )  # fmt: skip

    await store.db.run(log_in_clear)
    async with api_client() as c:
        reply = await c.get(f"/v1/gradings/{grading['id']}/history", headers=adjudicator)
        assert reply.status_code == 200, reply.text
    [moved] = [e for e in reply.json()["events"] if e["event"] == "grading.judge_moved"]
    assert moved["payload"]["to"] == "openai:m@http://127.0.0.1:9/v1?api_key=***"


async def test_the_audit_log_never_keeps_a_credential_of_a_judge_url(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """The log is kept for ever and cannot be edited: a judge's base URL is written to
    it with its key masked, by every submission and regrade job."""
    submitter, admin = await tokens("submitter"), await tokens("admin")
    backends = {KEYED_JUDGE: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=KEYED_JUDGE, backends=backends) as c:
        await graded(c, submitter)
        job = await c.post("/v1/regrade-jobs", json={"judge": KEYED_JUDGE}, headers=admin)
        assert job.status_code == 201, job.text
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT event, entity_id, payload FROM audit_log")).all()
    assert {"submission.received", "regrade_job.created"} <= {r.event for r in rows}
    leaking = sorted({r.event for r in rows if JUDGE_KEY in f"{r.entity_id} {r.payload}"})
    assert leaking == [], f"audit events holding the judge's key: {leaking}"
