"""``sre-judge grade`` as a user runs it (in process) against real judge servers."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import judge.grader
from api.cli.main import main
from api.service.schemas import GradingCore
from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import running_judge_server, sregym_reply

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
SEVEN = {"D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q3"}
SIX = {"D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1"}


def run_cli(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``sre-judge ARGS`` in process on a wide terminal without colour; output as bytes."""
    done = cli_in_process(
        *args, env={"NO_COLOR": "1", "COLUMNS": "160", **(env or {})}, input=stdin
    )
    stdout, stderr = done.stdout.encode(), done.stderr.encode()
    return subprocess.CompletedProcess(done.args, done.returncode, stdout, stderr)


def _grade_json(spec: str, *extra: str) -> tuple[int, dict[str, object]]:
    done = run_cli(
        "grade",
        "--json",
        "--judge",
        spec,
        "--ground-truth",
        TRUTH,
        "--diagnosis",
        DIAGNOSIS,
        *extra,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["openai", "ollama"])
@pytest.mark.parametrize(("yes", "passed"), [(SEVEN, True), (SIX, False)])
def test_grade_against_a_real_server_in_sregym_format(
    backend: str, yes: set[str], passed: bool
) -> None:
    with running_judge_server([sregym_reply(yes, evidence="sets USER_PORT=9999")]) as server:
        url = server.openai_url if backend == "openai" else server.ollama_url
        code, grading = _grade_json(f"{backend}:m@{url}")
    assert code == 0
    assert grading["status"] == "graded"
    assert grading["passed"] is passed
    assert grading["yes_count"] == len(yes)
    assert grading["judge"] == {"backend": backend, "model": "m"}
    # the same object as the service's, without what storing adds
    assert list(grading) == list(GradingCore.model_fields)
    assert grading["id"] is None and grading["dimensions"][0]["name"] == "Fault localization"
    body = server.requests[0]
    if backend == "openai":
        assert body["temperature"] == 0 and body["seed"] == 0 and body["max_tokens"] == 1536
        assert body["response_format"]["type"] == "json_schema"
    else:
        assert body["options"]["temperature"] == 0 and body["options"]["seed"] == 0
        assert body["format"]["required"][0] == "D1-Q1"


def test_grade_asks_the_configured_samples_and_takes_their_majority() -> None:
    """With ``SRE_JUDGE_JUDGE_SAMPLES=3`` the command asks as the service asks: three
    samples at the sample temperature, their majority per question (here one sample
    says yes to all nine, two to six: a fail)."""
    evidence = "sets USER_PORT=9999"
    replies = [sregym_reply(set(SEVEN) | {"D3-Q2", "D2-Q3"}, evidence=evidence)] + [
        sregym_reply(SIX, evidence=evidence)
    ] * 2
    with running_judge_server(replies) as server:
        done = run_cli(
            "grade", "--format", "json", "--judge", f"openai:m@{server.openai_url}",
            "--ground-truth", TRUTH, "--diagnosis", DIAGNOSIS,
            env={"SRE_JUDGE_JUDGE_SAMPLES": "3"},
        )  # fmt: skip
        asked = list(server.requests)
    assert done.returncode == 0, done.stderr  # graded (a fail is a verdict, not an error)
    assert len(asked) == 3 and {body.get("temperature") for body in asked} == {0.7}
    assert json.loads(done.stdout)["passed"] is False


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["openai", "ollama"])
def test_malformed_reply_twice_exits_3_unscored(backend: str) -> None:
    with running_judge_server(["no json here", "[1, 2"]) as server:
        url = server.openai_url if backend == "openai" else server.ollama_url
        code, grading = _grade_json(f"{backend}:m@{url}")
    assert code == 3
    assert grading["status"] == "unscored"
    assert grading["unscored_reason"] == "unparseable_reply"
    assert grading["passed"] is None and grading["answers"] == []
    assert len(server.requests) == 2


