"""``sre-judge submit`` as a CI gate: the exit status is the verdict.

Why this module is long: every case is one promise of the gate (each outcome its status,
each line that cannot be read, sent or graded named and refused alone, never a crash
that reads as "fail"), and the cases share the canned gradings, files and servers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
import tenacity
from click.testing import CliRunner

from api.grading.submit_cli import EXIT_CODES, outcome, submit_command, worst
from tests.client.conftest import Served
from tests.support.in_process_cli import cli_in_process
from tests.support.service_process import cli

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."


#: a server that respx stands in for
URL = "http://judge.test"
MOCKED = {"SRE_JUDGE_URL": URL, "SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1"}


def _env(served: Served, token: str | None = None) -> dict[str, str]:
    return {"SRE_JUDGE_URL": served.url, "SRE_JUDGE_TOKEN": token or served.submitter}


def _files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "truth.txt").write_text(TRUTH)
    (tmp_path / "diagnosis.txt").write_text(DIAGNOSIS)
    return str(tmp_path / "truth.txt"), str(tmp_path / "diagnosis.txt")


def test_outcomes_map_to_exit_statuses_and_the_most_serious_wins() -> None:
    graded = {"status": "graded", "passed": True, "held": False}
    assert outcome(graded) == "pass"
    assert outcome({**graded, "passed": False}) == "fail"
    assert outcome({**graded, "passed": None, "held": True}) == "held"
    # graded without a verdict (as earlier imports stored some): no verdict, never a fail
    assert outcome({**graded, "passed": None}) == "unscored"
    assert outcome({"status": "unscored"}) == "unscored"
    assert outcome({"status": "pending"}) == "pending"
    assert [EXIT_CODES[n] for n in ("pass", "fail", "usage", "unscored", "held")] == [0, 1, 2, 3, 4]
    assert worst(["pass", "fail", "held"]) == 4 and worst(["fail", "unscored"]) == 3
    assert worst(["pass"]) == 0 and worst([]) == 2


def test_the_command_loads_neither_httpx_nor_the_server_stack() -> None:
    code = (
        "import sys, api.grading.submit_cli; "
        "print(sorted(m for m in ('httpx', 'sre_judge_client', 'litestar', 'sqlalchemy') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_pass_exits_0_and_prints_the_table(
    serve: Callable[[str], Served], tmp_path: Path
) -> None:
    served = serve("pass")
    truth, diagnosis = _files(tmp_path)
    done = cli("submit", "--ground-truth-file", truth, "--diagnosis-file", diagnosis,
               "--wait", "30", "--format", "table", env=_env(served))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "PASS" in done.stdout and "D1-Q1" in done.stdout


@pytest.mark.slow
def test_a_registered_scenario_from_stdin_as_json(
    serve: Callable[[str], Served], tmp_path: Path
) -> None:
    served = serve("fail")
    scenario = f"sc-{uuid.uuid4().hex[:6]}"
    registered = subprocess.run(
        [sys.executable, "-c",
         "import sys; from sre_judge_client import Client; "
         "Client().register_scenario(sys.argv[1], sys.argv[2])", scenario, TRUTH],
        env={**os.environ, **_env(served, served.admin)}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    done = subprocess.run(
        [sys.executable, "-m", "api", "submit", "--scenario", scenario, "--diagnosis-file", "-",
         "--json", "--run-id", "ci-1", "--attempt", "1"],
        input=DIAGNOSIS, env={**_env(served)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    grading = json.loads(done.stdout)
    assert grading["passed"] is False and grading["submission"]["run_id"] == "ci-1"
    # a submitter's view of a registered scenario's grading, printed as the server sent it
    assert grading["view"] == "verdict" and not {"answers", "judge_passed"} & set(grading)
    table = subprocess.run(
        [sys.executable, "-m", "api", "submit", "--scenario", scenario, "--diagnosis-file", "-",
         "--format", "table"],
        input=DIAGNOSIS, env={**_env(served)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert table.returncode == 1, table.stderr
    assert "FAIL" in table.stdout and "verdict only" in table.stdout
    assert "D1-Q1" not in table.stdout and "judge:" not in table.stdout


@pytest.mark.slow
def test_jsonl_of_many_and_usage_errors(serve: Callable[[str], Served], tmp_path: Path) -> None:
    served = serve("garbage")
    lines = tmp_path / "many.jsonl"
    lines.write_text(
        "\n".join(json.dumps({"diagnosis": f"{DIAGNOSIS} {n}", "ground_truth": TRUTH})
                  for n in range(2))
    )  # fmt: skip
    done = cli("submit", "--diagnosis-file", str(lines), "--json", "--wait", "30",
               env=_env(served))  # fmt: skip
    assert done.returncode == 3, done.stderr  # unscored
    assert [json.loads(x)["status"] for x in done.stdout.splitlines()] == ["unscored"] * 2
    _, diagnosis = _files(tmp_path)
    no_truth = cli("submit", "--diagnosis-file", diagnosis, env=_env(served))
    assert no_truth.returncode == 2 and "--scenario" in no_truth.stderr
    refused = cli("submit", "--scenario", "nope", "--diagnosis-file", diagnosis,
                  env=_env(served, "not-a-token"))  # fmt: skip
    assert refused.returncode == 2 and "401" in refused.stderr


def _refusing_server() -> respx.Route:
    """A server that refuses every submission with a 422 naming a field, as it answers
    a bad one: each line sent gets an answer of its own."""
    return respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(
            422,
            json={"title": "Invalid request", "status": 422, "detail": "bad field"},
            headers={"Content-Type": "application/problem+json"},
        )
    )


@pytest.mark.parametrize(
    ("content", "where", "sent"),
    [
        (b'{"diagnosis": "a", "ground_truth": "t"}\n\n{"diagnosis": "b",\n', "line 3: not JSON", 1),
        (b'{"diagnosis": "a", "ground_truth": "t"}\n{"diagnosis": "\xff"}\n', "line 2: not UTF-8",
         0),
        (b'{"diagnosis": "a"}\n["b"]\n', "line 2: an object with a 'diagnosis'", 1),
        (b'{"diagnosis": "a", "scenario": "s"}\n', "line 1: unknown field(s) ['scenario']", 0),
        (b"\n\n", "no submission", 0),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1: not JSON (nested too deeply)", 0),
        (b'{"diagnosis": "a", "scenario_id": "s", "run_id": 7}\n{"diagnosis": "b"}\n',
         "line 1: [run_id] a string or null expected", 1),
        (b'{"diagnosis": "a", "scenario_id": "s", "attempt": true}\n',
         "line 1: [attempt] an integer or null expected", 0),
    ],
    ids=["json", "utf-8", "shape", "field", "empty", "nested", "type", "attempt"],
)  # fmt: skip
@respx.mock
def test_a_jsonl_line_that_cannot_be_read_is_named(
    tmp_path: Path, content: bytes, where: str, sent: int
) -> None:
    """A line that is no submission is refused naming its line (2) and the other lines
    are still sent; a file that is not UTF-8, or holds no line, is refused whole."""
    route = _refusing_server()
    lines = tmp_path / "runs.jsonl"
    lines.write_bytes(content)
    done = CliRunner().invoke(
        submit_command, ["--diagnosis-file", str(lines), "--wait", "0"], env=MOCKED
    )
    assert done.exit_code == 2, done.output
    assert where in done.output
    assert route.call_count == sent


@respx.mock
def test_a_jsonl_line_with_a_nan_metric_is_refused_and_the_others_sent(tmp_path: Path) -> None:
    """Python's ``json.dumps`` writes a metric it has no number for as ``NaN``: JSON has
    no such value and no request can carry it, so its line is refused by number (2),
    never a crash that reads as the gate's "fail" (1), and the next line is still sent."""
    route = _refusing_server()
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "".join(json.dumps(item) + "\n" for item in [
            {"diagnosis": "a", "scenario_id": "s", "metadata": {"latency_s": float("nan")}},
            {"diagnosis": "b", "scenario_id": "s", "metadata": {"latency_s": float("inf")}},
            {"diagnosis": "c", "scenario_id": "s"},
        ])
    )  # fmt: skip
    done = CliRunner().invoke(submit_command, ["--diagnosis-file", str(runs), "--wait", "0"],
                              env=MOCKED)  # fmt: skip
    assert done.exit_code == 2, (done.exit_code, repr(done.exception))
    errors = done.output.splitlines()
    assert [e.split(":")[1].strip() for e in errors] == ["line 1", "line 2", "line 3"], errors
    assert "NaN" in errors[0] and "Infinity" in errors[1] and "422" in errors[2]
    assert route.call_count == 1


