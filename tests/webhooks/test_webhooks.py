"""Webhooks: registration, signed deliveries, retries in event order, dead letters."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.webhooks.outbox import on_committed
from api.webhooks.outbox import subscribe as subscribe_outbox
from api.webhooks.queries import WebhookQueries
from judge.rubric import DEFAULT_RUBRIC_DIR, Rubric, load_rubric_dir
from storage import Store
from storage.canonical import utcnow
from storage.cursors import CursorCodec
from storage.keys import ServiceKey
from storage.models import FinishedGrading
from storage.review_tables import OverrideRecord
from storage.tables import AuditRecord, row_values
from storage.webhooks.tables import WebhookDeliveryRecord, WebhookEndpointRecord
from tests.storage.helpers import (
    graded_result,
    new_submission,
    override,
    sregym_rubric,
    submit,
)
from tests.support.keys import session_key
from tests.support.network import hook_network
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH
from tests.support.webhook_receiver import Receiver, receiving

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

FAST = {
    "webhook_allow_hosts": "127.0.0.1",
    "webhook_retry_seconds": 0.02,
    "webhook_timeout_seconds": 5,
    # a retry is found by the next poll: retries here are 0.02 s apart
    "poll_seconds": 0.1,
}


async def _register(client: Any, admin: dict[str, str], receiver: Receiver, **extra: Any) -> str:
    response = await client.post(
        "/v1/webhooks",
        json={"url": receiver.url, "events": ["grading.completed", "grading.overridden"], **extra},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["secret"].startswith("whsec_")
    receiver.secret = body["secret"]
    return str(body["id"])


async def _grade(client: Any, agent: dict[str, str], n: int = 0) -> dict[str, Any]:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": f"{DIAGNOSIS} #{n}", "ground_truth": TRUTH, "run_id": str(n)},
        headers=agent,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _until(check: Any, seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def _recorded_delivery(client: Any, headers: Any, webhook_id: str) -> Any:
    """The endpoint's one delivery once it is no longer pending (20 s at most)."""
    for _ in range(400):
        answer = await client.get(f"/v1/webhooks/{webhook_id}/deliveries", headers=headers)
        [delivery] = answer.json()["items"]
        if delivery["state"] != "pending":
            return delivery
        await asyncio.sleep(0.05)
    raise AssertionError("the delivery is still pending")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.7/hook",
        "http://[::1]/hook",
        "ftp://93.184.215.14/hook",
    ],
)
async def test_private_and_metadata_targets_are_refused(
    api_client: Any, tokens: Any, url: str
) -> None:
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        response = await client.post(
            "/v1/webhooks", json={"url": url, "events": ["grading.completed"]}, headers=admin
        )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "url"


#: IPv6 forms that reach IPv4 loopback, private or metadata addresses, and site-local
IPV6_FORMS = {
    "http://[::127.0.0.1]/hook": "IPv4-compatible",
    "http://[::ffff:127.0.0.1]/hook": "loopback",
    "http://[::ffff:0:127.0.0.1]/hook": "IPv4-translated form of 127.0.0.1, loopback",
    "http://[64:ff9b::127.0.0.1]/hook": "NAT64 form of 127.0.0.1, loopback",
    "http://[64:ff9b::169.254.169.254]/hook": "NAT64 form of 169.254.169.254, link-local",
    "http://[64:ff9b:1::a00:7]/hook": "local-use NAT64",
    "http://[2002:7f00:1::1]/hook": "6to4 form of 127.0.0.1, loopback",
    "http://[2002:a9fe:a9fe::1]/hook": "6to4 form of 169.254.169.254, link-local",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook": "Teredo",
    "http://[fec0::1]/hook": "site-local",
    "http://[fd00::1]/hook": "unique local",
}


