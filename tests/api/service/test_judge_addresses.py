"""Where a judge runs (its base URL): reported as the endpoint really asked, to the
operator (``serve``'s start-up line) and admins (``/readyz``); for adjudicators and
admins in gradings, the credentials a base URL carries masked, while the grading object
a submitter reads names judges as ``backend:model`` and carries no URL in ``detail``."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.http.app import create_app
from api.http.server import announce_judge_on_start
from api.service.judge_status import judge_address
from api.service.presenters import result_public
from api.service.settings import Settings
from api.service.visibility import _without_addresses
from judge.backends.ollama import OllamaBackend
from judge.backends.scripted import ScriptedBackend
from judge.verdict import Answer, GradingResult, Vote
from storage import Store
from storage.keys import ServiceKey
from tests.storage.helpers import new_submission, submit, unscored_result
from tests.support.app_client import AppClient
from tests.support.keyed_judges import (
    CLOUD,
    CLOUD_SHOWN,
    KEYS,
    LOCAL,
    LOCAL_SHOWN,
    PANEL_MODEL_SHOWN,
    graded_by_keyed_panel,
    keyed_panel,
)


@pytest.mark.parametrize(
    ("detail", "shown"),
    [
        (
            "held pass not confirmed by openai:c@http://10.2.3.4:8080/v1: it failed it",
            "held pass not confirmed by openai:c: it failed it",
        ),
        (
            "judge request failed: ConnectError for url 'https://judge.internal/api/chat'",
            "judge request failed: ConnectError for url '<judge address>'",
        ),
        ("the judge's reply could not be parsed", "the judge's reply could not be parsed"),
        (None, None),
    ],
)
def test_a_detail_shown_to_a_submitter_names_no_address(detail: str | None, shown: str) -> None:
    assert _without_addresses(detail) == shown


async def test_an_admin_reads_the_address_of_a_judge_spec_written_with_a_trailing_blank(
    api_client: Any, tokens: Any
) -> None:
    """A trailing blank (an env file's, a compose value's) is no part of the judge spec:
    ``/readyz`` answers everyone, and an admin reads the address without it."""
    spec = "ollama:m@http://127.0.0.1:11434 "
    judge = {spec.strip(): ScriptedBackend.for_mode("pass")}
    async with api_client(judge=spec, backends=judge) as client:
        admin = await tokens("admin")
        anonymous = await client.get("/readyz")
        answer = await client.get("/readyz", headers=admin)
    assert anonymous.status_code == 200, anonymous.text
    assert answer.status_code == 200, answer.text
    assert answer.json()["judge"]["address"] == "http://127.0.0.1:11434"


async def test_serve_announces_a_judge_spec_written_with_a_trailing_blank(
    database_url: str, engine: Engine
) -> None:
    """``serve`` says on start where its judge is asked, whatever blanks surround the
    spec it was given: the announcement never stops the server from starting."""
    spec = "openai:m@http://127.0.0.1:8080 "
    settings = Settings(database_url=database_url, judge=spec)
    judge = {spec.strip(): ScriptedBackend.for_mode("pass")}
    app = create_app(settings, engine=engine, backends=judge, start_workers=False)
    announce_judge_on_start(app)
    async with AppClient(app, timeout=30) as client:
        assert (await client.get("/healthz")).status_code == 200


def test_the_ollama_address_is_the_endpoint_its_client_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The address of an Ollama judge without a base URL is where its client sends
    requests: ``OLLAMA_HOST=gpu-box`` is ``http://gpu-box:11434``, ``:11500`` is
    ``http://127.0.0.1:11500``; the backend is named in any case."""
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box")
    assert judge_address("ollama:m", OllamaBackend("m")) == "http://gpu-box:11434"
    assert judge_address("Ollama:m", OllamaBackend("m")) == "http://gpu-box:11434"
    monkeypatch.setenv("OLLAMA_HOST", ":11500")
    assert judge_address("ollama:m", OllamaBackend("m")) == "http://127.0.0.1:11500"