@respx.mock
def test_a_structured_ground_truth_is_refused_naming_its_line_and_field(tmp_path: Path) -> None:
    """A ground truth given as an object (a fault spec as a dict) with a run id is
    refused by line and field (2) before any request, and the other lines are sent."""
    route = _refusing_server()
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "".join(json.dumps(item) + "\n" for item in [
            {"diagnosis": "a", "ground_truth": {"component": "deployment/geo"}, "run_id": "r1"},
            {"diagnosis": "b", "scenario_id": "s", "run_id": "r1"},
        ])
    )  # fmt: skip
    done = CliRunner().invoke(submit_command, ["--diagnosis-file", str(runs), "--wait", "0"],
                              env=MOCKED)  # fmt: skip
    assert done.exit_code == 2, (done.exit_code, repr(done.exception))
    errors = done.output.splitlines()
    assert errors[0].startswith("error: line 1: [ground_truth]"), errors
    assert errors[1].startswith("error: line 2: 422"), errors
    assert route.call_count == 1


@respx.mock
def test_a_line_the_client_cannot_send_is_refused_and_the_others_sent(tmp_path: Path) -> None:
    """Whatever error of its own the client meets with one line (here a diagnosis that
    holds half of a UTF-16 surrogate pair, ``\\ud800``: JSON reads it, UTF-8 cannot
    carry it), that line is refused by number (2) and the others are still sent."""
    route = _refusing_server()
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"diagnosis": "a \\ud800", "scenario_id": "s"}\n'
                    '{"diagnosis": "b", "scenario_id": "s"}\n')  # fmt: skip
    done = CliRunner().invoke(submit_command, ["--diagnosis-file", str(runs), "--wait", "0"],
                              env=MOCKED)  # fmt: skip
    assert done.exit_code == 2, (done.exit_code, repr(done.exception))
    errors = done.output.splitlines()
    assert errors[0].startswith("error: line 1: UnicodeEncodeError"), errors
    assert errors[1].startswith("error: line 2: 422") and route.call_count == 1


