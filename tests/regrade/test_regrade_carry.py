"""Human decisions carried by regrades: onto imported SREGym verdicts, and with the
review that made them, so a regrade neither drops a human's decision nor asks again;
and those sent to a grading a promote already replaced, which are refused rather than
lost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.webhooks.outbox import subscribe as subscribe_outbox
from api.webhooks.queries import WebhookQueries
from judge.adjudication import overrides_in_force
from judge.backends.scripted import ScriptedBackend
from judge.rubric import DEFAULT_RUBRIC_DIR
from storage import GradingFilter, Store, verify_chain
from storage.overrides import override_events
from storage.review_tables import HumanLabelRecord, OverrideRecord
from tests.storage.helpers import graded_result, override, sregym_rubric, submit
from tests.support.gradings import shadow_regrade
from tests.support.keys import session_key
from tests.support.lock_waits import race_at_audit
from tests.support.sregym_results import write_sregym_attempt, write_sregym_results
from tests.support.submissions import DIAGNOSIS, TRUTH
from tests.web.conftest import sign_in

#: the engine matters here (the review's upsert): run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

ALL = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


async def _import(engine: Engine, tmp_path: Path) -> Any:
    """The synthetic SREGym folder imported; its first passing verdict."""
    fixture = write_sregym_results(tmp_path)
    store = Store(engine, key=session_key())
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip
    views, _ = await store.gradings.page(limit=500)
    return next(v.grading for v in views if v.grading.passed is True)


async def _finished(client: Any, headers: dict[str, str], job_id: str) -> Any:
    for _ in range(600):
        body = (await client.get(f"/v1/regrade-jobs/{job_id}", headers=headers)).json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"job still {body['state']}: {body}")


async def _override(client: Any, grading_id: str, headers: dict[str, str], body: Any) -> None:
    etag = (await client.get(f"/v1/gradings/{grading_id}", headers=headers)).headers["etag"]
    reply = await client.post(
        f"/v1/gradings/{grading_id}/overrides", json=body, headers={**headers, "If-Match": etag}
    )
    assert reply.status_code in (200, 201), reply.text


async def _item(store: Store, job_id: str, submission_id: str) -> Any:
    views, _ = await store.gradings.page(limit=500, filters=GradingFilter(current_only=False))
    return next(
        v.grading
        for v in views
        if v.grading.regrade_job_id == job_id and v.grading.submission_id == submission_id
    )


async def test_a_human_verdict_on_an_imported_sregym_verdict_is_carried_by_a_promote(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """SREGym's verdicts are stored under rubric version ``sregym``, which no stored
    rubric has: their overrides were never carried (the old rubric unknown), and a promote
    of an overridden one was held back for good."""
    old = await _import(engine, tmp_path)
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    async with api_client(backends={"scripted:pass": ScriptedBackend.for_mode("pass")}) as c:
        await _override(c, old.id, adjudicator, {"verdict": "fail", "reason": "wrong fault"})
        request = {"judge": "scripted:pass", "rubric": "sregym-rca", "mode": "promote",
                   "filter": {"judge": "external:sregym"}}  # fmt: skip
        job = (await c.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        assert (await _finished(c, admin, job["id"]))["state"] == "done"
    item = await _item(Store(engine, key=session_key()), job["id"], old.submission_id)
    assert "override_outdated" not in item.review_reasons, item.review_reasons
    assert item.is_current and item.passed is False  # promoted, the human's fail in force


async def test_a_human_verdict_on_an_attempt_sregym_could_not_grade_is_carried_by_a_promote(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """An imported attempt SREGym's judge could not grade has no answers, and a human's
    verdict decided it: the promote that grades it again carries that verdict (it reads
    with its rubric's current version, as its page shows it) and replaces it."""
    unparsed = [
        {"id": q, "answer": "No", "evidence": "parse failure: no JSON", "confidence": "Low"}
        for q in ALL
    ]
    fixture = write_sregym_attempt(
        tmp_path, unparsed, diagnosis=DIAGNOSIS, ground_truth=TRUTH, success=False
    )
    store = Store(engine, key=session_key())
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip
    [view], _ = await store.gradings.page(limit=5)
    old = view.grading
    assert old.status == "unscored"
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    async with api_client(backends={"scripted:fail": ScriptedBackend.for_mode("fail")}) as c:
        await _override(c, old.id, adjudicator, {"verdict": "pass", "reason": "names the port"})
        request = {"judge": "scripted:fail", "mode": "promote",
                   "filter": {"judge": "external:sregym"}}  # fmt: skip
        job = (await c.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        assert (await _finished(c, admin, job["id"]))["state"] == "done"
    item = await _item(Store(engine, key=session_key()), job["id"], old.submission_id)
    assert "override_outdated" not in item.review_reasons, item.review_reasons
    assert item.is_current and item.passed is True and item.judge_passed is False


async def test_an_answer_override_on_an_imported_sregym_verdict_is_carried(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    old = await _import(engine, tmp_path)
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    async with api_client(backends={"scripted:fail": ScriptedBackend(model="fail")}) as c:
        body = {"question_id": "D1-Q1", "answer": "yes", "reason": "it names the service"}
        await _override(c, old.id, adjudicator, body)
        request = {"judge": "scripted:fail", "filter": {"judge": "external:sregym"}}
        job = (await c.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        await _finished(c, admin, job["id"])
    item = await _item(Store(engine, key=session_key()), job["id"], old.submission_id)
    assert "override_outdated" not in item.review_reasons and item.overridden


#: the shipped wording of D1-Q1, and another
_SHIPPED_Q1 = "text: Does the diagnosis name the component where the fault originates?"
_REWORDED_Q1 = "text: Does the diagnosis name the Kubernetes object the fault was injected into?"


async def test_an_answer_override_decided_on_another_wording_is_outdated_not_carried(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """A human decides an imported SREGym verdict's answer as its page words the
    question: with the rubric's current version. A regrade with an earlier version,
    which words that question otherwise, does not carry the decision: the new grading
    goes to review as ``override_outdated``."""
    shipped = (DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text()
    assert _SHIPPED_Q1 in shipped
    first, reworded = tmp_path / "v1", tmp_path / "v2"
    first.mkdir()
    reworded.mkdir()
    (first / "sregym-rca.yaml").write_text(shipped)
    (reworded / "sregym-rca.yaml").write_text(
        shipped.replace("label: v1", "label: v2").replace(_SHIPPED_Q1, _REWORDED_Q1)
    )
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    async with api_client(rubric_dir=first, start_workers=False) as c:  # v1 stored
        v1 = (await c.get("/v1/rubrics", headers=admin)).json()[0]["version"]
    old = await _import(engine, tmp_path / "sregym")
    async with api_client(
        rubric_dir=reworded, backends={"scripted:fail": ScriptedBackend(model="fail")}
    ) as c:
        current = (await c.get("/v1/rubrics", headers=admin)).json()[0]["version"]
        assert current != v1 and current.startswith("v2+")
        body = {"question_id": "D1-Q1", "answer": "yes", "reason": "it names the object"}
        await _override(c, old.id, adjudicator, body)  # decided on v2's wording
        request = {"judge": "scripted:fail", "rubric": f"sregym-rca@{v1}",
                   "filter": {"judge": "external:sregym"}}  # fmt: skip
        job = (await c.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        assert (await _finished(c, admin, job["id"]))["state"] == "done"
    item = await _item(Store(engine, key=session_key()), job["id"], old.submission_id)
    assert item.rubric_version == v1
    assert "override_outdated" in item.review_reasons, (item.review_reasons, item.overridden)


async def test_a_human_verdict_carried_by_a_promote_is_not_asked_for_again(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A decisive pass confirmed by an adjudicator left the queue; the promote that
    carries that verdict onto the new current grading carries the finished review too."""
    store = Store(engine, key=session_key())
    await submit(store)
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result(ALL[:7]))
    adjudicator = await tokens("adjudicator")
    async with api_client(start_workers=False) as c:
        queue = (await c.get("/v1/review-queue", headers=adjudicator)).json()["items"]
        assert [i["grading"]["id"] for i in queue] == [claim.grading_id]
        await _override(
            c, claim.grading_id, adjudicator, {"verdict": "pass", "reason": "checked it"}
        )
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="a")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result(ALL[:7]))
    [current], _ = await store.gradings.page(limit=5)
    assert current.grading.id == item.grading_id and current.grading.overridden
    async with api_client(start_workers=False) as c:
        queue = (await c.get("/v1/review-queue", headers=adjudicator)).json()["items"]
    assert queue == [], [i["reasons"] for i in queue]


async def test_a_review_a_promote_carries_counts_once_among_those_reviewed_today(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """Ada decided one grading today (a verdict override); a promote carried her verdict
    and her finished review onto the new current grading. The queue page's "reviewed
    today" counts the reviews people finished: still one, the carried review being the
    same review."""
    store = Store(engine, key=session_key())
    await submit(store)
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result(ALL[:7]))
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as c:
        await _override(c, claim.grading_id, ada, {"verdict": "pass", "reason": "checked it"})
        await sign_in(c, ada)
        assert "<strong>1</strong> reviewed today" in (await c.get("/queue")).text
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result(ALL[:7]))
    async with api_client(start_workers=False) as c:
        await sign_in(c, ada)
        queue = (await c.get("/queue")).text
    assert "<strong>1</strong> reviewed today" in queue, queue.split("reviewed today")[0][-80:]


async def test_a_webhook_subscriber_hears_the_human_verdict_a_promote_carried(
    engine: Engine, service_key: Any
) -> None:
    """A human failed a grading and a promote carried the fail onto the new current
    grading: its only delivery was the ``grading.completed`` written before the carry
    (the judge's pass), so a CI hook took the attempt for a pass. The carry is the new
    grading's ``grading.overridden``, and every delivery of the grading tells the verdict
    in force (the judge's stays in ``judge_passed``)."""
    store = Store(engine, key=service_key)
    subscribe_outbox(store.db)
    events = ["grading.completed", "grading.overridden"]
    endpoint = await WebhookQueries(store.db).create_endpoint(
        url="http://127.0.0.1:9/hook", events=events, description="", actor="t"
    )
    old = (await submit(store)).grading.id
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result(ALL))
    view = await store.gradings.get(old)
    assert view is not None
    await override(store, old, rubric=sregym_rubric(),
        expected_revision=view.grading.revision, kind="verdict", reason="wrong fault",
        author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    spec = "openai:new@http://127.0.0.1:9/v1"
    target = RegradeTarget(sregym_rubric(), spec, "openai", "new", "promote")
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result(ALL))
    deliveries = await WebhookQueries(store.db).deliveries(endpoint.id)
    payloads = [
        p
        for p in (d.delivery.payload for d in reversed(deliveries))  # oldest first
        if p["data"]["grading_id"] == item.grading_id
    ]
    told = [
        (p["type"], p["data"]["passed"], p["data"]["overridden"], p["data"].get("carried_from"))
        for p in payloads
    ]
    assert told == [
        ("grading.completed", False, True, None),
        ("grading.overridden", False, True, old),
    ]
    assert [p["data"]["judge_passed"] for p in payloads] == [True, True]


async def _graded(store: Store, yes: list[str]) -> str:
    """One submission graded by the judge with ``yes``; its grading id."""
    await submit(store)
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result(yes))
    return claim.grading_id


async def _promoted(store: Store, yes: list[str]) -> str:
    """A promote job over everything, its one item graded with ``yes``; the item's id."""
    spec = "openai:new@http://127.0.0.1:9/v1"
    target = RegradeTarget(sregym_rubric(), spec, "openai", "new", "promote")
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result(yes))
    return item.grading_id


async def test_withdrawing_a_carried_override_takes_its_human_label_back(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """A withdrawal takes back the label the withdrawn override recorded: Hana's verdict
    override on G0 recorded her label there, a promote carried it onto G1 as a copy
    (no label of its own), and her withdrawal on G1 retracted nothing, so judge-human
    agreement still counted the judgement she took back. The copy names its original
    (``carried_from``), whose label is the one retracted."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL)

    hana = await tokens("adjudicator", "Hana")
    async with api_client(start_workers=False) as c:
        etag = (await c.get(f"/v1/gradings/{old}", headers=hana)).headers["etag"]
        made = await c.post(f"/v1/gradings/{old}/overrides", headers={**hana, "If-Match": etag},
                            json={"verdict": "fail", "reason": "wrong fault"})  # fmt: skip
        assert made.status_code in (200, 201), made.text
        before = (await c.get("/v1/stats/agreement?kind=judge_human", headers=hana)).json()
    new = await _promoted(store, ALL)
    async with api_client(start_workers=False) as c:
        got = await c.get(f"/v1/gradings/{new}", headers=hana)
        body = got.json()
        assert body["passed"] is False, body
        [carried] = [o for o in body["overrides"] if o.get("verdict") == "fail"]
        assert carried["carried_from"] is not None
        gone = await c.post(f"/v1/gradings/{new}/overrides",
                            headers={**hana, "If-Match": got.headers["etag"]},
                            json={"withdraw": carried["id"], "reason": "I was wrong"})  # fmt: skip
        assert gone.status_code in (200, 201), gone.text
        assert gone.json()["passed"] is True
        after = (await c.get("/v1/stats/agreement?kind=judge_human", headers=hana)).json()
    n_before, n_after = _verdict_n(before), _verdict_n(after)
    assert n_before == 1, before
    assert n_after == 0, (
        f"Hana withdrew her verdict, yet judge-human agreement still counts it: {after}"
    )


async def test_withdrawing_a_verdict_where_it_was_made_withdraws_the_copies_promotes_carried(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """Hana failed G0; two promotes carried her verdict onto G1, then onto G2 (current).
    Withdrawn on G0, where she made it (its link in the history, the flip report), the
    decision goes wherever it was carried: each copy still in force is withdrawn on its
    own grading in her name, in the same transaction, audited there, and G2 passes again
    on its judge's answers. Her label is taken back once."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL)
    hana = await tokens("adjudicator", "Hana")
    async with api_client(start_workers=False) as c:
        etag = (await c.get(f"/v1/gradings/{old}", headers=hana)).headers["etag"]
        made = await c.post(f"/v1/gradings/{old}/overrides", headers={**hana, "If-Match": etag},
                            json={"verdict": "fail", "reason": "wrong fault"})  # fmt: skip
        assert made.status_code == 201, made.text
        original = made.json()["overrides"][-1]["id"]
    middle = await _promoted(store, ALL)
    new = await _promoted(store, ALL)
    async with api_client(start_workers=False) as c:
        current = (await c.get(f"/v1/gradings/{new}", headers=hana)).json()
        assert current["passed"] is False and current["verdict_override"] == "fail"
        etag = (await c.get(f"/v1/gradings/{old}", headers=hana)).headers["etag"]
        gone = await c.post(f"/v1/gradings/{old}/overrides", headers={**hana, "If-Match": etag},
                            json={"withdraw": original, "reason": "I was wrong"})  # fmt: skip
        assert gone.status_code == 201, gone.text
        after = {g: (await c.get(f"/v1/gradings/{g}", headers=hana)).json() for g in (middle, new)}
        history = (await c.get(f"/v1/gradings/{new}/history", headers=hana)).json()["events"]
        agreement = (await c.get("/v1/stats/agreement?kind=judge_human", headers=hana)).json()
        listed = (await c.get("/v1/gradings?passed=true", headers=hana)).json()["items"]
    for grading in after.values():
        assert (grading["passed"], grading["verdict_override"]) == (True, None), grading
        [copy, withdrawal] = grading["overrides"]
        assert copy["carried_from"] is not None and withdrawal["withdraws"] == copy["id"]
        assert withdrawal["author"] == "Hana" and "I was wrong" in withdrawal["reason"]
    assert history[-1]["event"] == "grading.overridden"
    assert history[-1]["payload"]["withdraws"] == after[new]["overrides"][0]["id"]
    assert [g["id"] for g in listed] == [new]
    assert _verdict_n(agreement) == 0, agreement
    with engine.connect() as connection:  # her label, and its one retraction
        query = select(col(HumanLabelRecord.grading_id), col(HumanLabelRecord.verdict))
        labels = connection.execute(query)
        assert sorted(labels, key=lambda row: row[1] is None) == [(old, "fail"), (old, None)]
    assert (await verify_chain(engine, key=store.db.chain_key)).ok


async def test_a_withdrawal_racing_a_shadow_items_completion_withdraws_it_everywhere(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hana failed G0 (a verdict override) while a shadow regrade of G0 runs, and
    withdraws her verdict at the moment the shadow item completes and carries G0's
    overrides. Both succeed, one after the other (no deadlock on PostgreSQL: each takes
    its row locks before the audit chain's lock), and no copy of the withdrawn verdict
    stays in force on the shadow grading."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    old_id = await _graded(store, ALL)
    view = await store.gradings.get(old_id)
    assert view is not None
    original, _ = await override(
        store, old_id, rubric=sregym_rubric(), expected_revision=view.grading.revision,
        kind="verdict", reason="the judge missed the scope", author_id="h1",
        author_name="Hana", verdict="fail",
    )  # fmt: skip
    shadow = RegradeTarget(
        sregym_rubric(), "openai:new-judge@http://127.0.0.1:9/v1", "openai", "new-judge",
        "shadow",
    )  # fmt: skip
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), shadow, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    overridden = await store.gradings.get(old_id)
    assert overridden is not None
    withdrawal = override(
        store, old_id, rubric=sregym_rubric(), expected_revision=overridden.grading.revision,
        kind="withdraw", reason="I was wrong", author_id="h1", author_name="Hana",
        withdraws=original.id,
    )  # fmt: skip
    # the withdrawal has locked G0 and is about to audit when the shadow item completes
    await race_at_audit(
        store,
        monkeypatch,
        "grading.overridden",
        withdrawal,
        lambda: store.queue.complete(item.grading_id, "w", graded_result(ALL)),
    )

    def overrides_on(session: Any, grading_id: str) -> list[OverrideRecord]:
        query = select(OverrideRecord).where(col(OverrideRecord.grading_id) == grading_id)
        return list(session.execute(query).scalars())

    on_shadow = await store.db.run_read(overrides_on, item.grading_id)
    in_force = overrides_in_force(override_events(on_shadow))
    shadow_grading = await store.gradings.get(item.grading_id)
    assert shadow_grading is not None
    assert in_force == {}, f"still in force on the shadow grading: {list(in_force.values())}"
    assert shadow_grading.grading.passed is True


async def _promote_claimed(store: Store) -> str:
    """A promote job over everything, its one item claimed and not completed; its id."""
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    return item.grading_id


def _in_force_on(session: Any, grading_id: str) -> dict[Any, Any]:
    query = select(OverrideRecord).where(col(OverrideRecord.grading_id) == grading_id)
    return overrides_in_force(override_events(list(session.execute(query).scalars())))


async def test_a_withdrawal_racing_a_promote_that_carries_its_copy_onward_withdraws_both(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hana failed G0 and a promote carried her verdict onto G1 (copy C1). A second
    promote, completing G2, locks G1 and copies C1 onto G2 at the moment Hana withdraws
    her verdict on G0. Both succeed, and the withdrawal reaches every copy: C1 on G1
    and the copy on G2 that the promote committed while the withdrawal waited for G1's
    row, so the current grading passes again on its judge's answers."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    g0 = await _graded(store, ALL)
    view = await store.gradings.get(g0)
    assert view is not None
    original, _ = await override(
        store, g0, rubric=sregym_rubric(), expected_revision=view.grading.revision,
        kind="verdict", reason="wrong fault", author_id="h1", author_name="Hana",
        verdict="fail",
    )  # fmt: skip
    g1 = await _promote_claimed(store)
    assert await store.queue.complete(g1, "w", graded_result(ALL))
    g2 = await _promote_claimed(store)
    now = await store.gradings.get(g0)
    assert now is not None
    withdrawal = override(
        store, g0, rubric=sregym_rubric(), expected_revision=now.grading.revision,
        kind="withdraw", reason="I was wrong", author_id="h1", author_name="Hana",
        withdraws=original.id,
    )  # fmt: skip
    # the second promote holds G1 and is about to audit its verdict when Hana withdraws
    await race_at_audit(
        store,
        monkeypatch,
        "grading.completed",
        store.queue.complete(g2, "w", graded_result(ALL)),
        lambda: withdrawal,
    )
    assert await store.db.run_read(_in_force_on, g1) == {}
    current = await store.gradings.get(g2)
    assert current is not None and current.grading.is_current
    left = await store.db.run_read(_in_force_on, g2)
    assert left == {}, f"Hana's withdrawn verdict is still in force on the current grading: {left}"
    assert current.grading.passed is True


async def test_withdrawing_a_stale_shadow_copy_keeps_the_label_its_author_stands_by(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """Hana failed G0 and a shadow regrade carried her verdict onto its grading; she then
    passed G0 instead. Withdrawing the stale copy on the shadow grading takes back
    nothing of hers on G0: her pass there, still in force, is the label judge-human
    agreement counts before and after."""
    store = Store(engine, key=service_key)
    g0 = await _graded(store, ALL)
    hana = await tokens("adjudicator", "Hana")
    async with api_client(start_workers=False) as c:
        await _override(c, g0, hana, {"verdict": "fail", "reason": "wrong fault"})
    job = await shadow_regrade(store, passing=1)
    views, _ = await store.gradings.page(limit=50, filters=GradingFilter(current_only=False))
    [shadow] = [v.grading.id for v in views if v.grading.regrade_job_id == job]
    async with api_client(start_workers=False) as c:
        carried = (await c.get(f"/v1/gradings/{shadow}", headers=hana)).json()
        [copy] = [o for o in carried["overrides"] if o.get("carried_from")]
        await _override(c, g0, hana, {"verdict": "pass", "reason": "it names the fault"})
        before = (await c.get("/v1/stats/agreement?kind=judge_human", headers=hana)).json()
        await _override(c, shadow, hana, {"withdraw": copy["id"], "reason": "stale copy"})
        on_shadow = (await c.get(f"/v1/gradings/{shadow}", headers=hana)).json()
        on_g0 = (await c.get(f"/v1/gradings/{g0}", headers=hana)).json()
        after = (await c.get("/v1/stats/agreement?kind=judge_human", headers=hana)).json()
    assert on_shadow["verdict_override"] is None
    assert on_g0["verdict_override"] == "pass"
    assert _verdict_n(before) == 1, before
    assert _verdict_n(after) == 1, (
        f"Hana's pass on G0 is still in force, yet agreement no longer counts it: {after}"
    )
    with engine.connect() as connection:  # her two labels on G0, no retraction
        query = select(col(HumanLabelRecord.grading_id), col(HumanLabelRecord.verdict))
        labels = connection.execute(query.order_by(col(HumanLabelRecord.id)))
        assert list(labels) == [(g0, "fail"), (g0, "pass")]


def _verdict_n(report: dict[str, Any]) -> int:
    """The number of verdict pairs in a judge-human agreement report (0 when none)."""
    return sum(
        int(row["agreement"]["n"])
        for kind in report["kinds"]
        for row in kind["rows"]
        if row["level"] == "verdict"
    )


async def test_a_review_in_progress_follows_the_item_onto_the_promoted_grading(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """An item assigned to Ada and claimed by her for 30 minutes is replaced by a promote
    (decisive again, so back in the queue): it was unassigned, out of her ``assigned=me``,
    and offered to Bob while her claim on the same attempt held."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL[:7])  # decisive: in the queue
    admin, bob = await tokens("admin"), await tokens("adjudicator", "Bob")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as c:
        assigned = await c.post(
            f"/v1/review-queue/{old}/assign", json={"assignee": "Ada"}, headers=admin
        )
        claimed = await c.post(f"/v1/review-queue/{old}/claim", json={"minutes": 30}, headers=ada)
        assert assigned.is_success and claimed.is_success, (assigned.text, claimed.text)
    new = await _promoted(store, ALL[:7])
    async with api_client(start_workers=False) as c:
        mine = (await c.get("/v1/review-queue?assigned=me", headers=ada)).json()["items"]
        offered = (await c.get("/v1/review-queue", headers=bob)).json()["items"]
    assert [i["grading"]["id"] for i in mine] == [new]
    assert offered == []  # Ada's claim holds on the new grading


async def test_failure_tags_follow_the_item_onto_the_promoted_grading(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """A tag says what the agent got wrong, which a new judge of the same diagnosis does
    not change: after a promote the failure-tags report and ``?tag=`` (current gradings)
    lost it. A tag removed before is not carried; the audit chain holds the copies."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL[:3])
    adjudicator = await tokens("adjudicator")
    async with api_client(start_workers=False) as c:
        for tag in ("misread-unit", "over-explored"):
            sent = {"tag": tag, "note": "MiB as MB"}
            made = await c.post(f"/v1/gradings/{old}/tags", json=sent, headers=adjudicator)
            assert made.is_success, made.text
        tags = (await c.get(f"/v1/gradings/{old}", headers=adjudicator)).json()["tags"]
        [gone] = [t["id"] for t in tags if t["tag"] == "over-explored"]
        removed = await c.delete(f"/v1/gradings/{old}/tags/{gone}", headers=adjudicator)
        assert removed.is_success, removed.text
    new = await _promoted(store, ALL[:3])
    async with api_client(start_workers=False) as c:
        report = (await c.get("/v1/stats/failure-tags?inline=include", headers=adjudicator)).json()
        listed = (await c.get("/v1/gradings?tag=misread-unit", headers=adjudicator)).json()
        shown = (await c.get(f"/v1/gradings/{new}", headers=adjudicator)).json()["tags"]
    assert [g["id"] for g in listed["items"]] == [new]
    assert [(t["tag"], t["note"]) for t in shown] == [("misread-unit", "MiB as MB")]
    assert "misread-unit" in str(report) and "over-explored" not in str(report)
    assert (await verify_chain(engine, key=store.db.chain_key)).ok


async def test_a_promote_carries_every_tag_in_force_with_its_author_and_note(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """Two adjudicators may give a grading the same tag, each with a note: a promote
    copies both onto the grading it makes current, which the tag list, exports and
    ``?q=`` over tag notes read."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL[:3])
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(start_workers=False) as c:
        for who, note in ((ada, "read MiB as MB"), (bob, "mixed up 200m and 2 cores")):
            sent = {"tag": "misread-unit", "note": note}
            tagged = await c.post(f"/v1/gradings/{old}/tags", json=sent, headers=who)
            assert tagged.status_code == 201, tagged.text
    new = await _promoted(store, ALL[:3])
    async with api_client(start_workers=False) as c:
        shown = (await c.get(f"/v1/gradings/{new}", headers=ada)).json()["tags"]
        found = (await c.get("/v1/gradings?q=cores", headers=ada)).json()["items"]
    notes = sorted((t["author"], t["tag"], t["note"]) for t in shown)
    assert notes == [
        ("Ada", "misread-unit", "read MiB as MB"),
        ("Bob", "misread-unit", "mixed up 200m and 2 cores"),
    ]
    assert [g["id"] for g in found] == [new]


async def test_an_override_of_a_grading_a_promote_superseded_is_refused_naming_the_one_in_force(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """A promote carries the overrides in force when it replaces a grading; an answer or
    verdict sent to the replaced grading afterwards would reach no verdict in force (the
    current grading's, which reports, exports and the submitter read). It is refused
    with 409 naming the grading that superseded it and the one in force, even from a
    page or ETag read before the promote (no 412 to send again), and nothing is stored."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL)
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as c:
        stale = (await c.get(f"/v1/gradings/{old}", headers=ada)).headers["etag"]
    middle = await _promoted(store, ALL)
    new = await _promoted(store, ALL[:3])  # the judge in force now fails it
    async with api_client(start_workers=False) as c:
        sent = [
            (old, stale, {"verdict": "pass", "reason": "the diagnosis names the fault"}),
            (old, None, {"question_id": "D3-Q1", "answer": "yes", "reason": "it says why"}),
            (middle, None, {"verdict": "pass", "reason": "the diagnosis names the fault"}),
        ]
        for grading, etag, body in sent:
            if etag is None:
                etag = (await c.get(f"/v1/gradings/{grading}", headers=ada)).headers["etag"]
            refused = await c.post(f"/v1/gradings/{grading}/overrides", json=body,
                                   headers={**ada, "If-Match": etag})  # fmt: skip
            assert refused.status_code == 409, refused.text
            assert f"grading {new}" in refused.json()["detail"], refused.text
        detail = refused.json()["detail"]
        assert f"superseded by grading {new} " in detail  # middle's successor is in force
        first = (await c.post(f"/v1/gradings/{old}/overrides", json=sent[0][2],
                              headers={**ada, "If-Match": stale})).json()  # fmt: skip
        assert f"superseded by grading {middle}, itself superseded" in first["detail"], first
        stored = {g: (await c.get(f"/v1/gradings/{g}", headers=ada)).json() for g in (old, new)}
    assert stored[new]["passed"] is False and stored[new]["overrides"] == []
    assert stored[old]["overrides"] == []
    assert (await verify_chain(engine, key=store.db.chain_key)).ok


async def test_a_shadow_regrade_s_grading_takes_overrides_and_tags(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """A shadow regrade's grading is not current, yet nothing replaced it: adjudicators
    override and tag it as any other."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL)
    job = await shadow_regrade(store, passing=1)
    view = await store.gradings.get(old)
    assert view is not None
    shadow = (await _item(store, job, view.submission.id)).id
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as c:
        etag = (await c.get(f"/v1/gradings/{shadow}", headers=ada)).headers["etag"]
        made = await c.post(f"/v1/gradings/{shadow}/overrides", headers={**ada, "If-Match": etag},
                            json={"verdict": "fail", "reason": "wrong fault"})  # fmt: skip
        assert made.status_code == 201, made.text
        tagged = await c.post(
            f"/v1/gradings/{shadow}/tags", json={"tag": "misread-unit"}, headers=ada
        )
        assert tagged.status_code == 201, tagged.text
        gone = await c.delete(f"/v1/gradings/{shadow}/tags/{tagged.json()['id']}", headers=ada)
        assert gone.status_code == 204, gone.text


async def test_a_failure_tag_is_neither_added_to_nor_removed_from_a_superseded_grading(
    api_client: Any, tokens: Any, engine: Engine, service_key: Any
) -> None:
    """Reports and ``?tag=`` count the tags of current gradings; a promote copies the
    tags in force onto the grading it promotes. A tag added to the grading it replaced
    afterwards would be counted nowhere, and one removed there would stay in force on
    its copy: both are refused with 409 naming the grading in force, and nothing
    changes; the copy is removed where it is in force."""
    store = Store(engine, key=service_key)
    old = await _graded(store, ALL[:3])
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as c:
        tagged = await c.post(f"/v1/gradings/{old}/tags", json={"tag": "misread-unit"},
                              headers=ada)  # fmt: skip
        assert tagged.status_code == 201, tagged.text
    new = await _promoted(store, ALL[:3])
    async with api_client(start_workers=False) as c:
        before = (await c.get(f"/v1/gradings/{old}", headers=ada)).json()
        added = await c.post(f"/v1/gradings/{old}/tags", json={"tag": "over-explored"},
                             headers=ada)  # fmt: skip
        removed = await c.delete(f"/v1/gradings/{old}/tags/{tagged.json()['id']}", headers=ada)
        for refused in (added, removed):
            assert refused.status_code == 409, refused.text
            assert f"superseded by grading {new}" in refused.json()["detail"], refused.text
        after = (await c.get(f"/v1/gradings/{old}", headers=ada)).json()
        shown = (await c.get(f"/v1/gradings/{new}", headers=ada)).json()["tags"]
        listed = {}
        for tag in ("misread-unit", "over-explored"):
            items = (await c.get(f"/v1/gradings?tag={tag}", headers=ada)).json()["items"]
            listed[tag] = [g["id"] for g in items]
        [copy] = shown
        gone = await c.delete(f"/v1/gradings/{new}/tags/{copy['id']}", headers=ada)
        assert gone.status_code == 204, gone.text
        emptied = (await c.get("/v1/gradings?tag=misread-unit", headers=ada)).json()["items"]
    assert (after["revision"], after["tags"]) == (before["revision"], before["tags"])
    assert [t["tag"] for t in shown] == ["misread-unit"]
    assert listed == {"misread-unit": [new], "over-explored": []}
    assert emptied == []
