"""A diagnosis carrying a credential is stored and sent redacted, and goes to review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.grader import Grader
from judge.rubric import load_rubric_dir
from tests.support.judge_server import running_judge_server, sregym_reply

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
PASSWORD = "hunter2-Pa55word"
TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
    "The USER_PORT env var of user-service is set to 9999 while its Service targets 8086."
)
DIAGNOSIS = (
    "user-service in hotel-reservation listens on 9999 (USER_PORT) while its Service "
    f"targets 8086. Its env also shows AWS_ACCESS_KEY_ID={AWS_KEY} and "
    f"DB_PASSWORD: {PASSWORD}"
)


async def _every_row_as_text(engine: Engine) -> dict[str, str]:
    """Every table's rows, rendered as text, by table name."""
    dumped: dict[str, str] = {}
    with engine.connect() as connection:
        for name, table in SQLModel.metadata.tables.items():
            rows = (connection.execute(select(table))).mappings().all()
            dumped[name] = json.dumps([dict(r) for r in rows], default=str, ensure_ascii=False)
    return dumped


async def test_a_leaked_key_is_never_stored_nor_sent_in_clear(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    headers = await tokens("submitter")
    reply = sregym_reply(
        {f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)}, evidence="listens on 9999"
    )
    with running_judge_server(default=reply) as server:
        spec = f"openai:m@{server.openai_url}"
        async with api_client(judge=spec, backends={}) as client:
            response = await client.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "agent": "a1"},
                headers=headers,
            )
            assert response.status_code == 201, response.text
            grading = (await client.get(response.headers["location"], headers=headers)).json()
        sent = json.dumps(server.requests, ensure_ascii=False)

    assert grading["status"] == "graded" and grading["passed"] is True
    assert "credential_leaked" in grading["review_reasons"] and grading["needs_review"]
    assert "leaked-credential" in grading["detail"]
    stored = grading["submission"]["diagnosis"]
    assert "[REDACTED:aws-access-key]" in stored and "[REDACTED:secret-keyword]" in stored
    assert "user-service in hotel-reservation listens on 9999" in stored  # the rest is kept

    assert len(server.requests) == 1
    assert "[REDACTED:aws-access-key]" in sent
    tables = await _every_row_as_text(engine)
    assert {"submission", "judge_call", "audit_log", "answer", "grading"} <= set(tables)
    for secret in (AWS_KEY, PASSWORD):
        assert secret not in response.text and secret not in sent
        leaking = [name for name, text in tables.items() if secret in text]
        assert leaking == [], f"{secret} stored in clear in {leaking}"
    if database_url.startswith("sqlite"):
        path = Path(database_url.split("///", 1)[1])
        for file in (path, path.with_name(path.name + "-wal")):
            if file.exists():
                assert AWS_KEY.encode() not in file.read_bytes()

    submission = json.loads(tables["submission"])[0]
    redactions = submission["redactions"]
    redactions = json.loads(redactions) if isinstance(redactions, str) else redactions
    assert [r["kind"] for r in redactions] == ["aws-access-key", "secret-keyword"]
    assert DIAGNOSIS[redactions[0]["start"] : redactions[0]["end"]] == AWS_KEY
    assert all(set(r) == {"kind", "start", "end", "line"} for r in redactions)


async def test_a_password_with_a_disguised_letter_is_stored_and_shown_nowhere(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A password with a full-width letter is redacted, and the grading's ``detail``
    (what screening found) does not quote it either."""
    disguised = "\uff48unter22x"
    submitter = await tokens("submitter")
    admin = await tokens("admin", name="admin-1")
    diagnosis = (
        "user-service in hotel-reservation listens on 9999 (USER_PORT) while its Service "
        f"targets 8086. Its env also shows DB_PASSWORD: {disguised}"
    )
    async with api_client() as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": diagnosis, "ground_truth": TRUTH, "agent": "a1"},
            headers=submitter,
        )
        assert response.status_code == 201, response.text
        grading = await client.get(response.headers["location"], headers=admin)
    assert grading.status_code == 200
    body = grading.json()
    assert "[REDACTED:secret-keyword]" in body["submission"]["diagnosis"]
    assert "credential_leaked" in body["review_reasons"]
    assert disguised not in grading.text, body.get("detail")
    tables = await _every_row_as_text(engine)
    assert [name for name, text in tables.items() if disguised in text] == []


async def test_a_replayed_submission_with_a_key_is_the_same_submission(
    api_client: Any, tokens: Any
) -> None:
    headers = {**(await tokens("submitter")), "Idempotency-Key": "leaky-1"}
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client() as client:
        first = await client.post("/v1/submissions", json=body, headers=headers)
        second = await client.post("/v1/submissions", json=body, headers=headers)
    assert first.status_code == 202
    assert second.headers.get("idempotent-replayed") == "true"
    assert second.json()["id"] == first.json()["id"]


async def test_the_grader_redacts_text_that_bypassed_ingestion() -> None:
    backend = ScriptedBackend([scripted_reply])
    rubric = load_rubric_dir()["sregym-rca"]
    result = await Grader(backend).grade(rubric, TRUTH, DIAGNOSIS)
    prompt = json.dumps([m.content for m in backend.requests[0].messages])
    assert AWS_KEY not in prompt and PASSWORD not in prompt
    assert "credential_leaked" in result.review_reasons
