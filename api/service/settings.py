"""Settings from the environment (prefix ``SRE_JUDGE_``) and the command line.

Nothing is read at import: call ``Settings()`` where the settings are needed.

Why this module is long (about 620 lines): it is the one list of the service's public
settings (CONTRACT.md), each field with its default, bounds and description, which
``config show`` and the docs' table are checked against; splitting the list would make
two places to look a setting up.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from judge.masking import MASK, mask_passwords, mask_query
from judge.profiles import read_profiles
from judge.rubric import DEFAULT_RUBRIC_DIR
from judge.spec import panel_spec, parse_judge_spec, parse_panel, recorded_judge

if TYPE_CHECKING:
    from judge.backends.streaming import StreamLimits

__all__ = [
    "DEFAULT_JUDGE",
    "Settings",
    "checkpoint_target_fault",
    "mask_passwords",
    "mask_url",
    "reply_budget_fault",
    "with_password",
]

#: the judge used when none is configured: a small local model served by Ollama
DEFAULT_JUDGE = "ollama:qwen2.5:7b-instruct"


#: the password of one URL SQLAlchemy cannot read: up to the last ``@``, before the host
_LAST_AT_PASSWORD = re.compile(r"(://[^/\s:@]*:).*@", re.DOTALL)
#: the longest a duration setting may be: a time moved by more overflows a clock
MAX_DURATION_SECONDS = 365 * 86400.0
#: the duration settings (seconds)
_DURATIONS = (
    "judge_timeout", "judge_first_token_seconds", "judge_idle_seconds", "lease_seconds",
    "poll_seconds", "regrade_batch_poll_seconds", "webhook_timeout_seconds",
    "webhook_retry_seconds", "webhook_give_up_seconds", "judge_retry_seconds",
    "audit_checkpoint_seconds", "shutdown_seconds", "judge_digest_seconds", "canary_interval",
)  # fmt: skip
#: the databases the service runs on (the driver is chosen for each: ``storage.engine``)
_DATABASES = ("sqlite", "postgresql", "postgres")
#: a URL's scheme at the start of a value (``s3://``, ``https://``)
_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://")


def mask_url(url: str) -> str:
    """The database URL ``url`` as it may be printed: its password, as SQLAlchemy reads it,
    and every credential its query carries (libpq's ``?password=``) replaced by ``***``
    (a user without a password, the database role, is shown); a text SQLAlchemy cannot
    read has its password masked up to its last ``@``, its role shown as well."""
    from sqlalchemy.engine import make_url  # here: the command line starts without sqlalchemy
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return mask_query(_LAST_AT_PASSWORD.sub(rf"\g<1>{MASK}@", url))
    if parsed.password is None:  # shown as given: a database's user alone is its role
        return mask_query(url)
    return mask_passwords(parsed.render_as_string(hide_password=True))


def reply_budget_fault(max_tokens: int, window: int, *, judge: str = "", source: str = "") -> str:
    """Why a reply budget of ``max_tokens`` cannot be asked of a judge (``judge``, when
    named) whose context window is ``window`` tokens; ``source`` says where either came
    from when not from the settings (a judge profile, a default)."""
    of = f"judge {judge}: " if judge else ""
    return (
        f"{of}SRE_JUDGE_JUDGE_MAX_TOKENS ({max_tokens}) must be below "
        f"SRE_JUDGE_JUDGE_CONTEXT_TOKENS ({window}){source}: a reply that may fill the "
        "judge's context window leaves no room for the prompt, and every grading would end "
        "unscored (context_overflow)"
    )


def checkpoint_target_fault(value: str) -> str | None:
    """Why ``value`` is no checkpoint target, or None: a file or an http(s) URL is; a URL
    of another scheme (``s3://``, a typo such as ``htps://``) is no file to append to,
    nor a witness that takes a POST."""
    scheme = _SCHEME.match(value)
    if scheme is None or scheme.group(1).lower() in ("http", "https"):
        return None
    return f"{scheme.group(1)}:// is not a checkpoint target: give a file path or an http(s) URL"


def with_password(url: str, password_file: Path) -> str:
    """``url`` with the password read from ``password_file`` (trailing newline dropped)."""
    from sqlalchemy.engine import make_url  # here: the command line starts without sqlalchemy

    try:
        password = password_file.read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise ValueError(f"cannot read {password_file}: {exc.strerror}") from None
    if not password:
        raise ValueError(f"{password_file} is empty")
    return make_url(url).set(password=password).render_as_string(hide_password=False)


class Settings(BaseSettings):
    """Every setting of the service, with its default."""

    # no float setting is infinite or NaN (a lease of inf seconds failed every claim)
    model_config = SettingsConfigDict(env_prefix="SRE_JUDGE_", extra="ignore", allow_inf_nan=False)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The arguments, then the environment. No ``.env`` file is read (none ever was);
        its source still walked every field: 2.9 ms a construction with it, 1.6 without."""
        return init_settings, env_settings

    database_url: str = Field(
        default="sqlite:///./sre-judge.db",
        description="SQLAlchemy URL; SQLite file in the working directory by default",
    )
    judge: str = Field(default=DEFAULT_JUDGE, description="BACKEND:MODEL[@BASE_URL]")
    rubric: str = Field(default="sregym-rca", description="default rubric id")
    rubric_dir: Path = Field(default=DEFAULT_RUBRIC_DIR, description="folder of rubric YAML files")
    failure_tags_file: Path = Field(
        default=DEFAULT_RUBRIC_DIR.parent / "vocabularies" / "failure-tags.yaml",
        description="the shipped failure-tag vocabulary (admins add more through the API)",
    )
    review_claim_minutes: float = Field(
        default=30.0, gt=0, le=24 * 60, description="how long a review claim holds by default"
    )
    judge_concurrency: int = Field(default=4, ge=1, le=256, description="calls per judge endpoint")
    workers: int | None = Field(
        default=None, ge=0, le=256, description="grading workers in serve (default: concurrency)"
    )
    judge_timeout: float = Field(
        default=1800.0,
        gt=0,
        description=(
            "overall cap on one judge call, request to last token, in seconds; the reply is "
            "streamed, so a slow judge that keeps answering is judged by the two limits below"
        ),
    )
    judge_first_token_seconds: float = Field(
        default=300.0, gt=0, description="seconds a judge may take to start replying"
    )
    judge_idle_seconds: float = Field(
        default=60.0, gt=0, description="seconds a replying judge may go without a token"
    )
    judge_max_attempts: int = Field(default=4, ge=1, le=20, description="attempts per judge call")
    judge_temperature: float = Field(default=0.0, ge=0, le=2)
    judge_seed: int | None = Field(default=0)
    judge_max_tokens: int = Field(default=1536, ge=16)
    judge_context_tokens: int | None = Field(
        default=None,
        ge=256,
        description=(
            "the judge's context window in tokens (sent to Ollama as num_ctx); default: "
            "what an OpenAI-compatible server's /v1/models says, else unchecked"
        ),
    )
    judge_asking: Literal["single", "per_question", "extraction"] | None = Field(
        default=None,
        description=(
            "single (one call), per_question (a call per question) or extraction (claims "
            "extracted, compared in code, the rest per question); unset: the rubric's "
            "own choice, else the judge's profile, else single"
        ),
    )
    judge_reply_format: Literal["full", "compact"] | None = Field(
        default=None,
        description=(
            "full (reasoning, evidence, answer, confidence) or compact (answer, and the "
            "quote of [quote] questions) judge replies; unset: the rubric's own choice, "
            "else the judge's profile, else full"
        ),
    )
    judge_profile: Literal["auto", "none"] = Field(
        default="auto",
        description=(
            "auto: a judge model with a measured profile (judge/data/judge_profiles.toml) "
            "is asked its way where neither these settings nor the rubric choose; none: off"
        ),
    )
    judge_profiles_file: Path | None = Field(
        default=None,
        description=(
            "a TOML file of judge profiles (the shape of judge/data/judge_profiles.toml), "
            "matched before the shipped ones: per model, its asking, reply format, "
            "temperature, max_tokens and context_tokens where no setting is given"
        ),
    )
    judge_ask_as: Literal["as_written", "positive"] | None = Field(
        default=None,
        description=(
            "positive: ask every question that has a positive_text in that wording, "
            "answer inverted in code; as_written: none; unset: each question's ask_as"
        ),
    )
    judge_samples: int = Field(
        default=1, ge=1, le=32, description="ask each judge this many times; majority per question"
    )
    judge_sample_temperature: float = Field(
        default=0.7, gt=0, le=2, description="temperature of each sample when judge_samples > 1"
    )
    panel: str | None = Field(
        default=None,
        description="comma-separated judge specs voting per question, used instead of judge",
    )
    context_overflow: Literal["unscored", "truncate"] = Field(
        default="unscored",
        description="a prompt over the context window: unscored (context_overflow) or cut",
    )
    ground_truth_budget_chars: int = Field(
        default=2000,
        ge=1,
        description=(
            "characters of ground truth every prompt is counted with when fitting the judge's "
            "context window, whatever the ground truth's length (a longer one counts in "
            "whole multiples of this), so whether a diagnosis fits depends on the diagnosis"
        ),
    )
    max_text_bytes: int = Field(
        default=64 * 1024, ge=1024, description="largest diagnosis or ground truth, in bytes"
    )
    max_body_bytes: int = Field(default=256 * 1024, ge=4096, description="largest request body")
    import_max_bytes: int = Field(
        default=64 * 1024 * 1024, ge=4096, description="largest upload to POST /v1/imports"
    )
    import_max_unpacked_bytes: int = Field(
        default=1024 * 1024 * 1024, ge=4096, description="largest size an import archive unpacks to"
    )
    host: str = Field(default="127.0.0.1")
    port: int = Field(default=8000, ge=0, le=65535)
    processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description="serve processes sharing the port and the database, each with its "
        "workers; above 1 needs PostgreSQL",
    )
    allow_anonymous: bool = Field(
        default=False, description="no token needed; refused unless bound to 127.0.0.1"
    )
    lease_seconds: float = Field(default=300.0, gt=0, description="how long a worker owns a claim")
    poll_seconds: float = Field(default=0.5, gt=0, description="worker poll interval when idle")
    regrade_batch_poll_seconds: float = Field(
        default=30.0,
        gt=0,
        description="how often the state of regrade batches (OpenAI Batch API) is asked",
    )
    judge_price_prompt: float | None = Field(
        default=None,
        ge=0,
        description="USD per million prompt tokens of the judge (live); a regrade estimate "
        "shows the cost, and the Batch API's at half the price",
    )
    judge_price_completion: float | None = Field(
        default=None, ge=0, description="USD per million completion tokens of the judge (live)"
    )
    webhook_allow_hosts: str = Field(
        default="",
        description="webhook hosts (comma-separated) allowed though loopback or private",
    )
    webhook_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="how long one webhook send may take, resolving its host included",
    )
    webhook_retry_seconds: float = Field(
        default=5.0, gt=0, description="first webhook retry delay; doubles each attempt (max 1 h)"
    )
    webhook_give_up_seconds: float = Field(
        default=86400.0, gt=0, description="a webhook delivery failing this long is dead-lettered"
    )
    webhook_circuit_failures: int = Field(
        default=5,
        ge=1,
        description="failed webhook attempts in a row that open an endpoint's circuit: none "
        "of its deliveries is tried until its backoff has passed",
    )
    judge_retry_seconds: float = Field(
        default=15.0, gt=0, description="wait before retrying a grading whose judge was unreachable"
    )
    pending_judge: Literal["follow", "pin"] = Field(
        default="follow",
        description=(
            "pending gradings bound to a judge that is no longer configured: follow (move "
            "to the configured judge on start and when claimed, each move audited) or pin "
            "(keep their judge until an admin moves them: sre-judge gradings move-judge)"
        ),
    )
    database_password_file: Path | None = Field(
        default=None, description="file holding the database password (e.g. a Docker secret)"
    )
    secret_key_file: Path = Field(
        default=Path("sre-judge.key"),
        description=(
            "the service key (keys the audit log's hashes, signs cursors); serve creates it "
            "(mode 0600) when missing. Keep it outside the database and its backups"
        ),
    )
    secret_key: SecretStr | None = Field(
        default=None, description="the service key itself, instead of secret_key_file"
    )
    audit_checkpoint: str | None = Field(
        default=None,
        description=(
            "where serve writes signed checkpoints of the audit log's head: a file "
            "(JSON Lines, appended) or an http(s) URL that receives a POST; keep it "
            "outside the database. Unset: <database>.checkpoints.jsonl beside a SQLite "
            "file, <key folder>/<database name>.checkpoints.jsonl for PostgreSQL; off: none"
        ),
    )
    audit_checkpoint_seconds: float = Field(
        default=300.0, gt=0, description="how often serve writes an audit checkpoint"
    )
    bootstrap_admin_token_file: Path | None = Field(
        default=None,
        description="file holding an admin token that serve registers (hashed) if absent",
    )
    shutdown_seconds: float = Field(
        default=30.0, ge=0, description="on SIGTERM, how long in-flight gradings may finish"
    )
    rate_limit_per_minute: int = Field(
        default=0, ge=0, description="submissions per minute per token (0: no limit)"
    )
    max_pending: int = Field(
        default=0, ge=0, description="pending gradings over which submissions get 503 (0: none)"
    )
    log_format: Literal["json", "text"] = Field(default="json", description="log line format")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO")
    qualify_min_kappa: float = Field(
        default=0.6, ge=-1, le=1, description="verdict kappa a calibration run needs to qualify"
    )
    qualify_max_false_pass: float = Field(
        default=0.05, ge=0, le=1, description="largest share of gold fails a qualified judge passes"
    )
    provisional_review_rate: float = Field(
        default=0.1, ge=0, le=1, description="share of provisional gradings sent to review"
    )
    cache_unverified_judge: bool = Field(
        default=False,
        description=(
            "reuse cached judge replies in live gradings even when the judge reports no "
            "model digest (nothing then proves the same model answers under its name); "
            "regrades reuse them either way"
        ),
    )
    judge_digest_seconds: float = Field(
        default=30.0,
        ge=0,
        description=(
            "how long a judge's model digest is trusted before it is asked again (0: "
            "before every use); also asked again after a failed call or a new fingerprint"
        ),
    )
    canary_interval: float = Field(
        default=0,
        ge=0,
        description=(
            "seconds between drift canary runs of the service's judge (0: off; runs on "
            "demand still work)"
        ),
    )
    canary_budget: int = Field(
        default=24, ge=1, le=10_000, description="judge calls one drift canary run may make"
    )
    canary_set: Path | None = Field(
        default=None,
        description=(
            "a labelled set (calibration format) for the drift canary; default a stratified "
            "part of the shipped calibration set"
        ),
    )
    canary_max_changed: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description=(
            "share of a canary run's answers that may differ from the baseline run's "
            "before the judge is demoted, used only when its calibration run measured no "
            "run-to-run noise (calibration grades the canary's items twice to measure it)"
        ),
    )
    pass_policy: Literal["qualified", "unflagged"] = Field(
        default="qualified",
        description=(
            "which passes stand without a human: qualified (by a judge a calibration run "
            "qualified, with no injection signal) or unflagged (any judge, no injection "
            "signal); every other pass is held for an adjudicator"
        ),
    )
    confirm_judge: str | None = Field(
        default=None,
        description=(
            "a second judge of a different model, BACKEND:MODEL[@BASE_URL]: a pass held only "
            "for its judge (not qualified, a reply the checks contradict) is released when "
            "this judge passes the diagnosis too, with no injection signal"
        ),
    )
    inline_ground_truth: Literal["allow", "per_token", "deny"] = Field(
        default="allow",
        description=(
            "may a submission carry its own ground truth: allow, per_token (tokens an admin "
            "granted it, and admins), deny (registered scenarios only)"
        ),
    )
    submitter_rubrics: str = Field(
        default="",
        description=(
            "rubric ids (comma-separated) a submitter token may ask for besides the default "
            "rubric; * for any. Adjudicators and admins may ask for any"
        ),
    )
    submitter_view: Literal["verdict", "answers"] = Field(
        default="verdict",
        description=(
            "what a submitter sees of a grading against a registered scenario: verdict "
            "(status and pass/fail/held) or answers (also the nine effective answers, the "
            "dimensions and the composite); never the judge's own answers, evidence or checks"
        ),
    )
    submitter_attempts_per_scenario_per_hour: int = Field(
        default=20,
        ge=0,
        description=(
            "submissions one submitter token may make against one registered scenario "
            "within an hour, then 429 with Retry-After (0: no limit; an inline ground "
            "truth is not counted)"
        ),
    )
    self_preference: Literal["warn", "refuse"] = Field(
        default="warn",
        description="judge and agent of one model family: warn (review reason) or refuse (422)",
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, url: str) -> str:
        """A URL SQLAlchemy can connect with, read by SQLAlchemy's own parser (a password
        may hold a ``/``): a scheme, a port that is a number, a database the service runs
        on. The error quotes the URL with its password masked."""
        from sqlalchemy.engine import make_url  # here: the command line starts without it
        from sqlalchemy.exc import ArgumentError

        shown = mask_url(url)
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ValueError(
                f"{shown!r} is not a database URL (e.g. sqlite:///./sre-judge.db or "
                "postgresql+psycopg://user@host:5432/sre_judge)"
            ) from None
        except ValueError:  # SQLAlchemy's int() of the port
            parsed = None
        if parsed is None or not 0 <= (parsed.port or 0) <= 65535:
            raise ValueError(f"{shown!r} has a port that is not a number from 0 to 65535")
        backend = parsed.get_backend_name()
        if backend not in _DATABASES:
            raise ValueError(
                f"{shown!r} names {backend}, a database the service does not run on: use "
                "SQLite (sqlite:///./sre-judge.db) or PostgreSQL "
                "(postgresql://user@host:5432/sre_judge)"
            )
        return url

    @field_validator("audit_checkpoint")
    @classmethod
    def _checkpoint_target(cls, value: str | None) -> str | None:
        """A file, an http(s) URL (:func:`checkpoint_target_fault`) or ``off``."""
        fault = checkpoint_target_fault(value or "")
        if fault is not None:
            raise ValueError(f"{fault}, or off")
        return value

    @field_validator("judge")
    @classmethod
    def _valid_judge(cls, value: str) -> str:
        """A spec that parses, kept without surrounding blanks (an env file's trailing
        blank), as a panel's members are: what readers of the spec see is what was parsed."""
        parse_judge_spec(value)
        return value.strip()

    @field_validator("judge_profiles_file")
    @classmethod
    def _readable_profiles(cls, value: Path | None) -> Path | None:
        if value is not None:
            read_profiles(value)  # a file that cannot be used stops the start, saying why
        return value

    @field_validator("panel")
    @classmethod
    def _valid_panel(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return ",".join(parse_panel(value))

    @property
    def panel_specs(self) -> list[str]:
        """The panel's judge specs, or an empty list when no panel is set."""
        return parse_panel(self.panel) if self.panel else []

    @property
    def grading_members(self) -> list[str]:
        """The judges new gradings are asked of, one by one: each member of
        ``SRE_JUDGE_PANEL`` when set, else ``SRE_JUDGE_JUDGE`` (what qualifies and
        what drifts is each of them)."""
        return self.panel_specs or [self.judge]

    def grading_judge(self) -> tuple[str, str, str]:
        """(spec, backend, model) recorded with a new grading: the panel or the judge."""
        return recorded_judge(panel_spec(self.panel_specs) if self.panel else self.judge)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("judge_seed", mode="before")
    @classmethod
    def _empty_seed(cls, value: object) -> object:
        """``SRE_JUDGE_JUDGE_SEED=`` (empty): no seed is sent."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator(*_DURATIONS)
    @classmethod
    def _a_clock_holds_it(cls, value: float) -> float:
        """A duration a time can be moved by (``now + lease``): at most a year."""
        if value > MAX_DURATION_SECONDS:
            raise ValueError(f"at most {MAX_DURATION_SECONDS:.0f} seconds (a year)")
        return value

    @field_validator("confirm_judge")
    @classmethod
    def _valid_confirm_judge(cls, value: str | None) -> str | None:
        """As the judge: a spec that parses, kept without surrounding blanks."""
        if value is None:
            return None
        parse_judge_spec(value)
        return value.strip()

    @field_validator("host")
    @classmethod
    def _a_host_named(cls, value: str) -> str:
        """A host without surrounding blanks, never empty: an empty host (an env file's
        blank, an unset variable in compose) listens on every interface. Every interface
        is asked for by name: ``0.0.0.0`` or ``::``."""
        if not value.strip():
            raise ValueError(
                "empty (also as --host): name the address to listen on, 127.0.0.1 by "
                "default, or 0.0.0.0 or :: for every interface"
            )
        return value.strip()

    @model_validator(mode="after")
    def _room_for_a_prompt(self) -> Settings:
        """Both set, the reply budget is smaller than the context window: one as large
        as the window leaves no room for a prompt, and every grading would end unscored
        (``context_overflow``). Where a judge profile gives one of them, a process of
        the service checks its judges when it starts
        (``api.service.grader_factory.check_reply_budget``)."""
        window = self.judge_context_tokens
        if (
            window is not None
            and "judge_max_tokens" in self.model_fields_set
            and self.judge_max_tokens >= window
        ):
            raise ValueError(reply_budget_fault(self.judge_max_tokens, window))
        return self

    @model_validator(mode="after")
    def _confirm_judge_differs(self) -> Settings:
        """A confirming judge of the judge's own model would confirm nothing."""
        if self.confirm_judge is not None:
            models = {parse_judge_spec(spec).model for spec in self.grading_members}
            if parse_judge_spec(self.confirm_judge).model in models:
                raise ValueError(
                    "SRE_JUDGE_CONFIRM_JUDGE: must be a judge of another model than the "
                    f"judge's ({', '.join(sorted(models))})"
                )
        return self

    @model_validator(mode="after")
    def _database_password(self) -> Settings:
        """Put the password of ``database_password_file`` into ``database_url``."""
        if self.database_password_file is not None:
            given = "database_url" in self.model_fields_set
            try:
                self.database_url = with_password(self.database_url, self.database_password_file)
            except ValueError as exc:
                raise ValueError(f"SRE_JUDGE_DATABASE_PASSWORD_FILE: {exc}") from None
            if not given:  # still the default URL (config show says so), with a password
                self.model_fields_set.discard("database_url")
        return self

    def stream_limits(self) -> StreamLimits:
        """How long a judge's streamed reply may take, from these settings."""
        # imported here: it loads httpx, which reading the settings alone does not need
        from judge.backends.streaming import StreamLimits

        return StreamLimits(
            first_token=self.judge_first_token_seconds,
            idle=self.judge_idle_seconds,
            total=self.judge_timeout,
        )

    @property
    def worker_count(self) -> int:
        """Grading workers inside ``serve``: enough to use the judge concurrency."""
        return self.judge_concurrency if self.workers is None else self.workers
