"""``--server URL``: report, export and regrade against a real ``sre-judge serve`` process.

The same database is read locally and through the server: the answers must match
(``test_server_mode_parity`` covers every option of import and export).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import respx

from tests.support.in_process_cli import cli_in_process
from tests.support.service_process import serving


def _seed(env: dict[str, str], tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    lines = [
        {"diagnosis": f"pod {i} OOMKilled", "ground_truth": "g", "agent": f"a{i % 2}"}
        for i in range(4)
    ]
    history.write_text("".join(json.dumps(line) + "\n" for line in lines))
    imported = cli_in_process("import", "jsonl", str(history), env=env)
    assert imported.returncode == 0, imported.stderr


#: the imported history carries inline ground truths: reports mix them in
MIXED = ("--inline", "include")


def _graded(env: dict[str, str], n: int) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = cli_in_process(
            "report", "pass-rates", *MIXED, "--group-by", "agent", "--format", "json", env=env
        )
        report = json.loads(done.stdout)
        if report["overall"]["n"] == n:
            return dict(report)
        time.sleep(0.5)
    raise AssertionError("the server's workers did not grade the import")


def _served_env(tmp_path: Path) -> tuple[dict[str, str], str]:
    """The environment of a migrated database for ``serve`` and an admin token of it."""
    env = {
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}",
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_POLL_SECONDS": "0.05",
        "SRE_JUDGE_PROVISIONAL_REVIEW_RATE": "0",
        # an uncalibrated scripted judge: its unflagged passes stand here
        "SRE_JUDGE_PASS_POLICY": "unflagged",
    }
    assert cli_in_process("migrate", env=env).returncode == 0
    token = cli_in_process(
        "tokens", "create", "--role", "admin", "--name", "ops", env=env
    ).stdout.strip()
    return env, token


@pytest.mark.slow
def test_report_export_and_regrade_through_a_server(tmp_path: Path) -> None:
    env, token = _served_env(tmp_path)
    _seed(env, tmp_path)
    with serving(env, tmp_path / "serve.log") as server:
        local = _graded(env, 4)
        remote = {**env, "SRE_JUDGE_TOKEN": token}
        via = ["--server", server.url]
        answered = cli_in_process(
            "report", "pass-rates", *MIXED, "--group-by", "agent", *via, env=remote
        )
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout) == local
        table = cli_in_process("report", "pass-rates", "--format", "table", *via, env=remote)
        assert "Pass rate" in table.stdout

        exported = cli_in_process(
            "export", "--format", "jsonl", "--agent", "a0", "-o", "-", *via, env=remote
        )
        mine = cli_in_process("export", "--format", "jsonl", "--agent", "a0", "-o", "-", env=env)
        assert exported.returncode == 0, exported.stderr
        assert exported.stdout == mine.stdout and len(mine.stdout.splitlines()) == 2
        assert "2 gradings exported" in exported.stderr

        start = ["regrade", "--judge", "scripted:fail", "--agent", "a1", *via]
        dry = cli_in_process(*start, "--dry-run", env=remote)
        assert dry.returncode == 0, dry.stderr
        assert (json.loads(dry.stdout)["total"], json.loads(dry.stdout)["dry_run"]) == (2, True)
        job = json.loads(cli_in_process(*start, "--wait", env=remote).stdout)
        assert (job["state"], job["done"], job["judge_calls"]) == ("done", 2, 2)
        status = cli_in_process(
            "regrade", "status", job["id"], "--format", "table", *via, env=remote
        )
        assert f"regrade job {job['id']}: done" in status.stdout
        flips = cli_in_process("regrade", "flips", job["id"], "--format", "csv", *via, env=remote)
        assert sum(",pass->fail," in row for row in flips.stdout.splitlines()) == 2

        missing = cli_in_process("regrade", "status", "nope", *via, env=remote)
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1
        assert "404" in missing.stderr
        refused = cli_in_process(
            "report", "tags", *via, env={**env, "SRE_JUDGE_TOKEN": "srej_wrong"}
        )
        assert refused.returncode == 2 and "401" in refused.stderr
        again = cli_in_process("import", "jsonl", str(tmp_path / "history.jsonl"), *via, env=remote)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["already_imported"] == 4
        assert ": done, 4/4 rows" in again.stderr


def test_a_password_in_the_server_url_is_not_printed() -> None:
    """The messages name the server: with its URL's password masked (CI logs)."""
    done = cli_in_process(
        "report", "pass-rates", "--server", "http://ops:hunter2@127.0.0.1:1",
        env={"SRE_JUDGE_TOKEN": "t", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2 and "cannot reach http://ops:***@127.0.0.1:1" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout


@pytest.mark.slow
def test_a_token_read_with_its_newline_is_used_and_never_printed(tmp_path: Path) -> None:
    """A token from a mounted secret or ``SRE_JUDGE_TOKEN=$(cat file)`` ends with a
    newline: ``--server`` takes it without surrounding whitespace, as the client package
    does, instead of failing with an error that quotes it into CI logs."""
    env, token = _served_env(tmp_path)
    with serving(env, tmp_path / "serve.log") as server:
        done = cli_in_process(
            "report", "pass-rates", "--server", server.url, "--format", "json",
            env={**env, "SRE_JUDGE_TOKEN": f" {token}\n", "NO_COLOR": "1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert token not in done.stderr + done.stdout


@pytest.mark.parametrize("token", ["srej_s3cr et", "srej_s3cr\u00e9t", "srej_s3cr\x01t"])
def test_a_token_no_header_can_carry_is_refused_without_quoting_it(token: str) -> None:
    done = cli_in_process(
        "report", "pass-rates", "--server", "http://127.0.0.1:1",
        env={"SRE_JUDGE_TOKEN": token, "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2 and "SRE_JUDGE_TOKEN" in done.stderr, done.stderr
    assert "s3cr" not in done.stderr + done.stdout


@respx.mock
def test_a_regrade_followed_through_a_server_that_goes_away_names_the_job() -> None:
    """``regrade --wait --server``: the server takes the job, then goes away while it is
    followed. The command ends in one line, exit 2, after naming the job on stderr, so
    ``regrade status JOB_ID --server`` finds the job again (it goes on on the server)."""
    url = "http://judge.test"
    job = {
        "id": "j1", "state": "queued", "dry_run": False, "mode": "shadow", "filter": {},
        "rubric": {"id": "sregym-rca", "version": "v1"}, "judge": "scripted:fail",
        "total": 3, "done": 0, "failed": 0, "cancelled": 0, "remaining": 3,
        "judge_calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0,
        "rate": None, "eta_seconds": None, "estimate": {}, "error": None,
        "created_by": "ops", "created_at": "2026-12-01T00:00:00Z", "started_at": None,
        "finished_at": None,
    }  # fmt: skip
    respx.post(f"{url}/v1/regrade-jobs").mock(return_value=httpx.Response(201, json=job))
    respx.get(f"{url}/v1/regrade-jobs/j1").mock(side_effect=httpx.ConnectError("refused"))
    done = cli_in_process(
        "regrade", "--judge", "scripted:fail", "--wait", "--server", url,
        env={"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    named, error = done.stderr.splitlines()
    assert named == "regrade job j1: queued, 0/3 submissions"
    assert error == f"error: cannot reach {url}: ConnectError: refused"


@respx.mock
def test_a_redirect_names_its_target_with_credentials_masked() -> None:
    """A redirect is not followed, and the line naming its target masks what a presigned
    URL carries (signature, credential), as every URL the command line shows."""
    url = "http://judge.test"
    location = (
        "https://bucket.s3.example/export.jsonl?X-Amz-Credential=AKIAEXAMPLE"
        "&X-Amz-Signature=deadbeefcafe0123&X-Amz-Expires=300"
    )
    respx.get(f"{url}/v1/exports/gradings").mock(
        return_value=httpx.Response(302, headers={"Location": location})
    )
    done = cli_in_process(
        "export", "--format", "jsonl", "-o", "-", "--server", url,
        env={"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2 and "302" in done.stderr, done.stderr
    assert "a redirect to <https://bucket.s3.example/export.jsonl?" in done.stderr
    assert "deadbeefcafe0123" not in done.stderr and "AKIAEXAMPLE" not in done.stderr


@respx.mock
@pytest.mark.parametrize(("status", "code"), [(409, 1), (412, 1), (422, 2), (404, 2)])
def test_a_refusal_exits_as_the_same_error_does_in_the_database_mode(
    status: int, code: int
) -> None:
    """A conflict or a failed precondition (409, 412) is work that failed: exit 1, as the
    database mode's; a refusal of the request itself stays bad usage, exit 2. Either is
    one line naming the status and the server's problem."""
    url = "http://judge.test"
    problem = {"title": "Conflict", "status": status,
               "detail": "the job is cancelled: resume it, then download its requests"}  # fmt: skip
    respx.get(f"{url}/v1/regrade-jobs/j1/batch-requests").mock(
        return_value=httpx.Response(
            status, json=problem, headers={"Content-Type": "application/problem+json"}
        )
    )
    done = cli_in_process(
        "regrade", "requests", "j1", "-o", "-", "--server", url,
        env={"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stderr.count("\n") == 1 and f"answered {status}" in done.stderr
    assert "resume it, then download its requests" in done.stderr


def _migrated(folder: Path) -> dict[str, str]:
    """The environment of a migrated SQLite database in ``folder``."""
    env = {"SRE_JUDGE_DATABASE_URL": f"sqlite:///{folder / 'local.db'}", "NO_COLOR": "1"}
    assert cli_in_process("migrate", env=env).returncode == 0
    return env


@pytest.mark.parametrize(
    "args",
    [
        ("regrade", "--judge", "scripted:fail", "--dry-run", "--format", "json"),
        ("gradings", "move-judge", "--from", "ollama:x", "--format", "json"),
    ],
    ids=["regrade", "move-judge"],
)
def test_an_empty_server_is_refused_not_read_as_the_database_mode(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """``--server ""`` (a script's ``--server "$SERVER"`` with ``SERVER`` unset) names
    nothing and is refused naming the option (exit 2), by the commands that start a
    regrade or move gradings too: never run against the local database instead."""
    env = {**_migrated(tmp_path), "SRE_JUDGE_TOKEN": "t0ken"}
    done = cli_in_process(*args, "--server", "", env=env)
    assert done.returncode == 2, (done.returncode, done.stdout)
    assert "--server" in done.stderr and done.stdout == ""


_JOB = {
    "id": "j1", "state": "done", "dry_run": False, "mode": "shadow", "filter": {},
    "rubric": {"id": "sregym-rca", "version": "v1"}, "judge": "scripted:fail",
    "total": 0, "done": 0, "failed": 0, "cancelled": 0, "remaining": 0,
    "judge_calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0,
    "rate": None, "eta_seconds": None, "estimate": {}, "error": None,
    "created_by": "ops", "created_at": "2026-12-01T00:00:00Z", "started_at": None,
    "finished_at": None,
}  # fmt: skip


@respx.mock
def test_a_server_url_with_an_upper_case_scheme_is_taken_as_the_client_takes_it() -> None:
    """``--server`` takes a URL as the client package takes it: a scheme has no case
    (RFC 3986), so ``--server "$SRE_JUDGE_URL"`` works wherever ``SRE_JUDGE_URL`` does."""
    respx.get("http://judge.test/v1/regrade-jobs/j1").mock(
        return_value=httpx.Response(200, json=_JOB)
    )
    env = {"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1"}
    done = cli_in_process(
        "regrade", "status", "j1", "--format", "json", "--server", "HTTP://judge.test", env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == "j1"


@pytest.mark.parametrize("source", ["file", "stdin", "sregym"])
def test_importing_nothing_through_a_server_is_the_database_modes_empty_report(
    tmp_path: Path, source: str
) -> None:
    """An empty JSON lines file or stdin (a filter that matched no run today), or a
    results folder holding no CSV file yet, is an empty report with exit 0 through a
    server as in the database mode: there is nothing to upload, so the server is not
    even asked."""
    empty = tmp_path / "none.jsonl"
    empty.write_bytes(b"")
    results, problems = tmp_path / "results", tmp_path / "problems.jsonl"
    results.mkdir()
    problems.write_text(json.dumps({"problem_id": "p1", "root_cause": "port 9999"}) + "\n")
    args = {
        "file": ["import", "jsonl", str(empty)],
        "stdin": ["import", "jsonl", "-"],
        "sregym": ["import", "sregym", str(results), "--problems", str(problems)],
    }[source]
    args += ["--format", "json"]
    mine = cli_in_process(*args, env=_migrated(tmp_path), input=b"")
    assert mine.returncode == 0, mine.stderr
    away = {"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1"}
    theirs = cli_in_process(*args, "--server", "http://127.0.0.1:9", env=away, input=b"")
    assert (theirs.returncode, theirs.stdout) == (0, mine.stdout), theirs.stderr


@pytest.mark.parametrize(
    ("server", "token", "named"),
    [("", "t0ken", "--server"), ("ftp://judge.test", "t0ken", "--server"),
     ("http://127.0.0.1:80OO", "t0ken", "--server"), ("http://:8000", "t0ken", "--server"),
     ("http://127.0.0.1:9", "", "SRE_JUDGE_TOKEN")],
    ids=["empty", "ftp", "bad-port", "no-host", "no-token"],
)  # fmt: skip
@pytest.mark.parametrize("source", ["jsonl", "sregym"])
def test_importing_nothing_through_a_server_still_refuses_a_bad_server_option(
    tmp_path: Path, source: str, server: str, token: str, named: str
) -> None:
    """With nothing to upload, an import through a server still refuses a ``--server``
    that is no http(s) URL (a script's ``--server "$SERVER"`` with ``SERVER`` unset), one
    that does not parse or names no host (``http://$HOST:8000``, ``HOST`` unset), or a
    missing token, naming it (exit 2), as it does when there is something to upload:
    a script's bad option fails on the first day, whatever that day's input is."""
    empty = tmp_path / "none.jsonl"
    empty.write_bytes(b"")
    results, problems = tmp_path / "results", tmp_path / "problems.jsonl"
    results.mkdir()
    problems.write_text(json.dumps({"problem_id": "p1", "root_cause": "port 9999"}) + "\n")
    args = {
        "jsonl": ["import", "jsonl", str(empty)],
        "sregym": ["import", "sregym", str(results), "--problems", str(problems)],
    }[source]
    env = {"SRE_JUDGE_TOKEN": token, "NO_COLOR": "1"}
    done = cli_in_process(*args, "--format", "json", "--server", server, env=env)
    assert (done.returncode, done.stdout) == (2, ""), (done.returncode, done.stderr)
    assert named in done.stderr
    if named == "--server":
        assert "SRE_JUDGE_TOKEN" not in done.stderr  # the option's fault, not the token's


@pytest.mark.parametrize(
    "server",
    ["http://ci:hunter2-s3cret@:8000", "http://ci:hunter2-s3cret@reports.example:80OO",
     "ftp://ci:hunter2-s3cret@reports.example", "http://ci:hunter2 s3cret@:8000",
     "http://ci:hunter2\ts3cret@reports.example", "http://ci:hunter2/s3cret@reports.example",
     "http://ci:hunter2#s3cret@reports.example", "http://ci:hunter2?s3cret@reports.example"],
    ids=["no-host", "bad-port", "ftp", "blank-no-host", "tab-does-not-parse", "slash",
         "hash", "question-mark"],
)  # fmt: skip
def test_a_refused_server_url_is_named_with_its_password_masked(server: str) -> None:
    """A ``--server`` refused (no host, a mistyped port, not http) is named in the error
    with the password of its userinfo masked, as every URL the command line shows."""
    done = cli_in_process(
        "report", "pass-rates", "--server", server,
        env={"SRE_JUDGE_TOKEN": "tok-abc", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--server" in done.stderr and "ci:***@" in done.stderr, done.stderr
    assert "s3cret" not in done.stderr and "hunter2" not in done.stderr, done.stderr


def test_an_unreachable_server_is_named_with_its_whole_userinfo_masked() -> None:
    """A server the command cannot reach is named with its URL's userinfo masked, a
    password holding a blank too."""
    done = cli_in_process(
        "report", "pass-rates", "--server", "http://ci:hunter2 s3cret@127.0.0.1:9",
        env={"SRE_JUDGE_TOKEN": "tok-abc", "NO_COLOR": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot reach http://ci:***@127.0.0.1:9" in done.stderr, done.stderr
    assert "s3cret" not in done.stderr, done.stderr