async def test_adjudicators_read_where_each_panel_member_runs_never_its_key(
    api_client: Any, tokens: Any
) -> None:
    """A panel whose members take their keys in their base URLs' queries: adjudicators
    and admins read each member's host, port and path in the judge's model and in every
    vote, the key masked, in one grading, the list and the review queue; a submitter
    reads the members by name."""
    agent, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    admin = await tokens("admin")
    async with api_client(**keyed_panel()) as client:
        grading_id = await graded_by_keyed_panel(client, agent)
        one = await client.get(f"/v1/gradings/{grading_id}", headers=adjudicator)
        listed = await client.get("/v1/gradings", headers=admin)
        queue = await client.get("/v1/review-queue", headers=admin)
        own = await client.get(f"/v1/gradings/{grading_id}", headers=agent)
    for answer in (one, listed, queue, own):
        assert answer.status_code == 200, answer.text
        assert not any(key in answer.text for key in KEYS), answer.text
    grading = one.json()
    assert grading["judge"] == {"backend": "panel", "model": PANEL_MODEL_SHOWN}
    assert {v["judge"] for a in grading["answers"] for v in a["votes"]} == {
        LOCAL_SHOWN,
        CLOUD_SHOWN,
    }
    [in_list] = [g for g in listed.json()["items"] if g["id"] == grading_id]
    assert in_list["judge"]["model"] == PANEL_MODEL_SHOWN
    [queued] = [i["grading"] for i in queue.json()["items"] if i["grading"]["id"] == grading_id]
    assert queued["judge"]["model"] == PANEL_MODEL_SHOWN
    assert own.json()["judge"]["model"] == "openai:local+openai:cloud"


async def test_a_judge_spec_quoted_in_a_gradings_detail_is_shown_with_its_key_masked(
    api_client: Any, tokens: Any, engine: Any, service_key: ServiceKey
) -> None:
    """A ``detail`` that quotes a judge spec (one refused when its grading was claimed)
    reads with the spec's address and its key masked."""
    store = Store(engine, key=service_key)
    grading_id = (await submit(store, new_submission())).grading.id
    assert await store.queue.claim_pending("tests", limit=1, lease_seconds=60)
    detail = f"judge spec {LOCAL!r} cannot be asked"
    result = unscored_result().model_copy(update={"detail": detail})
    assert await store.queue.complete(grading_id, "tests", result)
    adjudicator = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        shown = await client.get(f"/v1/gradings/{grading_id}", headers=adjudicator)
    assert shown.status_code == 200, shown.text
    assert shown.json()["detail"].startswith(f"judge spec '{LOCAL_SHOWN}")
    assert KEYS[0] not in shown.text


def test_a_grading_shown_before_it_is_stored_masks_the_keys_it_names() -> None:
    """The grading object of a grading made and shown at once (``sre-judge grade``)
    names the panel's members, their votes and its ``detail`` with the keys masked."""
    answer = Answer(question_id="D1-Q1", dimension_id="D1", answer=True, judge_answer=True)
    votes = tuple(Vote(judge_spec=s, question_id="D1-Q1", answer=True) for s in (LOCAL, CLOUD))
    result = GradingResult(
        status="graded",
        detail=f"{CLOUD} answered late",
        rubric_id="r",
        rubric_version="v",
        judge_backend="panel",
        judge_model=f"{LOCAL}+{CLOUD}",
        answers=(answer,),
        votes=votes,
    )
    shown = result_public(result)
    assert shown.judge == {"backend": "panel", "model": PANEL_MODEL_SHOWN}
    assert [v.judge for v in shown.answers[0].votes] == [LOCAL_SHOWN, CLOUD_SHOWN]
    assert shown.detail == f"{CLOUD_SHOWN} answered late"


async def test_a_submitter_and_an_adjudicator_reading_different_bodies_get_different_etags(
    api_client: Any, tokens: Any
) -> None:
    """A submitter reads the whole object of a grading against its own ground truth with
    the judges' addresses hidden, an adjudicator with them: two bodies, so two strong
    ETags (a digest of what the submitter reads), never one validator for both."""
    agent, adj = await tokens("submitter"), await tokens("adjudicator")
    async with api_client(**keyed_panel()) as client:
        grading_id = await graded_by_keyed_panel(client, agent)
        url = f"/v1/gradings/{grading_id}"
        mine = await client.get(url, headers=agent)
        theirs = await client.get(url, headers=adj)
        again = await client.get(url, headers=agent)
    assert mine.json()["view"] == theirs.json()["view"] == "full"
    assert mine.json()["judge"] != theirs.json()["judge"]  # the addresses hidden
    assert theirs.headers["etag"] == f'"{theirs.json()["revision"]}"'  # what If-Match names
    assert mine.headers["etag"] != theirs.headers["etag"]
    assert again.headers["etag"] == mine.headers["etag"]  # the same body, the same ETag
