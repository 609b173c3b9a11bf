"""Structured logs: JSON lines with request, grading and judge call ids, and no secrets.

The full run is a real ``sre-judge serve`` process at DEBUG level with an OpenAI-style
key in its environment, a bootstrap admin token file, and a submitter token; its log
must carry none of them, nor the diagnosis or the ground truth.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import secrets
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event
from sqlalchemy.engine import Engine

from api.service.observability import (
    REDACTED,
    bind_log_context,
    configure_logging,
    redact,
    register_secret,
)
from api.service.settings import Settings
from storage import Store
from tests.api.conftest import ClientFactory
from tests.support.judge_server import running_judge_server, sregym_reply
from tests.support.keys import session_key
from tests.support.service_process import serving
from tests.support.submissions import DIAGNOSIS, TRUTH

SEVEN = {"D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q3"}


def test_redaction_covers_tokens_keys_url_passwords_and_registered_values() -> None:
    register_secret("hunter2-registered-value")
    line = redact(
        "Authorization: Bearer abc.def srej_0123456789abcdef sk-live-0123456789 "
        "postgresql+psycopg://app:pa55word@db/x api_key=k-123456 "
        "hunter2-registered-value http://127.0.0.1:8080/v1"
    )
    for secret in ("abc.def", "srej_0123", "sk-live", "pa55word", "k-123456", "hunter2"):
        assert secret not in line
    assert line.count(REDACTED) == 5
    assert "postgresql+psycopg://app:***@db/x" in line  # masked as everywhere a URL is shown
    assert "http://127.0.0.1:8080/v1" in line  # a port is not a password


@pytest.mark.parametrize(
    ("spec", "secret"),
    [
        ("openai:gpt-4o@https://:Zk9-proxy-pass-31@gw.example/v1", "Zk9-proxy-pass-31"),
        ("openai:gpt-4o@https://judge:p@ss-Zk9-77@gw.example/v1", "ss-Zk9-77"),
        ("openai:gpt-4o@https://gw.example/v1?api-key=Zk9-query-key-5", "Zk9-query-key-5"),
    ],
    ids=["empty-user", "at-in-password", "in-query"],
)
def test_a_credential_in_a_logged_judge_url_is_scrubbed(spec: str, secret: str) -> None:
    """A judge spec is logged with its base URL ("checking the model digest of %s
    failed"): its password (with no user before it, or holding an ``@``) or a key in its
    query is masked in the line as everywhere a URL is shown."""
    line = redact(f"checking the model digest of {spec} failed")
    assert secret not in line and "***" in line, line
    assert "gw.example/v1" in line


def test_bound_context_reaches_records_and_is_unbound_after(caplog: Any) -> None:
    from api.service.observability import ContextFilter

    logger = logging.getLogger("sre_judge.test")
    caplog.handler.addFilter(ContextFilter())
    with caplog.at_level(logging.INFO, logger="sre_judge.test"):
        with bind_log_context(request_id="r-1", grading_id="g-1"):
            logger.info("inside")
        logger.info("outside")
    inside, outside = caplog.records
    assert (inside.request_id, inside.grading_id) == ("r-1", "g-1")
    assert not hasattr(outside, "request_id")


async def test_a_request_id_is_honoured_when_safe_and_made_otherwise(
    api_client: ClientFactory,
) -> None:
    async with api_client() as client:
        given = await client.get("/healthz", headers={"X-Request-ID": "run-17.attempt-2"})
        unsafe = await client.get("/healthz", headers={"X-Request-ID": "bad id\\n<script>"})
        none = await client.get("/healthz")
    assert given.headers["x-request-id"] == "run-17.attempt-2"
    assert unsafe.headers["x-request-id"] != "bad id\\n<script>"
    assert len(none.headers["x-request-id"]) == 32
    assert none.headers["x-request-id"] != unsafe.headers["x-request-id"]


def _lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(
        isinstance(r, dict) and {"level", "logger", "message", "time"} <= set(r) for r in records
    )
    return records


async def _one_session(
    client: httpx.AsyncClient, admin_token: str, submitter: str, truth: str, diagnosis: str
) -> Any:
    """A scenario, a graded submission, a refused token and a scrape; the grading id."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    agent = {"Authorization": f"Bearer {submitter}", "X-Request-ID": "req-full-run-1"}
    scenario = await client.post(
        "/v1/scenarios", json={"id": "geo", "ground_truth": truth}, headers=admin
    )
    assert scenario.status_code == 201, scenario.text
    graded = await client.post(
        "/v1/submissions?wait=20",
        json={"scenario_id": "geo", "diagnosis": diagnosis},
        headers=agent,
    )
    assert graded.status_code == 201, graded.text
    assert graded.headers["x-request-id"] == "req-full-run-1"
    wrong = await client.get("/v1/gradings", headers={"Authorization": f"Bearer {admin_token}x"})
    assert wrong.status_code == 401
    assert (await client.get("/metrics")).status_code == 200
    return graded.json()["id"]


def _assert_ids_in_records(records: list[dict[str, Any]], grading_id: str) -> None:
    """Access lines carry request ids, judge calls and completions carry the grading id."""
    access = [r for r in records if r["logger"] == "sre_judge.access"]
    assert {
        "route": "/v1/submissions",
        "status": 201,
        "request_id": "req-full-run-1",
    }.items() <= next(r for r in access if r.get("request_id") == "req-full-run-1").items()
    assert any(r["status"] == 401 and r.get("request_id") for r in access)
    calls = [r for r in records if r.get("judge_call")]
    assert calls and all(r["grading_id"] == grading_id for r in calls)
    assert calls[0]["judge_call"] == "grade-1" and calls[0]["attempts"] == 1
    assert any(
        r["message"] == "grading completed" and r.get("grading_id") == grading_id for r in records
    )
    assert any(r["message"] == "bootstrap admin token registered" for r in records)
    assert any(r["level"] == "DEBUG" for r in records)  # the strictest setting was really on
    # work in the background is not attributed to whatever request ran last
    assert not any("request_id" in r for r in records if r["logger"] == "sre_judge.workers")


@pytest.mark.slow
async def test_a_full_run_logs_json_with_ids_and_never_a_secret(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    api_key = f"sk-test-secret-{secrets.token_hex(12)}"
    admin_token = secrets.token_urlsafe(32)
    (tmp_path / "admin_token").write_text(admin_token + "\n")
    truth = f"[fault_spec] component=deployment/geo; namespace=hotel || GT-{secrets.token_hex(6)}"
    diagnosis = f"the geo deployment crashes with DIAG-{secrets.token_hex(6)}"
    submitter, _ = await Store(engine, key=session_key()).tokens.create(
        name="agent", role="submitter"
    )
    reply = sregym_reply(SEVEN, evidence="the geo deployment crashes")
    with running_judge_server(default=reply) as judge:
        env = {
            "SRE_JUDGE_DATABASE_URL": database_url,
            "SRE_JUDGE_JUDGE": f"openai:m@{judge.openai_url}",
            "SRE_JUDGE_BOOTSTRAP_ADMIN_TOKEN_FILE": str(tmp_path / "admin_token"),
            "SRE_JUDGE_LOG_LEVEL": "DEBUG",
            "OPENAI_API_KEY": api_key,
        }
        with serving(env, tmp_path / "serve.log") as service:
            async with httpx.AsyncClient(base_url=service.url, timeout=30) as client:
                grading_id = await _one_session(client, admin_token, submitter, truth, diagnosis)
        assert len(judge.requests) == 1
    raw = (tmp_path / "serve.log").read_text(encoding="utf-8")
    for secret in (api_key, admin_token, submitter, truth, diagnosis, truth[-15:], diagnosis[-15:]):
        assert secret not in raw
    records = _lines(tmp_path / "serve.log")
    _assert_ids_in_records(records, grading_id)


def _logged(log_format: str, said: str, *, with_traceback: bool = False, **settings: Any) -> str:
    """What the service's log configuration writes for a warning quoting ``said`` (and,
    ``with_traceback``, an error logged with its exception); logging restored after."""
    import io

    from api.service.observability import configure_logging
    from api.service.settings import Settings

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    log = logging.getLogger("sre_judge.test")
    try:
        configure_logging(Settings(log_format=log_format, **settings), stream=stream)
        log.warning("the judge said %s", said)
        if with_traceback:
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("grading failed")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    return stream.getvalue()


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_line_quoting_another_server_never_acts_on_a_terminal(log_format: str) -> None:
    """A judge's or a Batch API's error text may hold escape sequences (a title, a link,
    the clipboard), C1 controls or a bidirectional override: the log shows them inert,
    and a JSON line still parses to what was said."""
    said = "refused: \x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07 \x9b2J \u202etxt.exe"
    line = _logged(log_format, said)
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in line, (log_format, line)
    if log_format == "json":
        assert json.loads(line)["message"] == f"the judge said {said}"
    else:
        assert "\\x1b]0;pwned\\x07" in line and "\\u202etxt.exe" in line


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_newline_in_what_a_server_said_never_forges_a_log_line(log_format: str) -> None:
    """One record, one line, whatever its message holds; a traceback stays readable."""
    said = "refused\n2026-12-05 00:00:00,000 INFO sre_judge.auth: admin signed in\u2028again"
    first, *rest = _logged(log_format, said, with_traceback=True).splitlines()
    assert "admin signed in" in first and "\u2028" not in first
    assert not any("admin signed in" in line for line in rest)
    if log_format == "json":
        assert json.loads(first)["message"] == f"the judge said {said}"
        assert len(rest) == 1 and "ValueError: boom" in json.loads(rest[0])["exc_info"]
    else:
        assert "refused\\n2026-12-05" in first
        assert rest[0].endswith("grading failed") and rest[-1] == "ValueError: boom"


def test_the_database_password_is_scrubbed_from_every_line(tmp_path: Path) -> None:
    """Read from ``database_password_file`` (or given in the URL), it is a secret as the
    API keys are, wherever a line quotes it (a driver's error, say)."""
    (tmp_path / "pw").write_text("Zq8-db-Pass-77\n")
    line = _logged(
        "json",
        "credentials Zq8-db-Pass-77 rejected",
        database_url="postgresql+psycopg://judge@127.0.0.1:5432/judge",
        database_password_file=tmp_path / "pw",
    )
    assert "Zq8-db-Pass-77" not in line and REDACTED in line


#: requests routing refuses: no such path (404), no such method on a path (405), a
#: method made up (405, counted under ``other``: a client's text is never a label)
UNROUTED = [("GET", "/v1/no-such-route", "GET"), ("DELETE", "/healthz", "DELETE"),
            ("BREW", "/healthz", "other")]  # fmt: skip


async def test_a_request_no_route_takes_gets_an_id_a_line_and_a_count(
    api_client: ClientFactory, caplog: Any
) -> None:
    """Litestar runs the service's middleware only for routed requests: a 404 or 405 had
    no X-Request-ID, no access line and no count in the HTTP histogram."""
    async with api_client(start_workers=False) as client:
        for method, path, label in UNROUTED:
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="sre_judge.access"):
                sent = {"X-Request-ID": f"probe-{label}"}
                response = await client.request(method, path, headers=sent)
            assert response.status_code in (404, 405)
            assert response.headers.get("x-request-id") == f"probe-{label}"
            [line] = [r for r in caplog.records if r.name == "sre_judge.access"]
            assert (line.method, line.route, line.status) == (
                label,
                "unmatched",
                response.status_code,
            )
        metrics = (await client.get("/metrics")).text
    counted = {
        (s.labels["method"], s.labels["status"])
        for family in text_string_to_metric_families(metrics)
        if family.name == "sre_judge_http_request_duration_seconds"
        for s in family.samples
        if s.name.endswith("_count") and s.labels["route"] == "unmatched"
    }
    assert counted == {("GET", "404"), ("DELETE", "405"), ("other", "405")}


@pytest.mark.parametrize(
    ("method", "path", "sent"),
    [
        ("GET", "/v1/no-such-route", "probe-404"),
        ("DELETE", "/healthz", "probe-405"),
        ("GET", "/v1/no-such-route", None),
    ],
    ids=["404-client-id", "405-client-id", "404-made-id"],
)
async def test_the_access_line_of_a_request_no_route_takes_carries_its_request_id(
    api_client: ClientFactory, database_url: str, method: str, path: str, sent: str | None
) -> None:
    """The id a 404 or 405 returns in ``X-Request-ID`` (the client's, or one made) is the
    one its access line carries: the request can be found in the log by it."""
    headers = {"X-Request-ID": sent} if sent else {}
    async with api_client(start_workers=False) as client:
        with _service_log(database_url) as log:
            response = await client.request(method, path, headers=headers)
    assert response.status_code in (404, 405)
    returned = response.headers["x-request-id"]
    assert returned == sent if sent else returned
    records = [json.loads(line) for line in log.getvalue().splitlines() if line]
    [access] = [r for r in records if r["logger"] == "sre_judge.access"]
    assert access["route"] == "unmatched"
    assert access.get("request_id") == returned, access


async def test_a_request_cancelled_before_its_answer_is_logged_and_counted_as_499(
    api_client: ClientFactory, tokens: Any, caplog: Any
) -> None:
    """The server's graceful-shutdown timeout cancels the requests still open. Nothing
    answered such a request: its access line and its count say 499 (nginx's "client
    closed request"), never a 500 that would page whoever alerts on server errors."""
    headers = await tokens("submitter")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    caplog.set_level(logging.INFO, logger="sre_judge.access")
    async with api_client(start_workers=False) as client:  # nothing grades: the wait lasts
        request = asyncio.create_task(
            client.post("/v1/submissions?wait=30", json=body, headers=headers)
        )
        await asyncio.sleep(1.0)  # stored, waiting for its grading
        request.cancel()  # the graceful-shutdown timeout
        with pytest.raises(asyncio.CancelledError):
            await request
        metrics = (await client.get("/metrics")).text
    lines = [r for r in caplog.records if r.name == "sre_judge.access"]
    said = [(r.route, r.status) for r in lines if r.route == "/v1/submissions"]
    assert said == [("/v1/submissions", 499)]
    counted = {
        s.labels["status"]
        for family in text_string_to_metric_families(metrics)
        if family.name == "sre_judge_http_request_duration_seconds"
        for s in family.samples
        if s.name.endswith("_count") and s.labels["route"] == "/v1/submissions"
    }
    assert counted == {"499"}


@pytest.mark.parametrize(
    "message",
    [
        'judge answered 401: {"error": "invalid header Authorization: Bearer abcdef123456"}',
        'cannot connect: password="s3cr3t-pass" rejected for user judge',
        'batch server answered 400: {"error": "bad field", "token": "tok-0123456789"}',
    ],
    ids=["bearer", "password", "token-field"],
)
def test_a_quoted_secret_is_scrubbed_and_the_json_line_still_parses(message: str) -> None:
    """The patterns read plain text: run over the encoded line, a secret before a quote
    took JSON's escaping backslash (the line no longer parsed, the rest of a password
    stayed readable) and a ``"token": ...`` field was never matched at all."""
    line = _logged("json", message)
    record = json.loads(line)
    said = f"the judge said {message}"
    assert record["message"] == redact(said) and REDACTED in record["message"]
    for secret in ("abcdef123456", "s3cr3t-pass", "tok-0123456789"):
        assert secret not in line


@contextmanager
def _service_log(database_url: str) -> Iterator[io.StringIO]:
    """What the service's own log configuration writes (JSON lines), restored after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure_logging(Settings(database_url=database_url), stream=stream)
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


@contextmanager
def _submission_inserts_fail(engine: Engine) -> Iterator[None]:
    """The database fails the INSERT of a submission (an I/O error, a full disk, a
    dropped connection): what the DBAPI raises, wrapped by SQLAlchemy as usual."""

    def fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO SUBMISSION"):
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", fail)


async def test_a_database_fault_on_a_submission_never_logs_its_diagnosis_or_ground_truth(
    api_client: ClientFactory, tokens: Any, engine: Engine, database_url: str, db_backend: str
) -> None:
    """A database fault while a submission is stored is logged with its statement, never
    with the statement's values: the diagnosis and the hidden ground truth stay out of
    the log (the fault is raised as SQLite's driver raises it)."""
    if db_backend != "sqlite":
        pytest.skip("the fault is raised as SQLite's driver raises it")
    diagnosis = f"the geo deployment crashes with DIAG-{secrets.token_hex(6)}"
    truth = f"[fault_spec] component=deployment/geo; namespace=hotel || GT-{secrets.token_hex(6)}"
    headers = await tokens("submitter")
    async with api_client(start_workers=False) as client:
        with _service_log(database_url) as log, _submission_inserts_fail(engine):
            response = await client.post(
                "/v1/submissions",
                json={"diagnosis": diagnosis, "ground_truth": truth},
                headers=headers,
            )
    # the documented answer to a database that does not answer
    assert response.status_code == 503, response.text
    written = log.getvalue()
    assert "the database failed" in written  # the fault was logged, with its exception
    assert diagnosis not in written and diagnosis[-16:] not in written, written[:3000]
    assert truth not in written and truth[-15:] not in written, written[:3000]


#: what ``sre-judge regrade --wait`` does in its own process: the service's runtime, its
#: grading workers included, one of which warns quoting a judge's refusal
_COMMAND_RUNTIME = textwrap.dedent(
    """
    import asyncio, logging
    from api.cli.edge import service_runtime

    async def main():
        async with service_runtime(workers=True):
            logging.getLogger("sre_judge.workers").info("a routine line")
            logging.getLogger("sre_judge.workers").warning(
                "the judge said %s",
                "refused \\x1b]0;owned\\x07 Authorization: Bearer abcdef1234567890",
            )

    asyncio.run(main())
    """
)


def test_a_warning_inside_a_commands_runtime_is_scrubbed_and_inert(tmp_path: Path) -> None:
    """A command that runs the service's loops in its own process (``regrade --wait``,
    ``calibrate``, ``import``...) writes their warnings on stderr as the service does:
    scrubbed of secrets and inert for a terminal. The process itself is under test: its
    logging is what the command sets up; its routine INFO lines stay out of the way of
    what it prints."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SRE_JUDGE_")},
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}",
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "service.key"),
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "NO_COLOR": "1",
    }
    command = [sys.executable, "-c", _COMMAND_RUNTIME]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(x) for x in done.stderr.splitlines() if "the judge said" in x]
    assert line["level"] == "WARNING" and line["logger"] == "sre_judge.workers"
    assert "a routine line" not in done.stderr
    assert "abcdef1234567890" not in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr, repr(done.stderr)
