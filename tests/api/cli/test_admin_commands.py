"""The administrative command line as an operator relies on it: a process never writes
with a key the audit log is not keyed with, bad usage names its option and leaves
nothing behind, and no password of a URL is printed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest

from tests.conftest import POSTGRES_ADMIN_URL, _create_postgres_database, _drop_postgres_database
from tests.support.in_process_cli import cli_in_process

SRE_JUDGE = Path(sys.executable).parent / "sre-judge"
PASSWORD = "s3cr3t-pw-9f1c"
UNREACHABLE_JUDGE = "ollama:qwen2.5:7b-instruct@http://127.0.0.1:9"


def _env(tmp_path: Path, **extra: str | None) -> dict[str, str | None]:
    """A clean environment: no SRE_JUDGE_* of the caller, a database and key in tmp_path."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SRE_JUDGE_")}
    env |= {
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}",
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "service.key"),
        "SRE_JUDGE_JUDGE": "scripted:pass",
    }
    env |= extra
    return env


def _cli(*args: str, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    return cli_in_process(*args, env=env)


def _with_pending_grading(tmp_path: Path) -> dict[str, str | None]:
    """A migrated database holding one pending grading (its judge does not answer),
    written with the service key of tmp_path/service.key; the audit log verifies."""
    env = _env(tmp_path, SRE_JUDGE_JUDGE=UNREACHABLE_JUDGE, SRE_JUDGE_JUDGE_MAX_ATTEMPTS="1")
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"diagnosis": "pod OOMKilled", "ground_truth": "g"}) + "\n")
    done = _cli("import", "jsonl", str(history), env=env)
    assert done.returncode == 0, done.stderr
    checked = _cli("audit", "verify", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return env


def _postgres_available() -> bool:
    try:
        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


@pytest.fixture
def empty_postgres() -> Iterator[str]:
    """An empty (never migrated) PostgreSQL database, as a psycopg SQLAlchemy URL."""
    if not _postgres_available():
        pytest.skip("no PostgreSQL server")
    name = _create_postgres_database()
    try:
        base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0].replace(
            "postgresql://", "postgresql+psycopg://"
        )
        yield f"{base}/{name}"
    finally:
        _drop_postgres_database(name)


# --- the service key ------------------------------------------------------------------


@pytest.mark.slow  # a real worker process
def test_worker_without_the_service_key_refuses_instead_of_breaking_the_audit_log(
    tmp_path: Path,
) -> None:
    """`sre-judge worker` on another machine, started without the deployment's key file,
    refuses to start rather than make a key of its own: every audit row it wrote would
    be keyed with it and `audit verify` fail for ever (audit rows are never rewritten)."""
    env = _with_pending_grading(tmp_path)
    stranger_key = tmp_path / "elsewhere" / "service.key"
    worker_env = {k: v for k, v in os.environ.items() if not k.startswith("SRE_JUDGE_")}
    worker_env |= {
        "SRE_JUDGE_DATABASE_URL": str(env["SRE_JUDGE_DATABASE_URL"]),
        "SRE_JUDGE_SECRET_KEY_FILE": str(stranger_key),
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_PASS_POLICY": "unflagged",
    }
    worker = subprocess.Popen(
        [str(SRE_JUDGE), "worker"], env=worker_env, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        code = worker.wait(timeout=12)
    except subprocess.TimeoutExpired:
        worker.send_signal(signal.SIGTERM)  # it started working with a key of its own
        worker.wait(timeout=30)
        code = None
    verified = _cli("audit", "verify", env=env)
    assert verified.returncode == 0, (
        f"worker exit {code}; audit verify with the deployment's key: "
        f"{verified.stdout}{verified.stderr}"
    )
    assert code is not None and code != 0, "the worker ran without the deployment's key"
    assert not stranger_key.exists(), "the worker made itself a new service key"


def test_tokens_create_refusing_a_short_service_key_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    """A command that writes records refuses a service key it could never use (exit 2,
    naming it) before it makes the database: no database, no schema, no key file."""
    env = _env(tmp_path, SRE_JUDGE_SECRET_KEY="too-short")
    done = _cli("tokens", "create", "--role", "admin", "--name", "a", env=env)
    assert done.returncode == 2 and "SRE_JUDGE_SECRET_KEY" in done.stderr, done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == [], "left behind by a refused tokens create"


def test_move_judge_without_the_service_key_does_not_fork_the_audit_chain(
    tmp_path: Path,
) -> None:
    """`gradings move-judge` with the key file missing refuses (exit 2, naming the key)
    instead of auditing the moves with a new key the deployment's `audit verify` fails on."""
    env = _with_pending_grading(tmp_path)
    stranger = {
        **env,
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "elsewhere" / "service.key"),
        "SRE_JUDGE_PENDING_JUDGE": "pin",
        "SRE_JUDGE_JUDGE": "scripted:pass",
    }
    moved = _cli("gradings", "move-judge", "--from", UNREACHABLE_JUDGE, "--format", "json",
                 env=stranger)  # fmt: skip
    verified = _cli("audit", "verify", env=env)
    assert verified.returncode == 0, (
        f"move-judge exit {moved.returncode} {moved.stdout.strip()} {moved.stderr.strip()}; "
        f"audit verify: {verified.stderr.strip()}"
    )
    assert moved.returncode != 0 and "key" in moved.stderr, moved.stderr


