"""``sre-judge config show``, the docs' configuration reference, the bootstrap admin token."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import Engine

from api.cli.main import main
from api.http.app import create_app
from api.service.bootstrap import BOOTSTRAP_PRINCIPAL, ensure_bootstrap_admin
from api.service.grader_factory import profile_of_spec, sampling_for
from api.service.settings import Settings
from storage import Store, head_revision
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key
from tests.support.schema_revisions import at_revision

ROOT = Path(__file__).resolve().parents[3]


#: every secret ``_env`` sets: none may be shown
SECRETS = (
    "pa55-word", "sk-config-show-secret", "t" * 40, "k" * 48, "w1tness-pw", "openai-pw",
    "ollama-pw",
)  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "admin_token").write_text("t" * 40)
    return {
        "SRE_JUDGE_DATABASE_URL": "postgresql+psycopg://judge:pa55-word@db:5432/sre",
        "SRE_JUDGE_BOOTSTRAP_ADMIN_TOKEN_FILE": str(tmp_path / "admin_token"),
        "SRE_JUDGE_JUDGE": "openai:m@http://judge:8080/v1",
        "SRE_JUDGE_MAX_PENDING": "500",
        "SRE_JUDGE_SECRET_KEY": "k" * 48,
        "SRE_JUDGE_AUDIT_CHECKPOINT": "https://witness:w1tness-pw@witness.example/cp",
        "OPENAI_API_KEY": "sk-config-show-secret",
        "OPENAI_BASE_URL": "http://user:openai-pw@llm.example/v1",
        "OLLAMA_HOST": "http://user:ollama-pw@ollama.example:11434",
    }


def test_config_show_lists_every_setting_with_secrets_masked(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["config", "show", "--format", "table"], env=_env(tmp_path))
    assert done.exit_code == 0, done.output
    for secret in SECRETS:
        assert secret not in done.output
    lines = {line.split()[0]: line for line in done.output.splitlines()}
    for name in Settings.model_fields:
        assert f"SRE_JUDGE_{name.upper()}" in lines
    assert "postgresql+psycopg://judge:***@db:5432/sre" in lines["SRE_JUDGE_DATABASE_URL"]
    assert str(tmp_path / "admin_token") in lines["SRE_JUDGE_BOOTSTRAP_ADMIN_TOKEN_FILE"]
    assert lines["SRE_JUDGE_MAX_PENDING"].endswith("500  (set)")
    assert lines["SRE_JUDGE_SHUTDOWN_SECONDS"].endswith("(default)")
    assert "***" in lines["OPENAI_API_KEY"]


def test_config_show_json_is_one_object(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["config", "show", "--json"], env=_env(tmp_path))
    assert done.exit_code == 0, done.output
    config = json.loads(done.stdout)
    assert config["SRE_JUDGE_DATABASE_URL"] == "postgresql+psycopg://judge:***@db:5432/sre"
    assert config["SRE_JUDGE_RATE_LIMIT_PER_MINUTE"] == 0
    assert config["OPENAI_API_KEY"] == config["SRE_JUDGE_SECRET_KEY"] == "***"
    assert config["SRE_JUDGE_AUDIT_CHECKPOINT"] == "https://witness:***@witness.example/cp"
    assert config["OLLAMA_HOST"] == "http://user:***@ollama.example:11434"
    assert not any(secret in done.stdout for secret in SECRETS)


def test_config_show_keeps_every_panel_member_when_one_has_a_query_credential() -> None:
    """A credential in a member's query is masked up to the comma that begins the next
    member: every member is shown."""
    panel = "openai:a@http://h:1/v1?token=S2,ollama:b@http://h:2"
    done = cli_in_process("config", "show", "--format", "json", env={"SRE_JUDGE_PANEL": panel})
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["SRE_JUDGE_PANEL"]
    assert shown == "openai:a@http://h:1/v1?token=***,ollama:b@http://h:2"


def test_config_show_gives_what_an_unset_setting_is_in_effect(tmp_path: Path) -> None:
    """Unset, the workers follow the judge's concurrency and checkpoints go beside the
    SQLite file: shown as such, not as nothing."""
    database = tmp_path / "judge.db"
    env = {"SRE_JUDGE_DATABASE_URL": f"sqlite:///{database}", "SRE_JUDGE_JUDGE_CONCURRENCY": "3"}
    done = CliRunner().invoke(main, ["config", "show", "--format", "json"], env=env)
    assert done.exit_code == 0, done.output
    config = json.loads(done.stdout)
    assert config["SRE_JUDGE_WORKERS"] == 3
    assert config["SRE_JUDGE_AUDIT_CHECKPOINT"] == f"{database}.checkpoints.jsonl"
    memory = {**env, "SRE_JUDGE_DATABASE_URL": "sqlite://"}
    done = CliRunner().invoke(main, ["config", "show", "--format", "json"], env=memory)
    assert json.loads(done.stdout)["SRE_JUDGE_AUDIT_CHECKPOINT"] == "off"


def test_config_show_gives_the_sampling_and_window_a_judge_profile_puts_in_effect(
    tmp_path: Path,
) -> None:
    """Unset, the judge's reply budget, context window and temperature are its model's
    profile's: shown as the judge is sent them (``sampling_for``), from that profile; a
    setting given is shown as given."""
    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        '[[profile]]\nname = "acme"\nmodels = ["acme-judge:*"]\n'
        "max_tokens = 3000\ncontext_tokens = 8192\ntemperature = 0.3\n",
        encoding="utf-8",
    )
    env: dict[str, str | None] = {
        "SRE_JUDGE_JUDGE": "ollama:acme-judge:7b",
        "SRE_JUDGE_JUDGE_PROFILES_FILE": str(profiles),
        "SRE_JUDGE_PANEL": None,
    }
    settings = Settings(judge="ollama:acme-judge:7b", judge_profiles_file=profiles)
    sent = sampling_for(settings, profile_of_spec(settings, settings.judge), backend="ollama")
    assert (sent.max_tokens, sent.num_ctx, sent.temperature) == (3000, 8192, 0.3)
    done = cli_in_process("config", "show", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["SRE_JUDGE_JUDGE_MAX_TOKENS"] == sent.max_tokens
    assert shown["SRE_JUDGE_JUDGE_CONTEXT_TOKENS"] == sent.num_ctx
    assert shown["SRE_JUDGE_JUDGE_TEMPERATURE"] == sent.temperature
    env["SRE_JUDGE_JUDGE_TEMPERATURE"] = "0.1"
    done = cli_in_process("config", "show", "--format", "table", env=env)
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert lines["SRE_JUDGE_JUDGE_MAX_TOKENS"].endswith("3000  (judge profile acme)")
    assert lines["SRE_JUDGE_JUDGE_TEMPERATURE"].endswith("0.1  (set)")


def test_the_docs_document_every_setting() -> None:
    page = (ROOT / "docs" / "running.md").read_text()
    table = page[page.index("## Configuration") :]
    documented = set(re.findall(r"`(SRE_JUDGE_[A-Z_]+)`", table))
    missing = {f"SRE_JUDGE_{n.upper()}" for n in Settings.model_fields} - documented
    assert not missing, f"add these to the settings table of docs/running.md: {sorted(missing)}"


async def test_the_bootstrap_admin_token_is_registered_once_and_revocation_sticks(
    engine: Engine, tmp_path: Path
) -> None:
    token = secrets.token_urlsafe(32)
    (tmp_path / "token").write_text(f"{token}\n")
    store = Store(engine, key=session_key())
    assert await ensure_bootstrap_admin(store, tmp_path / "token") is True
    assert await ensure_bootstrap_admin(store, tmp_path / "token") is False
    record = await store.tokens.authenticate(token)
    assert record is not None
    assert (record.name, record.role) == (BOOTSTRAP_PRINCIPAL, "admin")
    assert token not in {t.token_hash for t in await store.tokens.all()}
    await store.tokens.revoke(record.id)
    assert await ensure_bootstrap_admin(store, tmp_path / "token") is False
    assert await store.tokens.authenticate(token) is None
    assert len(await store.tokens.all()) == 1


@pytest.mark.parametrize(
    "content",
    [
        None,
        "short",
        "two words but long enough to pass",
        # never a bearer token: $(cat FILE) sends the byte order mark along, and a header
        # carries ASCII only
        "\ufeff0123456789abcdef0123456789abcdef\n",
        "p\u00e4ssw\u00f6rt-0123456789abcdef0123456789\n",
    ],
    ids=["missing", "short", "two-words", "byte-order-mark", "non-ascii"],
)
def test_an_unusable_bootstrap_token_file_stops_the_app_at_once(
    content: str | None, tmp_path: Path, database_url: str
) -> None:
    """A bootstrap token file whose token could never be sent as a bearer token stops the
    app at start, naming the file, rather than locking the operator out."""
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    settings = Settings(database_url=database_url, bootstrap_admin_token_file=path)
    with pytest.raises(ValueError, match="bootstrap admin token"):
        create_app(settings)


def test_the_database_password_can_come_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("p@ss:w/rd\n")
    settings = Settings(
        database_url="postgresql+psycopg://judge@db:5432/sre",
        database_password_file=tmp_path / "pw",
    )
    assert settings.database_url == "postgresql+psycopg://judge:p%40ss%3Aw%2Frd@db:5432/sre"
    with pytest.raises(ValueError, match="SRE_JUDGE_DATABASE_PASSWORD_FILE: cannot read"):
        Settings(database_password_file=tmp_path / "missing")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("postgresql+psycopg://judge:s3cret-pw@127.0.0.1:notaport/judge", "port"),
        ("not a database url", "not a database URL"),
    ],
)
def test_a_setting_refused_is_named_and_its_password_masked(url: str, why: str) -> None:
    """A database URL that cannot work is refused on reading the settings, naming the
    setting (it surfaced as an 'unexpected ValueError' from the driver); a judge spec
    refused is quoted with its URL's password masked."""
    refused = cli_in_process("migrate", env={"SRE_JUDGE_DATABASE_URL": url})
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()  # one line, naming the variable
    assert "SRE_JUDGE_DATABASE_URL" in line and why in line
    assert "s3cret-pw" not in refused.stderr
    spec = "openai:gpt-4o@https://svc:hunter2secret@judge.example/v1"
    refused = cli_in_process("migrate", env={"SRE_JUDGE_JUDGE": spec})
    assert refused.returncode == 2 and "judge" in refused.stderr
    assert "hunter2secret" not in refused.stderr and "svc:***@" in refused.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://judge@db.example:99999/app", "'postgresql://judge@db.example:99999/app'"),
        ("postgresql://judge:s3cret-pw@db:99999/app", "'postgresql://judge:***@db:99999/app'"),
        ("mysql://judge@db/app", "'mysql://judge@db/app'"),
    ],
)
def test_a_refused_database_url_shows_its_role_and_masks_its_password(url: str, shown: str) -> None:
    """The refusal quotes the URL as ``config show`` prints it: the database's user, its
    role, shown (the operator sees which URL is at fault), its password masked; the
    example of a supported URL it gives reads as written."""
    line = _refusal_line(cli_in_process("config", "show", env={"SRE_JUDGE_DATABASE_URL": url}))
    assert line.startswith("error: invalid configuration: SRE_JUDGE_DATABASE_URL: "), line
    assert shown in line and "s3cret-pw" not in line, line
    if url.startswith("mysql"):
        assert "(postgresql://user@host:5432/sre_judge)" in line, line