@respx.mock
def test_a_success_that_is_not_a_grading_is_a_refusal(tmp_path: Path) -> None:
    """A 201 whose JSON is not a grading (a server of another version, or another
    service, behind the URL) is refused (2) naming the status, as a success that is not
    JSON is: never a crash that reads as the gate's "fail" (1)."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(201, json={"status": "ok", "queued": True})
    )
    _, diagnosis = _files(tmp_path)
    done = CliRunner().invoke(
        submit_command, ["--scenario", "s", "--diagnosis-file", diagnosis, "--wait", "0"],
        env=MOCKED,
    )  # fmt: skip
    assert done.exit_code == 2, (done.exit_code, repr(done.exception))
    assert "201 Not a grading" in done.output, done.output


@pytest.mark.slow
def test_every_line_the_server_refuses_is_named(
    serve: Callable[[str], Served], tmp_path: Path
) -> None:
    served = serve("pass")
    lines = tmp_path / "runs.jsonl"
    lines.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
                {"diagnosis": DIAGNOSIS, "scenario_id": f"nope-{uuid.uuid4().hex[:6]}"},
                {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "attempt": "first"},
                {"diagnosis": DIAGNOSIS},
            ]
        )
    )
    done = cli("submit", "--diagnosis-file", str(lines), "--format", "json", "--wait", "30",
               env=_env(served))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stdout.splitlines()) == 1  # line 1 was graded
    errors = done.stderr.splitlines()
    assert [e.split(":")[1].strip() for e in errors] == ["line 2", "line 3", "line 4"], errors
    assert "nope-" in errors[0] and "[attempt]" in errors[1] and "ground_truth" in errors[2]


def test_an_unreachable_server_is_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every attempt is made (the client's backoff between them is recorded, not slept:
    up to 15 s of waiting proves nothing more) and the gate ends in no verdict (5)."""
    waits: list[float] = []
    monkeypatch.setattr(tenacity.nap.time, "sleep", waits.append)
    _, diagnosis = _files(tmp_path)
    env = {"SRE_JUDGE_URL": "http://127.0.0.1:9", "SRE_JUDGE_TOKEN": "t"}
    done = CliRunner().invoke(
        submit_command, ["--scenario", "s", "--diagnosis-file", diagnosis], env=env
    )
    assert done.exit_code == 5, done.output
    assert "ConnectError" in done.output
    assert len(waits) == 5 and all(wait > 0 for wait in waits)  # six attempts, then no verdict