@pytest.mark.slow
def test_unreachable_judge_exits_3() -> None:
    done = run_cli(
        "grade",
        "--json",
        "--judge",
        "openai:m@http://127.0.0.1:9/v1",
        "--ground-truth",
        TRUTH,
        "--diagnosis",
        DIAGNOSIS,
        env={"SRE_JUDGE_JUDGE_MAX_ATTEMPTS": "1"},
    )
    assert done.returncode == 3
    assert json.loads(done.stdout)["unscored_reason"] == "judge_unavailable"


@pytest.mark.slow
def test_table_output_shows_answers_and_verdict() -> None:
    with running_judge_server([sregym_reply(SEVEN, evidence="sets USER_PORT=9999")]) as server:
        done = run_cli(
            "grade",
            "--format",
            "table",
            "--judge",
            f"openai:m@{server.openai_url}",
            "--ground-truth",
            TRUTH,
            "--diagnosis",
            DIAGNOSIS,
        )
    out = done.stdout.decode()
    assert done.returncode == 0
    assert "D3-Q3" in out and "PASS" in out and "7/9 yes" in out


@pytest.mark.slow
def test_files_and_stdin(tmp_path: Path) -> None:
    truth = tmp_path / "truth.txt"
    truth.write_text(TRUTH)
    done = run_cli(
        "grade",
        "--json",
        "--judge",
        "scripted:pass",
        "--ground-truth-file",
        str(truth),
        "--diagnosis-file",
        "-",
        stdin=DIAGNOSIS.encode(),
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["passed"] is True


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"caf\xe9 broken", "not valid UTF-8"), (b"a\x00b", "NUL bytes")],
)
def test_bad_files_exit_2(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "diag.txt"
    bad.write_bytes(content)
    done = run_cli(
        "grade", "--judge", "scripted:pass", "--ground-truth", TRUTH, "--diagnosis-file", str(bad)
    )
    assert done.returncode == 2
    assert message in done.stderr.decode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge", "nope:m"], "accepted forms"),
        (["--judge", "openai"], "accepted forms"),
        (["--judge", "openai:m@ftp://x"], "not an http(s) URL"),
        (["--judge", "scripted:maybe"], "unknown"),
        (["--judge", "scripted:pass", "--rubric", "nope"], "unknown rubric"),
        (["--judge", "scripted:pass", "--diagnosis", "x" * 70_000], "over the limit"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(args: list[str], message: str) -> None:
    base = ["grade", "--ground-truth", TRUTH]
    if "--diagnosis" not in args:
        base += ["--diagnosis", DIAGNOSIS]
    done = run_cli(*base, *args)
    assert done.returncode == 2
    assert message in done.stderr.decode()


def test_empty_diagnosis_fails_without_calling_the_judge() -> None:
    done = run_cli(
        "grade",
        "--json",
        "--judge",
        "scripted:garbage",
        "--ground-truth",
        TRUTH,
        "--diagnosis",
        "  ",
    )
    grading = json.loads(done.stdout)
    assert done.returncode == 0
    assert grading["passed"] is False and grading["detail"] == "empty_diagnosis"


def test_an_empty_judge_is_refused_not_read_as_the_default() -> None:
    """``--judge "$JUDGE"`` with ``JUDGE`` unset names no judge: bad usage naming
    ``--judge``, not a grading by ``SRE_JUDGE_JUDGE``."""
    done = run_cli(
        "grade", "--format", "json", "--judge", "", "--ground-truth", TRUTH,
        "--diagnosis", DIAGNOSIS, env={"SRE_JUDGE_JUDGE": "scripted:pass"},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[:200]
    assert b"--judge" in done.stderr and not done.stdout


def test_an_empty_rubric_is_refused_not_read_as_the_default() -> None:
    """``--rubric ""`` names no rubric: bad usage naming ``--rubric``, not a grading by
    ``SRE_JUDGE_RUBRIC``."""
    done = run_cli(
        "grade", "--format", "json", "--judge", "scripted:pass", "--rubric", "",
        "--ground-truth", TRUTH, "--diagnosis", DIAGNOSIS,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[:200]
    assert b"--rubric" in done.stderr and not done.stdout


class _EndlessStdin(io.RawIOBase):
    """A stdin that never ends (a runaway pipe, ``/dev/zero``): counts what was read and
    stops the test at 8 MiB instead of eating the machine's memory."""

    CAP = 8 * 1024 * 1024

    def __init__(self) -> None:
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.total >= self.CAP:
            raise RuntimeError(f"read {self.total} bytes of a diagnosis limited to 64 KiB")
        size = len(buffer)
        buffer[:size] = b"a" * size
        self.total += size
        return size


def test_an_endless_diagnosis_is_refused_at_the_limit_not_read_whole() -> None:
    """A diagnosis file or stdin is read up to ``SRE_JUDGE_MAX_TEXT_BYTES`` (64 KiB) and
    no further: one that never ends is refused there, naming the option and the limit."""
    raw = _EndlessStdin()
    done = cli_in_process(
        "grade", "--judge", "scripted:pass", "--ground-truth", TRUTH,
        "--diagnosis-file", "-", env={"NO_COLOR": "1"}, input=io.BufferedReader(raw),  # type: ignore[arg-type]
    )  # fmt: skip
    assert raw.total <= 1024 * 1024, f"read {raw.total} bytes; stderr: {done.stderr}"
    assert done.returncode == 2
    assert "--diagnosis-file -: over the limit of 65536 bytes" in done.stderr


def test_a_diagnosis_file_over_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    """A diagnosis file one byte over ``SRE_JUDGE_MAX_TEXT_BYTES`` is refused naming the
    option, the file and the limit; one at the limit is graded."""
    diagnosis = tmp_path / "diagnosis.txt"
    diagnosis.write_bytes(b"a" * 65_537)
    args = ("grade", "--judge", "scripted:pass", "--ground-truth", TRUTH, "--format", "json")
    over = run_cli(*args, "--diagnosis-file", str(diagnosis))
    assert over.returncode == 2
    assert f"--diagnosis-file {diagnosis}: over the limit of 65536 bytes" in over.stderr.decode()
    diagnosis.write_bytes(b"a" * 65_536)
    at_limit = run_cli(*args, "--diagnosis-file", str(diagnosis))
    assert at_limit.returncode == 0, at_limit.stderr


@pytest.mark.parametrize(
    ("encoding", "fmt", "shown"),
    [
        ("ascii", "table", "caf\\xe9 \\u2192 done"),
        ("latin-1", "table", "café \\u2192 done"),
        ("latin-1", "json", "caf\\u00e9 \\u2192 done"),
    ],
)
def test_a_stdout_that_is_not_utf8_gets_the_grading_with_escapes(
    encoding: str, fmt: str, shown: str
) -> None:
    """On a stdout whose encoding is not UTF-8 (``PYTHONIOENCODING=ascii``, a Latin-1
    locale) the grading still comes, what the encoding cannot carry escaped: JSON as
    ``\\u`` escapes (it parses to the same text), a table as backslash escapes; never
    an encoding error."""
    diagnosis = "café → done: " + DIAGNOSIS
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"}, charset=encoding)
    done = runner.invoke(
        main,
        ["grade", "--format", fmt, "--judge", "scripted:pass", "--ground-truth", TRUTH,
         "--diagnosis", diagnosis],
    )  # fmt: skip
    assert done.exit_code == 0 and not done.stderr, done.output[-600:]
    text = done.stdout_bytes.decode(encoding)
    assert shown in text
    if fmt == "json":
        assert json.loads(text)["answers"][0]["evidence"].startswith("café → done")


def test_a_fault_inside_the_grading_is_reported_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected error while grading (in the checks run on the judge's reply) is exit 2
    with that error's own type and message, as every unexpected error of the command
    line: the user gave whatever text it may quote."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("evidence index out of range")

    monkeypatch.setattr(judge.grader, "graded_result", broken)
    with running_judge_server([sregym_reply(SEVEN, evidence="sets USER_PORT=9999")]) as server:
        done = cli_in_process(
            "grade", "--judge", f"openai:m@{server.openai_url}",
            "--ground-truth", TRUTH, "--diagnosis", DIAGNOSIS,
            env={"NO_COLOR": "1", "COLUMNS": "160"},
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "unexpected RuntimeError: evidence index out of range" in done.stderr, done.stderr