def test_a_refused_judge_spec_masks_a_token_given_as_its_user() -> None:
    """A user alone in a judge's base URL is a token (sent as Basic credentials): masked
    in the refusal, as in every URL shown but a database's."""
    spec = "openai:m@http://t0k3n-alone@judge.example:99999/v1"
    line = _refusal_line(cli_in_process("config", "show", env={"SRE_JUDGE_JUDGE": spec}))
    assert "SRE_JUDGE_JUDGE" in line and "http://***@judge.example" in line, line
    assert "t0k3n-alone" not in line, line


def _refusal_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a command refused as bad usage (exit 2)."""
    assert done.returncode == 2, (done.returncode, done.stderr[-300:])
    (line,) = done.stderr.strip().splitlines()
    return line


def test_a_database_password_holding_a_slash_is_taken_and_masked() -> None:
    """A database password may hold any character SQLAlchemy reads in a URL, ``/`` among
    them (``openssl rand -base64`` writes it): the URL is taken, ``config show`` prints it
    with its password masked, and so does the error that refuses such a URL."""
    url = "postgresql+psycopg://judge:s3cr/et@db.internal:5432/sre_judge"
    done = cli_in_process("config", "show", "--format", "json", env={"SRE_JUDGE_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["SRE_JUDGE_DATABASE_URL"]
    assert shown == "postgresql+psycopg://judge:***@db.internal:5432/sre_judge"
    bad_port = url.replace(":5432/", ":notaport/")
    refused = cli_in_process("migrate", env={"SRE_JUDGE_DATABASE_URL": bad_port})
    assert refused.returncode == 2 and "port" in refused.stderr, refused.stderr
    assert "s3cr" not in refused.stderr and "judge:***@db.internal" in refused.stderr


def test_a_setting_that_is_no_number_is_one_line_naming_the_variable() -> None:
    """Not pydantic's four lines naming the field and a link: the variable to fix."""
    refused = cli_in_process("config", "show", env={"SRE_JUDGE_JUDGE_CONCURRENCY": "abc"})
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: invalid configuration: SRE_JUDGE_JUDGE_CONCURRENCY: ")
    assert "pydantic" not in line