def _grading(status: str) -> dict[str, Any]:
    """A grading object as the server answers it, of an inline ground truth."""
    graded = status == "graded"
    submission = {
        "id": "s1", "agent": None, "model": None, "scenario_id": None, "run_id": None,
        "attempt": 1, "metadata": {}, "diagnosis": DIAGNOSIS, "ground_truth": TRUTH,
        "ground_truth_source": "inline",
        "ground_truth_sha256": hashlib.sha256(TRUTH.encode()).hexdigest(),
        "created_at": "2026-12-01T00:00:00Z",
    }  # fmt: skip
    return {
        "id": "g1", "submission_id": "s1", "status": status, "unscored_reason": None,
        "rubric": {"id": "sregym-rca", "version": "v1"},
        "judge": {"backend": "scripted", "model": "pass"}, "answers": [],
        "dimensions": [{"id": d, "name": d, "yes": 3, "total": 3} for d in ("D1", "D2", "D3")],
        "yes_count": 9 if graded else None, "composite": 1.0 if graded else None,
        "passed": True if graded else None, "revision": 2 if graded else 1,
        "created_at": "2026-12-01T00:00:00Z", "graded_at": None, "submission": submission,
    }  # fmt: skip


def _draining_server() -> respx.Route:
    """A server draining for a restart: it answers 202 at once, then grades; the route
    of ``GET /v1/gradings/g1`` (pending at the first look, graded after)."""
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(
            202, json=_grading("pending"), headers={"Location": "/v1/gradings/g1"}
        )
    )
    return respx.get(f"{URL}/v1/gradings/g1").mock(
        side_effect=[httpx.Response(200, json=_grading("pending"))]
        + [httpx.Response(200, json=_grading("graded"))] * 50
    )


@respx.mock
def test_a_202_before_the_wait_is_over_is_waited_out(tmp_path: Path) -> None:
    """``--wait S`` is the time given to the grading in all: a server that answers 202
    early (draining for a restart) is polled for the rest, so a pass graded a moment
    later exits 0, not 5 (no verdict yet)."""
    truth, diagnosis = _files(tmp_path)
    polled = _draining_server()
    done = CliRunner().invoke(
        submit_command,
        ["--ground-truth-file", truth, "--diagnosis-file", diagnosis, "--wait", "30",
         "--format", "json"],
        env=MOCKED,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert polled.call_count == 2 and json.loads(done.stdout)["status"] == "graded"


@respx.mock
def test_a_grading_the_server_stays_busy_for_is_printed_pending(tmp_path: Path) -> None:
    """A submission stored (202, pending) whose grading a busy server does not show again
    within ``--wait`` (503 with a long ``Retry-After``) is printed pending, its id the
    handle to look it up by later, and ends in no verdict yet (5)."""
    truth, diagnosis = _files(tmp_path)
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(202, json=_grading("pending"))
    )
    respx.get(f"{URL}/v1/gradings/g1").mock(
        return_value=httpx.Response(503, headers={"Retry-After": "3600"}, json={"title": "Busy"})
    )
    done = CliRunner().invoke(
        submit_command,
        ["--ground-truth-file", truth, "--diagnosis-file", diagnosis, "--wait", "1",
         "--format", "json"],
        env=MOCKED,
    )  # fmt: skip
    assert done.exit_code == 5, done.output
    printed = json.loads(done.stdout)
    assert (printed["id"], printed["status"]) == ("g1", "pending")


@respx.mock
def test_a_bad_gateway_is_no_verdict_yet(tmp_path: Path) -> None:
    """A load balancer in front of a server that is restarting answers 502: the server
    is unreachable (5, as for 503 and 504), not bad usage (2)."""
    _, diagnosis = _files(tmp_path)
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(
            502, headers={"Content-Type": "text/html"}, text="<html>Bad Gateway</html>"
        )
    )
    done = CliRunner().invoke(
        submit_command, ["--scenario", "s", "--diagnosis-file", diagnosis, "--wait", "0"],
        env=MOCKED,
    )  # fmt: skip
    assert done.exit_code == 5, done.output
    assert "502" in done.output