async def test_ipv6_transition_and_site_local_targets_are_refused(
    api_client: Any, tokens: Any
) -> None:
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        for url, why in IPV6_FORMS.items():
            response = await client.post(
                "/v1/webhooks", json={"url": url, "events": ["grading.completed"]}, headers=admin
            )
            assert response.status_code == 422, (url, response.text)
            [error] = response.json()["errors"]
            assert error["field"] == "url" and why in response.text, (url, response.text)
        assert (await client.get("/v1/webhooks", headers=admin)).json()["items"] == []


async def test_a_signed_delivery_carries_ids_and_verdicts_only(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as receiver:
        async with api_client(**FAST) as client:
            webhook_id = await _register(client, admin, receiver, description="ci")
            listed = (await client.get("/v1/webhooks", headers=admin)).json()["items"]
            assert [w["id"] for w in listed] == [webhook_id] and listed[0]["secret"] is None
            grading = await _grade(client, agent)
            await _until(lambda: receiver.delivered())
            [event] = receiver.delivered()
            assert event["type"] == "grading.completed"
            data = event["data"]
            assert data["grading_id"] == grading["id"] and data["passed"] is True
            assert data["submission_id"] == grading["submission_id"] and data["status"] == "graded"
            raw = str(event)
            assert DIAGNOSIS[:30] not in raw and "USER_PORT" not in raw  # neither text
            assert receiver.unverified == 0
            # the receiver may answer before the worker has recorded the delivery
            delivery = await _recorded_delivery(client, admin, webhook_id)
            assert delivery["state"] == "delivered" and len(delivery["attempts"]) == 1
            assert delivery["attempts"][0]["status"] == 200


async def test_an_event_of_this_process_is_sent_at_once_not_at_the_next_poll(
    api_client: Any, tokens: Any
) -> None:
    """The delivery worker hears of deliveries this process committed: with a poll every
    60 s, the grading's event still reaches the receiver within seconds."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as receiver:
        async with api_client(**{**FAST, "poll_seconds": 60}) as client:
            await _register(client, admin, receiver)
            await asyncio.sleep(0.2)  # the dispatcher's first look has found nothing
            grading = await _grade(client, agent)
            [event] = await asyncio.to_thread(receiver.wait_for, 1, 10)
            assert event["data"]["grading_id"] == grading["id"]


async def test_a_receiver_down_for_a_while_gets_every_event_in_order(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as receiver:
        receiver.status = lambda n: 503 if n < 6 else 200  # down for its first six requests
        async with api_client(**FAST) as client:
            webhook_id = await _register(client, admin, receiver)
            gradings = [await _grade(client, agent, n) for n in range(3)]
            arrived = await asyncio.to_thread(receiver.wait_for, 3)
            assert [e["data"]["grading_id"] for e in arrived] == [g["id"] for g in gradings]
            items = (
                await client.get(f"/v1/webhooks/{webhook_id}/deliveries", headers=admin)
            ).json()
            first = items["items"][-1]  # newest first
            assert first["state"] == "delivered"
            assert [a["status"] for a in first["attempts"]][:2] == [503, 503]


async def test_a_delivery_failing_too_long_is_dead_lettered_then_redelivered(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as receiver:
        receiver.status = lambda n: 500
        async with api_client(**FAST, webhook_give_up_seconds=0.3) as client:
            webhook_id = await _register(client, admin, receiver)
            await _grade(client, agent)
            url = f"/v1/webhooks/{webhook_id}/deliveries"

            async def dead() -> list[Any]:
                return list((await client.get(f"{url}?state=dead", headers=admin)).json()["items"])

            for _ in range(200):
                if await dead():
                    break
                await asyncio.sleep(0.05)
            [delivery] = await dead()
            assert delivery["attempts"] and delivery["next_attempt_at"] is None
            receiver.status = lambda n: 200
            again = await client.post(f"{url}/{delivery['id']}/redeliver", headers=admin)
            assert again.status_code == 202
            await asyncio.to_thread(receiver.wait_for, 1)


async def test_an_event_of_a_rolled_back_change_is_never_sent_nor_announced(
    engine: Any,
) -> None:
    """Nothing of a rolled-back change is sent, and the delivery worker is not told of
    it; a committed one is told, and a listener that fails never fails the commit."""
    store = Store(engine, key=session_key())
    subscribe_outbox(store.db)  # as the app wiring does
    webhooks = WebhookQueries(store.db)
    await webhooks.create_endpoint(
        url="http://127.0.0.1:9/hook", events=["regrade.finished"], description="", actor="t"
    )
    told: list[str] = []

    def closed_loop() -> None:
        raise RuntimeError("Event loop is closed")

    stop_failing = on_committed(engine, closed_loop)
    stop_telling = on_committed(engine, lambda: told.append("told"))

    async def failing_change() -> None:
        with store.db.sessions()() as session, session.begin():
            store.db.audit(
                session, "regrade_job.done", entity_type="regrade_job", entity_id="j1",
                actor="t", payload={"state": "done", "counts": {}},
            )  # fmt: skip
            raise RuntimeError("the change fails after its event was written")

    with pytest.raises(RuntimeError):
        await failing_change()
    assert told == []
    with store.db.sessions()() as session, session.begin():
        store.db.audit(
            session, "regrade_job.done", entity_type="regrade_job", entity_id="j2",
            actor="t", payload={"state": "done", "counts": {"done": 1}},
        )  # fmt: skip
    assert told == ["told"]
    stop_failing()
    stop_telling()
    [claimed] = await webhooks.claim_due(lease_seconds=60)
    assert claimed.payload["data"]["regrade_job_id"] == "j2"
    assert await webhooks.claim_due(lease_seconds=60) == []  # leased, and the only one


async def test_a_public_target_is_registered_and_its_secret_shown_once(
    api_client: Any, tokens: Any
) -> None:
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:  # no worker: nothing is sent
        created = await client.post(
            "/v1/webhooks",
            json={"url": "https://93.184.215.14/hook", "events": ["regrade.finished"]},
            headers=admin,
        )
        assert created.status_code == 201, created.text
        assert created.json()["secret"].startswith("whsec_")
        listed = (await client.get("/v1/webhooks", headers=admin)).json()["items"]
        assert listed[0]["secret"] is None and listed[0]["events"] == ["regrade.finished"]


async def _attempts(client: Any, headers: Any, webhook_id: str) -> list[Any]:
    answer = await client.get(f"/v1/webhooks/{webhook_id}/deliveries", headers=headers)
    return [a for d in answer.json()["items"] for a in d["attempts"]]


async def test_a_name_that_rebinds_to_loopback_never_gets_a_request(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TTL-0 name answering a public address and loopback in turn: each send resolves
    it once and goes to the address it checked, so the loopback receiver hears nothing."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    network = hook_network(monkeypatch)
    public = "93.184.215.14"
    network.answers["rebind.test"] = lambda n: public if n % 2 == 0 else "127.0.0.1"
    with receiving() as receiver:
        port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
        async with api_client(**{**FAST, "webhook_retry_seconds": 0.02}) as client:
            created = await client.post(
                "/v1/webhooks",
                json={"url": f"http://rebind.test:{port}/hook", "events": ["grading.completed"]},
                headers=admin,
            )
            assert created.status_code == 201, created.text  # its lookup answered public
            webhook_id = created.json()["id"]
            await _grade(client, agent)
            for _ in range(400):
                if len(await _attempts(client, admin, webhook_id)) >= 6:
                    break
                await asyncio.sleep(0.05)
            attempts = await _attempts(client, admin, webhook_id)
        assert receiver.requests == 0
        assert len(attempts) >= 6
        errors = [a["error"] for a in attempts]
        assert any("127.0.0.1 (loopback)" in e for e in errors)  # refused at its check
        assert (public, port) in network.refused  # the others went to the public address
        assert {host for host, _ in network.refused} == {public}
        sends = network.lookups["rebind.test"] - 1  # the registration's lookup aside
        assert len(attempts) <= sends <= len(attempts) + 1  # one lookup a send


async def test_a_slow_receiver_does_not_delay_another_endpoint(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as slow, receiving() as fast:
        slow.delay = lambda n: 2.5
        async with api_client(**FAST) as client:
            await _register(client, admin, slow)
            await _register(client, admin, fast)
            delays = []
            for n in range(4):
                await _grade(client, agent, n)
                graded = time.monotonic()
                await _until(lambda n=n: len(fast.delivered()) > n, seconds=10)
                delays.append(time.monotonic() - graded)
            # one lane per endpoint: each fast delivery within a few polls (0.05 s), not
            # after the slow receiver's 2.5 s (half of it leaves room for a loaded machine)
            assert max(delays) < 1.25, delays
            assert slow.requests <= 2  # the slow one is still on its first events


async def test_a_receiver_answering_with_an_endless_body_is_recorded_delivered(
    api_client: Any, tokens: Any
) -> None:
    """A delivery is decided by the receiver's status line: the sender never reads the
    answer's body, so a receiver that streams one without end is recorded as delivered
    at once (not held for the whole timeout, its body gathered in the service's memory)."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as endless:
        endless.endless_body = True
        async with api_client(**{**FAST, "webhook_timeout_seconds": 30}) as client:
            webhook_id = await _register(client, admin, endless)
            started = time.monotonic()
            await _grade(client, agent)
            delivery = await _recorded_delivery(client, admin, webhook_id)
            elapsed = time.monotonic() - started
    assert delivery["state"] == "delivered", delivery
    assert elapsed < 15, elapsed
    assert endless.body_bytes_taken < 64 * 2**20


async def test_a_url_that_cannot_be_sent_to_is_refused_at_registration(
    api_client: Any, tokens: Any
) -> None:
    """A URL the sender would refuse on every send (a control character in its path)
    is refused when it is registered, naming ``url``."""
    admin = await tokens("admin")
    async with api_client(start_workers=False, webhook_allow_hosts="127.0.0.1") as client:
        response = await client.post(
            "/v1/webhooks",
            json={"url": "http://127.0.0.1:9/ho\x7fok", "events": ["regrade.finished"]},
            headers=admin,
        )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "url"


async def test_a_cancelled_regrade_job_sends_regrade_finished(api_client: Any, tokens: Any) -> None:
    """Cancelling ends a job (finished_at, final counts, "To give up on a job, cancel
    it"): a subscriber of ``regrade.finished`` must hear of it, with state cancelled."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    async with api_client() as client:  # one graded submission for the job to cover
        submitted = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": "the disk filled up on node-3", "ground_truth": "disk full"},
            headers=agent,
        )
        assert submitted.status_code == 201, submitted.text
    async with api_client(start_workers=False) as client:  # the job waits: cancel it
        created = await client.post(
            "/v1/webhooks",
            json={"url": "https://93.184.215.14/hook", "events": ["regrade.finished"]},
            headers=admin,
        )
        assert created.status_code == 201, created.text
        webhook_id = created.json()["id"]
        job = await client.post("/v1/regrade-jobs", json={"judge": "scripted:fail"}, headers=admin)
        assert job.status_code in (201, 202), job.text
        job_id = job.json()["id"]
        assert job.json()["state"] == "queued", job.json()
        cancelled = await client.post(f"/v1/regrade-jobs/{job_id}/cancel", headers=admin)
        assert cancelled.json()["state"] == "cancelled", cancelled.text
        items = (await client.get(f"/v1/webhooks/{webhook_id}/deliveries", headers=admin)).json()[
            "items"
        ]
    finished = [d["payload"]["data"] for d in items if d["event"] == "regrade.finished"]
    assert [(f["regrade_job_id"], f["state"]) for f in finished] == [(job_id, "cancelled")], items


def _seed_deliveries(engine: Engine, count: int) -> tuple[str, list[str]]:
    """An endpoint with ``count`` deliveries (every fifth dead, the others delivered),
    written in one INSERT; its id and the deliveries' ids, newest first."""
    now = utcnow()
    endpoint = WebhookEndpointRecord(
        url="https://hooks.example.com/x", events=["grading.completed"], secret="whsec_x",
        created_by="admin",
    )  # fmt: skip
    rows = []
    for n in range(count):
        delivery = WebhookDeliveryRecord(
            endpoint_id=endpoint.id, event="grading.completed", payload={"n": n},
            state="dead" if n % 5 == 0 else "delivered", attempts=1, created_at=now,
        )  # fmt: skip
        rows.append({k: v for k, v in row_values(delivery).items() if k != "seq"})
    deliveries = WebhookDeliveryRecord.__table__  # type: ignore[attr-defined]
    with engine.begin() as connection:
        connection.execute(insert(WebhookEndpointRecord.__table__), [row_values(endpoint)])  # type: ignore[attr-defined]
        connection.execute(insert(deliveries), rows)
        newest_first = (
            select(deliveries.c.id)
            .where(deliveries.c.endpoint_id == endpoint.id)
            .order_by(deliveries.c.seq.desc())
        )
        ids = list(connection.execute(newest_first).scalars())
    return endpoint.id, ids


async def _pages(
    client: Any, headers: dict[str, str], webhook_id: str, **params: Any
) -> list[list[str]]:
    """The ids of every page of an endpoint's deliveries, following ``next_cursor``."""
    pages: list[list[str]] = []
    cursor = None
    while not pages or cursor:
        answer = await client.get(
            f"/v1/webhooks/{webhook_id}/deliveries",
            params={**params, **({"cursor": cursor} if cursor else {})},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append([d["id"] for d in body["items"]])
        cursor = body["next_cursor"]
    return pages


async def test_every_delivery_of_an_endpoint_is_listed_page_by_page(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """An endpoint's deliveries, newest first, ``limit`` a page: ``next_cursor`` leads to
    the next page (null on the last), and the pages hold every delivery once, with or
    without the ``state`` filter; a delivery written while paging is not listed among
    the older ones."""
    webhook_id, newest_first = _seed_deliveries(engine, 23)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        pages = await _pages(client, admin, webhook_id, limit=10)
        dead = await _pages(client, admin, webhook_id, limit=2, state="dead")
        url = f"/v1/webhooks/{webhook_id}/deliveries"
        first = (await client.get(url, params={"limit": 10}, headers=admin)).json()
        newer = WebhookDeliveryRecord(
            endpoint_id=webhook_id, event="grading.completed", payload={}, state="pending"
        )
        with engine.begin() as connection:
            values = {k: v for k, v in row_values(newer).items() if k != "seq"}
            connection.execute(insert(WebhookDeliveryRecord.__table__), [values])  # type: ignore[attr-defined]
        second = await client.get(
            url, params={"limit": 10, "cursor": first["next_cursor"]}, headers=admin
        )
    assert [len(p) for p in pages] == [10, 10, 3]
    assert [i for p in pages for i in p] == newest_first
    assert [i for p in dead for i in p] == newest_first[
        2::5
    ]  # every fifth, counted from the oldest
    assert [d["id"] for d in second.json()["items"]] == newest_first[10:20]


async def test_a_forged_or_foreign_delivery_cursor_is_a_400_naming_cursor(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A cursor edited, signed with another key, of another endpoint or of another list
    is refused before any delivery is read."""
    webhook_id, _ = _seed_deliveries(engine, 3)
    other_id, _ = _seed_deliveries(engine, 3)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        url = f"/v1/webhooks/{webhook_id}/deliveries"
        cursor = (await client.get(url, params={"limit": 1}, headers=admin)).json()["next_cursor"]
        payload, tag = cursor.split(".")
        position = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        refused = [
            payload[:-1] + ("A" if payload[-1] != "A" else "B") + f".{tag}",
            CursorCodec(ServiceKey(b"o" * 40), "webhook-deliveries").encode(position),
            CursorCodec(session_key(), "gradings").encode(position),
            "not-a-cursor",
        ]
        answers = [await client.get(url, params={"cursor": c}, headers=admin) for c in refused] + [
            await client.get(
                f"/v1/webhooks/{other_id}/deliveries", params={"cursor": cursor}, headers=admin
            )
        ]
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert [e["field"] for e in answer.json()["errors"]] == ["cursor"]


async def test_credentials_in_a_receivers_url_are_sent_but_never_shown_or_logged(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A receiver's URL may carry a password or a token in its query: deliveries use it,
    the answer that registered it gives it back whole, but the endpoint list masks it and
    the audit log (kept for ever) never holds it."""
    admin, agent = await tokens("admin"), await tokens("submitter")
    with receiving() as receiver:
        url = receiver.url.replace("http://", "http://hook:s3cret@") + "?token=t0ps3cret"
        async with api_client(**FAST) as client:
            made = await client.post(
                "/v1/webhooks", json={"url": url, "events": ["grading.completed"]}, headers=admin
            )
            assert made.status_code == 201, made.text
            assert made.json()["url"] == url
            receiver.secret = made.json()["secret"]
            listed = (await client.get("/v1/webhooks", headers=admin)).json()["items"]
            await _grade(client, agent)
            await asyncio.to_thread(receiver.wait_for, 1, 10)
    [shown] = [w["url"] for w in listed]
    assert "s3cret" not in shown and "t0ps3cret" not in shown and "hook:***@" in shown, shown
    with engine.connect() as connection:
        logged = connection.execute(
            select(AuditRecord.payload).where(AuditRecord.event == "webhook.created")  # type: ignore[arg-type]
        ).scalar_one()
    assert "s3cret" not in json.dumps(logged), logged


async def _shown_and_logged(
    api_client: Any, tokens: Any, engine: Engine, url: str
) -> tuple[str, str]:
    """Register a receiver at ``url``: the URL the endpoint list shows, and the audit
    log's ``webhook.created`` payload as JSON text."""
    admin = await tokens("admin")
    async with api_client(start_workers=False, webhook_allow_hosts="127.0.0.1") as client:
        made = await client.post(
            "/v1/webhooks", json={"url": url, "events": ["grading.completed"]}, headers=admin
        )
        assert made.status_code == 201, made.text
        listed = (await client.get("/v1/webhooks", headers=admin)).json()["items"]
    [shown] = [w["url"] for w in listed]
    with engine.connect() as connection:
        logged = connection.execute(
            select(col(AuditRecord.payload)).where(col(AuditRecord.event) == "webhook.created")
        ).scalar_one()
    return shown, json.dumps(logged)


@pytest.mark.parametrize(
    ("url", "secret_part"),
    [
        # urlsplit and httpx take the last '@' as the end of the userinfo: httpx sends
        # Basic hook:Zq9@kX7vW2
        ("http://hook:Zq9@kX7vW2@127.0.0.1:9/hook", "kX7vW2"),
        # a user alone is a credential too: httpx sends it as Basic credentials
        ("http://tkn_8f3a9c2e1b7d@127.0.0.1:9/hook", "tkn_8f3a9c2e1b7d"),
    ],
    ids=["at-sign-in-password", "token-as-user"],
)
async def test_every_credential_form_in_a_receivers_url_is_masked_in_the_list_and_the_log(
    api_client: Any, tokens: Any, engine: Engine, url: str, secret_part: str
) -> None:
    """Every credential a receiver's URL sends is masked in the endpoint list and kept
    out of the audit log: a password holding an ``@``, and a token given as the user."""
    shown, logged = await _shown_and_logged(api_client, tokens, engine, url)
    assert secret_part not in shown and shown.endswith("***@127.0.0.1:9/hook"), shown
    assert secret_part not in logged, logged


@pytest.mark.parametrize(
    "url",
    [
        "http://hook:s3cr 3tPw@127.0.0.1:9/hook",
        "http://tkn_8f3a 9c2e1b7d@127.0.0.1:9/hook",
        "http://127.0.0.1:9/hook?token=t0ps3cret V4lue",
        "http://127.0.0.1:9/hook?token=t0ps3cret\u00a0V4lue",
    ],
    ids=["blank-in-password", "blank-in-user-token", "blank-in-query-token", "no-break-space"],
)
async def test_a_url_holding_a_blank_is_refused_at_registration(
    api_client: Any, tokens: Any, url: str
) -> None:
    """A URL with a blank in it (the sender would percent-encode it and send the
    credential around it) is refused when it is registered, naming ``url``."""
    admin = await tokens("admin")
    async with api_client(start_workers=False, webhook_allow_hosts="127.0.0.1") as client:
        made = await client.post(
            "/v1/webhooks", json={"url": url, "events": ["grading.completed"]}, headers=admin
        )
        listed = (await client.get("/v1/webhooks", headers=admin)).json()["items"]
    assert made.status_code == 422, made.text
    assert [e["field"] for e in made.json()["errors"]] == ["url"]
    assert listed == []


async def test_a_credential_under_a_percent_encoded_query_name_is_masked(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A receiver reads ``%74oken`` as ``token``: its value is masked in the endpoint
    list and kept out of the audit log as that of ``token`` is."""
    url = "http://127.0.0.1:9/hook?team=ops&%74oken=t0ps3cretV4lue&v=2"
    shown, logged = await _shown_and_logged(api_client, tokens, engine, url)
    assert shown == "http://127.0.0.1:9/hook?team=ops&%74oken=***&v=2", shown
    assert "t0ps3cretV4lue" not in logged, logged


@pytest.mark.parametrize(
    "name",
    [
        "auth_token",
        "private_token",
        "client_secret",
        "apiToken",
        "access_key",
        "refresh_token",
        "jwt",
        "code",
        "X-Hmac",
        "sslPassword",
    ],
)
async def test_a_credential_under_any_common_query_name_is_masked_in_the_list_and_the_log(
    api_client: Any, tokens: Any, engine: Engine, name: str
) -> None:
    """A token, key, secret or signature in a receiver's query is masked in the endpoint
    list and kept out of the audit log whatever its parameter is called, in any case:
    each name that holds such a word (``private_token``, ``client_secret``, ``apiToken``)
    and OAuth's ``code``; the parameters around it stay readable."""
    url = f"http://127.0.0.1:9/hook?team=ops&{name}=t0ps3cretV4lue&v=2"
    shown, logged = await _shown_and_logged(api_client, tokens, engine, url)
    assert shown == f"http://127.0.0.1:9/hook?team=ops&{name}=***&v=2", shown
    assert "t0ps3cretV4lue" not in logged, logged


async def test_a_token_as_user_with_an_empty_password_is_masked_in_the_list_and_the_log(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A receiver URL's token given as its user with an empty password (``curl -u KEY:``)
    is masked as a user alone, in the endpoint list and in the audit log."""
    token = "sk_live_8f3a9c2e1b7d"
    url = f"http://{token}:@127.0.0.1:9/hook"
    shown, logged = await _shown_and_logged(api_client, tokens, engine, url)
    assert token not in shown, shown
    assert token not in logged, logged


async def test_a_carried_override_is_announced_with_the_ids_of_its_copies(
    store: Store, webhooks: WebhookQueries
) -> None:
    """A regrade that carries a human's verdict onto its new grading sends that grading's
    ``grading.overridden`` with ``override_ids`` naming the copies on the new grading,
    the overrides its ``GET`` lists, and ``carried_from`` naming the grading they came
    from."""
    endpoint = await webhooks.create_endpoint(
        url="http://127.0.0.1:9/hook", events=["grading.overridden"], description="", actor="t"
    )
    old = (await submit(store)).grading.id
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result(IDS))
    view = await store.gradings.get(old)
    assert view is not None
    original, _ = await override(
        store, old, rubric=sregym_rubric(), expected_revision=view.grading.revision,
        kind="verdict", reason="wrong fault", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    target = RegradeTarget(sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new",
                           "shadow")  # fmt: skip
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result(IDS))

    on_new = select(col(OverrideRecord.id)).where(col(OverrideRecord.grading_id) == item.grading_id)
    copies = await store.db.run_read(lambda s: list(s.execute(on_new).scalars()))
    assert len(copies) == 1 and copies[0] != original.id
    announced = [
        d.delivery.payload["data"]
        for d in await webhooks.deliveries(endpoint.id)
        if d.delivery.payload["data"]["grading_id"] == item.grading_id
    ]
    assert [(a["override_ids"], a["carried_from"]) for a in announced] == [(copies, old)], announced


_SHIPPED_Q1 = "name the component where the fault originates?"
_REWORDED_Q1 = "name the Kubernetes object the fault was injected into?"


def _reworded_rubric(folder: Path) -> Rubric:
    """The shipped rubric with D1-Q1 worded otherwise: another version of it."""
    shipped = (DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text()
    assert _SHIPPED_Q1 in shipped
    (folder / "sregym-rca.yaml").write_text(
        shipped.replace("label: v1", "label: v2").replace(_SHIPPED_Q1, _REWORDED_Q1)
    )
    rubric = load_rubric_dir(folder)["sregym-rca"]
    assert rubric.version != sregym_rubric().version
    return rubric


@pytest.mark.parametrize("together", [1, 2], ids=["alone", "in-a-batch"])
@pytest.mark.parametrize("mode", ["shadow", "promote"])
async def test_a_regrade_grading_whose_override_could_not_be_carried_is_announced_needing_review(
    store: Store, webhooks: WebhookQueries, tmp_path: Path, mode: str, together: int
) -> None:
    """A regrade whose rubric words an overridden question otherwise cannot carry the
    human's answer: its new grading is announced with ``needs_review`` true, as it is
    committed (``override_outdated``), whether its verdict is stored alone or in a batch
    with others."""
    reworded = _reworded_rubric(tmp_path)
    endpoint = await webhooks.create_endpoint(
        url="http://127.0.0.1:9/hook",
        events=["grading.completed", "grading.overridden"],
        description="",
        actor="t",
    )
    for run in range(together):
        old = (await submit(store, new_submission(run_id=f"run-{run}"))).grading.id
        [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
        assert await store.queue.complete(claim.grading_id, "seed", graded_result(IDS))
        view = await store.gradings.get(old)
        assert view is not None
        await override(
            store, old, rubric=sregym_rubric(), expected_revision=view.grading.revision,
            kind="answer", question_id="D1-Q1", answer=False, reason="the service is not named",
            author_id="h1", author_name="Hana",
        )  # fmt: skip
    target = RegradeTarget(reworded, "openai:new@http://127.0.0.1:9/v1", "openai", "new", mode)
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    items = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert len(items) == together
    result = graded_result(IDS).model_copy(update={"rubric_version": reworded.version})
    finished = [FinishedGrading(item.grading_id, "w", result) for item in items]
    assert await store.queue.complete_many(finished) == [True] * together

    deliveries = list(reversed(await webhooks.deliveries(endpoint.id)))  # oldest first
    for item in items:
        stored = await store.gradings.get(item.grading_id)
        assert stored is not None
        assert stored.grading.needs_review is True
        assert "override_outdated" in stored.grading.review_reasons
        heard = [
            (d.delivery.payload["type"], d.delivery.payload["data"]["needs_review"])
            for d in deliveries
            if d.delivery.payload["data"]["grading_id"] == item.grading_id
        ]
        assert heard == [("grading.completed", True)], heard