def test_a_database_that_does_not_answer_is_named_not_blamed_on_a_migration() -> None:
    """``migrate`` against a database that refuses connections: the error says where it
    looked (the setting) and that it may be unreachable, not only "run migrate"."""
    down = "postgresql+psycopg://judge@127.0.0.1:1/judge"
    refused = cli_in_process("migrate", env={"SRE_JUDGE_DATABASE_URL": down})
    assert refused.returncode == 1, refused.stderr
    assert "reachable at SRE_JUDGE_DATABASE_URL" in refused.stderr
    # the grammar's one line (click writes "Error: ..." for a failure of the work)
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: cannot read the database")


def test_no_database_is_refused_in_the_grammars_one_line(tmp_path: Path) -> None:
    """A reading command where no database is: exit 2, ``error: ...``, nothing made."""
    url = f"sqlite:///{tmp_path / 'none.db'}"
    refused = cli_in_process("report", "pass-rates", env={"SRE_JUDGE_DATABASE_URL": url})
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: no database at ") and not (tmp_path / "none.db").exists()


@pytest.mark.postgres
def test_a_database_a_newer_release_migrated_is_refused_in_one_line(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """``migrate`` (as ``serve`` on start) on a schema this release does not know: a plain
    refusal naming both revisions, not Alembic's "unexpected CommandError"; a ``worker``
    (which never migrates) refuses too, where it used to start and grade on it."""
    env = {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "sre-judge.key"),
        "SRE_JUDGE_AUDIT_CHECKPOINT": "off",
    }
    for command in ("migrate", "worker"):
        with at_revision(engine, "0099"):
            refused = cli_in_process(command, env=env)
        assert refused.returncode == 1, (command, refused.stderr)
        line = refused.stderr.strip().splitlines()[-1]  # (a worker logs in JSON before)
        assert (
            line.startswith("error: ")
            and "0099" in line
            and str(head_revision()) in line
            and "newer release" in line
        )
        assert "unexpected" not in line


@pytest.mark.postgres
def test_a_worker_on_a_database_not_yet_migrated_says_to_migrate(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A worker of a newer release beside an older database: it names the migration to
    run instead of failing on the first missing column."""
    env = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_AUDIT_CHECKPOINT": "off"}
    with at_revision(engine, "0027"):
        refused = cli_in_process("worker", env=env)
    assert refused.returncode == 1, refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert "0027" in line and "sre-judge migrate" in line