@pytest.mark.parametrize(
    ("problem", "status"),
    [
        # the attempt limit: this scenario is refused to this token for the window
        ({"title": "Too many attempts", "status": 429, "detail": "1 attempt an hour",
          "errors": [{"field": "scenario_id", "message": "1 attempt an hour"}]}, 2),
        # the rate limit, still there after the client's retries: busy, try later
        ({"title": "Too many requests", "status": 429, "detail": "rate limited"}, 5),
    ],
    ids=["attempt limit", "rate limit"],
)  # fmt: skip
@respx.mock
def test_a_429_naming_a_field_is_a_refusal_and_a_rate_limit_no_verdict_yet(
    tmp_path: Path, problem: dict[str, Any], status: int
) -> None:
    _, diagnosis = _files(tmp_path)
    respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(
            429, headers={"Retry-After": "3600", "Content-Type": "application/problem+json"},
            json=problem,
        )
    )  # fmt: skip
    done = CliRunner().invoke(
        submit_command, ["--scenario", "s", "--diagnosis-file", diagnosis, "--wait", "0"],
        env=MOCKED,
    )  # fmt: skip
    assert done.exit_code == status, done.output
    assert "429" in done.output


@respx.mock
def test_an_interrupted_submit_is_no_verdict_of_the_gate(tmp_path: Path) -> None:
    """Ctrl-C, or the SIGINT a CI runner sends when it cancels a job or times it out,
    while the submission is on its way ends the command in ``error: interrupted`` with
    130, the shell's status for SIGINT: none of the verdicts' statuses (never 1, a failed
    diagnosis), since the run got no verdict at all."""
    _, diagnosis = _files(tmp_path)
    asked: list[httpx.Request] = []

    def ctrl_c(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        raise KeyboardInterrupt

    respx.post(f"{URL}/v1/submissions").mock(side_effect=ctrl_c)
    done = cli_in_process(
        "submit", "--scenario", "s", "--diagnosis-file", diagnosis, "--format", "json",
        env=dict(MOCKED),
    )  # fmt: skip
    assert asked, done.stderr
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "error: interrupted\n")


