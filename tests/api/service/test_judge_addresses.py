"""Where a judge runs (its base URL): reported as the endpoint really asked, to the
operator (``serve``'s start-up line) and admins (``/readyz``); for adjudicators and
admins in gradings, while the grading object a submitter reads names judges as
``backend:model`` and carries no URL in ``detail``."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.http.app import create_app
from api.http.server import announce_judge_on_start
from api.service.judge_status import judge_address
from api.service.settings import Settings
from api.service.visibility import _without_addresses
from judge.backends.ollama import OllamaBackend
from judge.backends.scripted import ScriptedBackend
from tests.support.app_client import AppClient


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
