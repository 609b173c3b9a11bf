"""Settings refused at start in one line naming their variable, read as documented, and
judge profiles applied to the judge as the grader reads it."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.qualification import identity_of
from api.service.runtime import Runtime, read_start_files
from api.service.settings import Settings
from judge.profiles import read_profiles
from judge.rubric import load_rubric_dir
from tests.support.in_process_cli import cli_in_process

QWEN = "qwen2.5-coder:1.5b"


def _config_show(env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    return cli_in_process("config", "show", "--format", "json", env={"NO_COLOR": "1", **env})


def _serve(tmp_path: Path, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    """``sre-judge serve`` on a SQLite file of ``tmp_path`` (refused: it never serves)."""
    base: dict[str, str | None] = {
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}",
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "judge.key"),
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_PORT": "0",
    }
    return cli_in_process("serve", env={**base, **env})


def _refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a start refused with exit 2."""
    assert done.returncode == 2, (done.returncode, done.stderr[-300:])
    (line,) = done.stderr.strip().splitlines()
    return line


@pytest.fixture
def port_in_use() -> Iterator[int]:
    """A port of 127.0.0.1 another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


# docs/running.md: SRE_JUDGE_JUDGE_SEED "seed sent to the judge (empty: none)"
def test_an_empty_judge_seed_means_no_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRE_JUDGE_JUDGE_SEED", "")
    assert Settings().judge_seed is None


# settings faults found by model validators are not named by their variable
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SRE_JUDGE_CONFIRM_JUDGE", "ollama:qwen2.5:7b-instruct"),  # the judge's own model
        ("SRE_JUDGE_DATABASE_PASSWORD_FILE", "/nonexistent/pw"),
    ],
)
def test_a_refused_setting_is_named_by_its_variable(variable: str, value: str) -> None:
    refused = _config_show({variable: value, "SRE_JUDGE_JUDGE": None, "SRE_JUDGE_PANEL": None})
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert variable in line, line
    assert "Value error" not in line, line


# scripted:MODE with an unknown mode passes the settings, then `serve` dies with a
#    traceback (ExceptionGroup ... JudgeSpecError) at startup, exit 3
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SRE_JUDGE_JUDGE", "scripted:whatever"),
        ("SRE_JUDGE_PANEL", "scripted:pass,scripted:whatever"),
        ("SRE_JUDGE_CONFIRM_JUDGE", "scripted:whatever"),
    ],
)
def test_an_unknown_scripted_mode_is_refused_at_start(variable: str, value: str) -> None:
    refused = _config_show({variable: value})
    assert refused.returncode == 2, refused.stdout[:200]
    assert variable in refused.stderr and "whatever" in refused.stderr


@pytest.mark.parametrize(
    "spec", ["openai:m@http://127.0.0.1:99999/v1", "ollama:m@http://127.0.0.1:11434x"]
)
def test_a_judge_spec_whose_port_is_no_port_is_refused_at_start(spec: str) -> None:
    """Refused in one line naming the variable, before ``serve`` migrates anything."""
    line = _refusal(_config_show({"SRE_JUDGE_JUDGE": spec}))
    assert "SRE_JUDGE_JUDGE" in line and "port" in line, line


@pytest.mark.parametrize(
    ("variable", "spec"),
    [
        ("SRE_JUDGE_JUDGE", "openai:m@http://:8080/v1"),
        ("SRE_JUDGE_JUDGE", "ollama:m@http://:11434"),
        ("SRE_JUDGE_PANEL", "scripted:pass,openai:m@http://:8080/v1"),
        ("SRE_JUDGE_CONFIRM_JUDGE", "ollama:m@http://:11434"),
    ],
)
def test_a_judge_base_url_without_a_host_is_refused_at_start(variable: str, spec: str) -> None:
    """A base URL that names no server (``http://:8080/v1``) could answer no call: the
    start is refused in one line naming the variable, not left to keep every grading
    pending."""
    line = _refusal(_config_show({variable: spec}))
    assert variable in line and "with a host" in line, line


@pytest.mark.parametrize("value", [",", " , ,"])
def test_a_panel_of_no_judge_is_refused_not_read_as_no_panel(value: str) -> None:
    refused = _config_show({"SRE_JUDGE_PANEL": value})
    assert refused.returncode == 2, refused.stdout[:200]
    assert "SRE_JUDGE_PANEL" in refused.stderr and "at least one" in refused.stderr


def test_a_panel_listing_one_model_at_two_addresses_is_refused_at_start() -> None:
    """Two members of one ``backend:model`` at two servers would share the qualification,
    model digest and canary schedule kept under that name, so the second would never be
    measured: the start is refused in one line naming the variable and the judge."""
    panel = "openai:local@http://127.0.0.1:9/v1,openai:local@http://127.0.0.2:9/v1"
    line = _refusal(_config_show({"SRE_JUDGE_PANEL": panel}))
    assert "SRE_JUDGE_PANEL" in line and "openai:local is listed at two addresses" in line, line


# infinite / out-of-datetime-range durations are accepted; every claim then fails
#    (storage/queue.py: now + timedelta(seconds=inf) -> OverflowError, logged forever)
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SRE_JUDGE_LEASE_SECONDS", "inf"),
        ("SRE_JUDGE_LEASE_SECONDS", "1e15"),
        ("SRE_JUDGE_WEBHOOK_TIMEOUT_SECONDS", "inf"),
    ],
)
def test_a_duration_no_clock_can_hold_is_refused_at_start(variable: str, value: str) -> None:
    refused = _config_show({variable: value})
    assert refused.returncode == 2, f"{variable}={value} accepted"
    assert variable in refused.stderr


@pytest.mark.parametrize("spec", [f"Ollama:{QWEN}", f" ollama:{QWEN}", f"OPENAI:{QWEN}"])
def test_the_profile_follows_the_judge_as_parsed(spec: str) -> None:
    rubric = load_rubric_dir()["sregym-rca"]
    settings = Settings(judge=spec)
    canonical = Settings(judge=spec.strip().lower())
    assert identity_of(canonical, canonical.judge, rubric)["asking_mode"] == "extraction"
    assert identity_of(settings, settings.judge, rubric) == identity_of(
        canonical, canonical.judge, rubric
    )


# a profiles file with a misspelt table ([[profiles]]) is read as no profiles at all,
#    silently, although each entry refuses unknown keys
def test_a_profiles_file_with_an_unknown_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text('[[profiles]]\nname = "mine"\nmodels = ["my-model*"]\nasking = "extraction"\n')
    with pytest.raises(ValueError, match="profiles"):
        read_profiles(path)


# config show: passwords in URLs masked -- not these
@pytest.mark.parametrize(
    ("variable", "value", "secret"),
    [
        ("SRE_JUDGE_AUDIT_CHECKPOINT", "https://:w1tness-pw@witness.example/cp", "w1tness-pw"),
        ("OPENAI_BASE_URL", "http://:openai-pw@llm.example/v1", "openai-pw"),
        ("OLLAMA_HOST", "http://:ollama-pw@ollama.example:11434", "ollama-pw"),
        (
            "SRE_JUDGE_DATABASE_URL",
            "postgresql+psycopg://judge@db:5432/sre?password=pa55-word",
            "pa55-word",
        ),
        (
            "SRE_JUDGE_DATABASE_URL",
            "postgresql+psycopg://judge@db:5432/sre?sslmode=verify-full&sslpassword=k3y-pa55",
            "k3y-pa55",
        ),
        # a witness or proxy that takes its credential in the query
        ("SRE_JUDGE_AUDIT_CHECKPOINT", "https://witness.example/cp?token=t0k3n-w1t", "t0k3n-w1t"),
        ("SRE_JUDGE_AUDIT_CHECKPOINT", "https://w.example/cp?a=1&api_key=k3y-w1t", "k3y-w1t"),
        ("OPENAI_BASE_URL", "https://llm.example/v1?access_token=acc-0p3n", "acc-0p3n"),
        ("SRE_JUDGE_AUDIT_CHECKPOINT", "https://b.example/o?X-Amz-Signature=s1gn3d", "s1gn3d"),
    ],
)
def test_config_show_masks_every_url_password(variable: str, value: str, secret: str) -> None:
    shown = _config_show({variable: value})
    assert shown.returncode == 0, shown.stderr
    assert secret not in shown.stdout


@pytest.mark.parametrize("content", [None, "not: valid: yaml: [\n"])
def test_a_failure_tags_file_that_cannot_be_read_stops_serve_before_migrating(
    tmp_path: Path, content: str | None
) -> None:
    tags = tmp_path / "tags.yaml"
    if content is not None:
        tags.write_text(content)
    line = _refusal(_serve(tmp_path, {"SRE_JUDGE_FAILURE_TAGS_FILE": str(tags)}))
    assert line.startswith("error: SRE_JUDGE_FAILURE_TAGS_FILE: "), line
    assert not (tmp_path / "judge.db").exists()  # no schema made or upgraded


@pytest.mark.parametrize("variable", ["SRE_JUDGE_SECRET_KEY", "SRE_JUDGE_SECRET_KEY_FILE"])
def test_serve_refuses_a_short_service_key_before_migrating(tmp_path: Path, variable: str) -> None:
    """A service key shorter than 32 characters, given itself or in its file, is refused
    in one line naming where it came from, and no schema is made."""
    short = tmp_path / "short.key"
    short.write_text("short\n")
    value = str(short) if variable == "SRE_JUDGE_SECRET_KEY_FILE" else "too-short"
    line = _refusal(_serve(tmp_path, {variable: value}))
    assert variable in line, line
    assert not (tmp_path / "judge.db").exists()  # no schema made or upgraded


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SRE_JUDGE_HOST", "999.1.1.1"),  # no address
        ("SRE_JUDGE_HOST", "192.0.2.1"),  # an address of another machine
        ("SRE_JUDGE_ALLOW_ANONYMOUS", "true"),  # with a host that is not loopback
    ],
)
def test_serve_refuses_an_address_it_cannot_listen_on_before_migrating(
    tmp_path: Path, variable: str, value: str
) -> None:
    env: dict[str, str | None] = {variable: value}
    if variable == "SRE_JUDGE_ALLOW_ANONYMOUS":
        env["SRE_JUDGE_HOST"] = "0.0.0.0"
    line = _refusal(_serve(tmp_path, env))
    assert variable in line, line
    assert not (tmp_path / "judge.db").exists()


@pytest.mark.parametrize("host", ["", "  "])
def test_an_empty_host_is_refused_not_read_as_every_interface(host: str) -> None:
    """An empty host (an env file's blank, an unset variable in compose) would listen on
    every interface; every interface is asked for by name (0.0.0.0 or ::)."""
    line = _refusal(_config_show({"SRE_JUDGE_HOST": host}))
    assert "SRE_JUDGE_HOST" in line and "0.0.0.0" in line, line
    assert Settings(host=" 127.0.0.1 ").host == "127.0.0.1"


def test_serve_on_a_port_in_use_names_the_port(tmp_path: Path, port_in_use: int) -> None:
    line = _refusal(_serve(tmp_path, {"SRE_JUDGE_PORT": str(port_in_use)}))
    assert "SRE_JUDGE_PORT (--port)" in line and str(port_in_use) in line, line
    assert not (tmp_path / "judge.db").exists()


@pytest.mark.parametrize(
    "content", [None, '{"id": "x", "ground_truth": "g"}\n', b"\xff\xfe not text\n"]
)
def test_a_canary_set_that_cannot_be_read_as_a_labelled_set_is_refused(
    tmp_path: Path, content: str | bytes | None
) -> None:
    """Read when a process starts as a canary run reads it, not found unusable by the
    first scheduled run."""
    canary = tmp_path / "canary.jsonl"
    if isinstance(content, str):
        canary.write_text(content)
    elif content is not None:
        canary.write_bytes(content)
    settings = Settings(canary_set=canary, database_url="sqlite://")
    with pytest.raises(ValueError, match=r"^SRE_JUDGE_CANARY_SET: ") as refused:
        Runtime(settings)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "target", ["s3://audit-bucket/cp.jsonl", "htps://witness.example/cp", "file:///var/cp"]
)
def test_a_checkpoint_target_of_another_scheme_is_refused(target: str) -> None:
    """Neither a file (it would be a folder named after the scheme) nor a witness."""
    line = _refusal(_config_show({"SRE_JUDGE_AUDIT_CHECKPOINT": target}))
    assert "SRE_JUDGE_AUDIT_CHECKPOINT" in line, line


@pytest.mark.parametrize("target", ["HTTPS://witness.example/cp", "./a/cp.jsonl", "off"])
def test_a_checkpoint_target_of_a_file_or_an_http_url_is_taken(target: str) -> None:
    assert Settings(audit_checkpoint=target).audit_checkpoint == target


@pytest.mark.parametrize("url", ["mysql://judge@db/judge", "oracle://judge@db/judge"])
def test_a_database_url_of_an_unsupported_database_names_the_setting(url: str) -> None:
    done = cli_in_process(
        "migrate", env={"SRE_JUDGE_DATABASE_URL": url, "SRE_JUDGE_JUDGE": "scripted:pass"}
    )
    line = _refusal(done)
    assert "SRE_JUDGE_DATABASE_URL" in line, line
    assert "unexpected" not in line, line


def test_a_worker_of_no_grading_workers_is_refused(tmp_path: Path) -> None:
    env: dict[str, str | None] = {
        "SRE_JUDGE_WORKERS": "0",
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'j.db'}",
    }
    line = _refusal(cli_in_process("worker", env=env))
    assert "SRE_JUDGE_WORKERS" in line, line


def test_a_reply_budget_that_fills_the_context_window_is_refused_at_start() -> None:
    """No prompt fits beside a reply of ``SRE_JUDGE_JUDGE_MAX_TOKENS`` when it is as
    large as ``SRE_JUDGE_JUDGE_CONTEXT_TOKENS``: refused naming both (exit 2), not left
    to end every grading unscored (``context_overflow``)."""
    env: dict[str, str | None] = {
        "SRE_JUDGE_JUDGE_CONTEXT_TOKENS": "4096",
        "SRE_JUDGE_JUDGE_MAX_TOKENS": "4096",
        "SRE_JUDGE_PASS_POLICY": "unflagged",
    }
    done = cli_in_process(
        "grade", "--format", "json", "--judge", "scripted:pass",
        "--ground-truth", "deployment/user-service sets USER_PORT=9999",
        "--diagnosis", "user-service has USER_PORT=9999", env=env,
    )  # fmt: skip
    line = _refusal(done)
    assert "SRE_JUDGE_JUDGE_MAX_TOKENS" in line and "SRE_JUDGE_JUDGE_CONTEXT_TOKENS" in line


def test_a_context_window_from_a_judge_profile_is_checked_against_the_reply_budget(
    tmp_path: Path,
) -> None:
    """A profile's window below the reply budget (the default 1536 here) stops a process
    of the service before it starts, naming the settings and the profile."""
    profiles = tmp_path / "profiles.toml"
    profiles.write_text('[[profile]]\nname = "tiny"\nmodels = ["tiny*"]\ncontext_tokens = 1024\n')
    settings = Settings(
        judge="ollama:tiny-1b", judge_profiles_file=profiles, database_url="sqlite://"
    )
    with pytest.raises(ValueError, match="SRE_JUDGE_JUDGE_MAX_TOKENS") as refused:
        read_start_files(settings)
    assert "SRE_JUDGE_JUDGE_CONTEXT_TOKENS" in str(refused.value)
    assert "judge profile tiny" in str(refused.value)
    read_start_files(settings.model_copy(update={"judge": "ollama:other"}))  # no profile