@respx.mock
def test_a_redirect_is_refused_line_by_line(tmp_path: Path) -> None:
    """A server URL that redirects (``http://`` to ``https://``) is not followed: each
    JSONL line is still sent and gets its own error line naming the status, and the run
    ends as refused (2), never aborted by the first answer."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps({"diagnosis": d, "scenario_id": "s"}) + "\n"
                            for d in ("a", "b")))  # fmt: skip
    route = respx.post(f"{URL}/v1/submissions").mock(
        return_value=httpx.Response(308, headers={"Location": "https://judge.test/v1/submissions"})
    )
    done = CliRunner().invoke(
        submit_command, ["--diagnosis-file", str(runs), "--wait", "0"], env=MOCKED
    )
    assert route.call_count == 2 and done.exit_code == 2, done.output
    errors = done.output.splitlines()
    assert [e.split(":")[1].strip() for e in errors] == ["line 1", "line 2"], errors
    assert all("308" in e and "https://judge.test/v1/submissions" in e for e in errors)


def test_jsonl_lines_are_read_as_import_jsonl_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte order mark is no part of line 1, and a line is cut at a newline only: a
    diagnosis may hold U+2028 or U+0085 unescaped (``ensure_ascii=False``). Against an
    unreachable server each line is sent (no verdict, 5), none refused as unreadable."""
    monkeypatch.setattr(tenacity.nap.time, "sleep", lambda _: None)
    diagnoses = ["pod crashed\u2028then restarted", "second\x85line", "third"]
    text = "\r\n".join(json.dumps({"diagnosis": d, "scenario_id": "s"}, ensure_ascii=False)
                       for d in diagnoses)  # fmt: skip
    lines = tmp_path / "runs.jsonl"
    lines.write_bytes(b"\xef\xbb\xbf" + text.encode())
    env = {"SRE_JUDGE_URL": "http://127.0.0.1:9", "SRE_JUDGE_TOKEN": "t"}
    done = CliRunner().invoke(submit_command, ["--diagnosis-file", str(lines)], env=env)
    assert done.exit_code == 5, done.output
    assert "not JSON" not in done.output and "line 4" not in done.output
    assert all(f"line {n}" in done.output for n in (1, 2, 3)), done.output


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--ground-truth-file", "-", "--diagnosis-file", "-"], {}, "only one of the files"),
        (["--scenario", "s", "--diagnosis-file", "d.txt"], {"SRE_JUDGE_URL": "127.0.0.1:8000"},
         "http://"),
        (["--scenario", "s", "--diagnosis-file", "d.txt"],
         {"SRE_JUDGE_URL": "http://127.0.0.1:80OO"}, "--url/--token: the server URL does not"),
    ],
    ids=["stdin twice", "url without scheme", "mistyped port"],
)  # fmt: skip
def test_what_no_request_could_carry_is_bad_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str],
    said: str,
) -> None:  # fmt: skip
    """Both files from stdin, or a server URL no request can go to (no scheme, a
    mistyped port), are bad usage (2): never a wrong fail (1), nor 'no verdict yet' (5),
    which a CI gate retries for ever."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.txt").write_text("a diagnosis")
    base = {"SRE_JUDGE_URL": "http://127.0.0.1:9", "SRE_JUDGE_TOKEN": "t"}
    done = CliRunner().invoke(submit_command, args, env={**base, **env}, input="x")
    assert done.exit_code == 2 and said in done.output, done.output


def test_a_token_is_never_printed(tmp_path: Path) -> None:
    """A token no HTTP header can carry is a usage error that does not quote it (the
    HTTP library's own error did, into CI logs)."""
    _, diagnosis = _files(tmp_path)
    env = {"SRE_JUDGE_URL": "http://127.0.0.1:9", "SRE_JUDGE_TOKEN": "sjt-SECRET 42"}
    done = CliRunner().invoke(
        submit_command, ["--scenario", "s", "--diagnosis-file", diagnosis], env=env
    )
    assert done.exit_code == 2 and "SECRET" not in done.output, done.output


@pytest.mark.parametrize("view", ["verdict", "answers"])
def test_a_submitters_view_prints_what_the_server_sent(view: str) -> None:
    from rich.console import Console

    from api.cli.render import render_submitter_view

    grading = {
        "view": view,
        "id": "g1",
        "status": "graded",
        "unscored_reason": None,
        "passed": False,
        "held": False,
        "rubric": {"id": "sregym-rca", "version": "v1"},
        "judge": {"backend": "scripted", "model": "pass"},
    }
    if view == "answers":
        grading["answers"] = [
            {
                "question_id": f"D{d}-Q{q}",
                "dimension_id": f"D{d}",
                "answer": "no" if d == 2 else "yes",
            }
            for d in (1, 2, 3)
            for q in (1, 2, 3)
        ]
        grading["dimensions"] = [
            {"id": f"D{d}", "name": "", "yes": 0 if d == 2 else 3, "total": 3} for d in (1, 2, 3)
        ]
        grading.update(yes_count=6, composite=0.67)
    console = Console(record=True, width=100)
    render_submitter_view(grading, console)
    text = console.export_text()
    assert "FAIL" in text and "judge:" not in text
    assert ("D2-Q2" in text and "6/9 yes" in text) if view == "answers" else "verdict only" in text


def test_a_table_on_a_stdout_that_is_not_utf8_is_printed_with_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A grading's table goes to a stdout that cannot carry every character (an ASCII
    locale) with those characters escaped, never a traceback."""
    import io

    from api.grading.submit_cli import _show

    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", stdout)
    grading = {
        "id": "g1", "status": "unscored", "view": "verdict", "passed": None,
        "rubric": {"id": "sregym-rca", "version": "v1"},
        "judge": {"backend": "openai", "model": "modèle→2"},
        "unscored_reason": "judge_unavailable",
    }  # fmt: skip
    _show(grading, as_json=False)
    stdout.flush()
    shown = raw.getvalue().decode("ascii")
    assert "grading g1" in shown and "UNSCORED" in shown
    assert "mod\\xe8le\\u21922" in shown