# --- passwords in URLs ----------------------------------------------------------------


def test_audit_checkpoint_to_an_unreachable_url_masks_its_password(tmp_path: Path) -> None:
    """A checkpoint witness URL's password is masked in the error, as in every URL shown."""
    env = _with_pending_grading(tmp_path)
    done = _cli("audit", "checkpoint", "--out", f"https://witness:{PASSWORD}@127.0.0.1:1/cp",
                env=env)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert PASSWORD not in done.stdout + done.stderr, done.stderr


class _Witness(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_audit_checkpoint_written_to_a_url_does_not_print_its_password(tmp_path: Path) -> None:
    env = _with_pending_grading(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Witness)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://witness:{PASSWORD}@127.0.0.1:{server.server_address[1]}/cp"
        done = _cli("audit", "checkpoint", env={**env, "SRE_JUDGE_AUDIT_CHECKPOINT": url})
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr, done.stdout


def test_audit_verify_with_a_url_target_does_not_print_its_password(tmp_path: Path) -> None:
    env = _with_pending_grading(tmp_path)
    url = f"https://witness:{PASSWORD}@witness.example/cp"
    done = _cli("audit", "verify", env={**env, "SRE_JUDGE_AUDIT_CHECKPOINT": url})
    assert done.returncode == 0, done.stderr
    assert "witness.example" in done.stderr  # it names the target...
    assert PASSWORD not in done.stdout + done.stderr, done.stderr  # ...without the password


# --- PostgreSQL: a query password, a refused command ------------------------------------


def test_no_schema_error_masks_a_query_password(empty_postgres: str, tmp_path: Path) -> None:
    """A password given as ``?password=`` is masked in the error too."""
    url = f"{empty_postgres}?password={PASSWORD}"
    done = _cli("gradings", "move-judge", "--from", "ollama:a",
                env=_env(tmp_path, SRE_JUDGE_DATABASE_URL=url))  # fmt: skip
    assert done.returncode == 2
    assert "no sre-judge schema" in done.stderr
    assert PASSWORD not in done.stderr, done.stderr


def test_reading_admin_command_on_unmigrated_postgres_creates_no_service_key(
    empty_postgres: str, tmp_path: Path
) -> None:
    """A reading command on a never-migrated PostgreSQL database refuses and leaves no
    service key behind (on SQLite the missing file stops it first)."""
    env = _env(tmp_path, SRE_JUDGE_DATABASE_URL=empty_postgres)
    done = _cli("tokens", "list", env=env)
    assert done.returncode == 2 and "no sre-judge schema" in done.stderr
    assert not (tmp_path / "service.key").exists(), "a service key was created"


# --- bad usage: nothing changed, the option named --------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--judge", "bogus"),
        ("--judge", "scripted:pass", "--rubric", "no-such-rubric"),
        ("--judge", "scripted:pass", "--gold", "BAD_GOLD"),
    ],
    ids=["bad-judge", "unknown-rubric", "malformed-gold"],
)
def test_calibrate_refused_input_leaves_nothing_behind(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Bad usage (exit 2) changes nothing: no database, no service key."""
    bad_gold = tmp_path / "gold.jsonl"
    bad_gold.write_text("this is not json\n")
    args = tuple(str(bad_gold) if a == "BAD_GOLD" else a for a in args)
    done = _cli("calibrate", *args, "--format", "json", env=_env(tmp_path))
    assert done.returncode == 2, done.stderr
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "gold.jsonl")
    assert left == [], f"left behind by a refused calibrate: {left}"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("grade", "--ground-truth", "g", "--diagnosis", "d", "--judge", "bogus"), "--judge"),
        (("grade", "--ground-truth", "g", "--diagnosis", "d", "--rubric", "nope"), "--rubric"),
        (("calibrate", "--judge", "bogus"), "--judge"),
        (("calibrate", "--rubric", "nope"), "--rubric"),
        (("judges", "canary", "--judge", "bogus"), "--judge"),
    ],
    ids=["grade-judge", "grade-rubric", "calibrate-judge", "calibrate-rubric", "canary-judge"],
)
def test_a_refused_option_is_named(tmp_path: Path, args: tuple[str, ...], option: str) -> None:
    """Bad usage is one line, exit 2, naming the option at fault."""
    done = _cli(*args, env=_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert option in done.stderr, done.stderr


def test_calibrate_refuses_a_drift_threshold_that_is_no_number(tmp_path: Path) -> None:
    """`--drift-threshold nan` would make `--fail-on-drift` never fire (x - y > nan is
    false): a CI gate silently off. It is refused, as settings refuse nan."""
    done = _cli("calibrate", "--judge", "scripted:pass", "--fail-on-drift",
                "--drift-threshold", "nan", "--format", "json", env=_env(tmp_path))  # fmt: skip
    assert done.returncode == 2, f"exit {done.returncode}: nan accepted"
    assert "--drift-threshold" in done.stderr


# --- a worker where no database is ----------------------------------------------------


@pytest.mark.slow  # a real worker process
def test_worker_without_a_database_creates_no_database_file(tmp_path: Path) -> None:
    """The worker never migrates: where no database is it refuses without making an
    empty SQLite file (the next command would say "no sre-judge schema" instead of "no
    database at ...")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRE_JUDGE_")}
    env |= {
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}",
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "service.key"),
        "SRE_JUDGE_JUDGE": "scripted:pass",
    }
    done = subprocess.run(
        [str(SRE_JUDGE), "worker"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert not (tmp_path / "none.db").exists(), done.stderr


# --- config show ------------------------------------------------------------------------


def test_config_show_says_an_unset_database_url_is_the_default(tmp_path: Path) -> None:
    """With only SRE_JUDGE_DATABASE_PASSWORD_FILE set, the database URL is still the
    default (with the password put in it), and `config show` says so."""
    password = tmp_path / "pw"
    password.write_text(PASSWORD + "\n")
    env = _env(tmp_path, SRE_JUDGE_DATABASE_URL=None,
               SRE_JUDGE_DATABASE_PASSWORD_FILE=str(password))  # fmt: skip
    done = _cli("config", "show", "--format", "table", env=env)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert lines["SRE_JUDGE_DATABASE_PASSWORD_FILE"].endswith("(set)")
    assert lines["SRE_JUDGE_DATABASE_URL"].endswith("(default)"), lines["SRE_JUDGE_DATABASE_URL"]


def test_a_reading_command_makes_no_key_on_a_log_never_keyed(tmp_path: Path) -> None:
    """Reading commands change nothing: on a migrated database whose audit log holds no
    keyed row yet, `tokens list` makes no key file (it would become the deployment's)."""
    env = _env(tmp_path, SRE_JUDGE_SECRET_KEY_FILE=str(tmp_path / "laptop" / "service.key"))
    assert _cli("migrate", env=env).returncode == 0
    listed = _cli("tokens", "list", env=env)
    assert listed.returncode == 2, listed.stderr
    assert "SRE_JUDGE_SECRET_KEY_FILE" in listed.stderr
    assert not (tmp_path / "laptop").exists()


@pytest.mark.slow  # a real worker process
def test_a_worker_never_makes_the_deployments_key(tmp_path: Path) -> None:
    """A worker on another machine, started after `migrate` and before `serve` has
    keyed the log, refuses without a key file rather than make the key every later
    process would be refused for."""
    env = _env(tmp_path)
    assert _cli("migrate", env=env).returncode == 0
    worker_env = {k: v for k, v in os.environ.items() if not k.startswith("SRE_JUDGE_")}
    worker_env |= {
        "SRE_JUDGE_DATABASE_URL": str(env["SRE_JUDGE_DATABASE_URL"]),
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "machine-2" / "sre-judge.key"),
        "SRE_JUDGE_JUDGE": "scripted:pass",
    }
    done = subprocess.run(
        [str(SRE_JUDGE), "worker"], env=worker_env, cwd=tmp_path, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "SRE_JUDGE_SECRET_KEY_FILE" in done.stderr
    assert not (tmp_path / "machine-2").exists()


def test_a_refused_key_is_named_where_it_came_from(tmp_path: Path) -> None:
    """The wrong key is named where it came from: the text variable (which wins over the
    file, so changing the file would never help), or the key file's path."""
    env = _with_pending_grading(tmp_path)
    as_text = _cli("tokens", "list", env={**env, "SRE_JUDGE_SECRET_KEY": "x" * 64})
    other_file = tmp_path / "elsewhere.key"
    other_file.write_text("y" * 64)
    as_file = _cli("tokens", "list", env={**env, "SRE_JUDGE_SECRET_KEY_FILE": str(other_file)})
    empty = tmp_path / "empty.key"
    empty.write_text("")
    as_empty = _cli("tokens", "list", env={**env, "SRE_JUDGE_SECRET_KEY_FILE": str(empty)})
    assert as_text.returncode == 2 and "of SRE_JUDGE_SECRET_KEY:" in as_text.stderr
    assert as_file.returncode == 2 and str(other_file) in as_file.stderr
    assert as_empty.returncode == 2 and "SRE_JUDGE_SECRET_KEY_FILE" in as_empty.stderr
    assert len(as_text.stderr.strip().splitlines()) == 1
