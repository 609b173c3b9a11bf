"""Settings from the environment (prefix ``SRE_JUDGE_``) and the command line.

Nothing is read at import: call ``Settings()`` where the settings are needed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from judge.rubric import DEFAULT_RUBRIC_DIR
from judge.spec import parse_judge_spec

__all__ = ["DEFAULT_JUDGE", "Settings"]

#: the judge used when none is configured: a small local model served by Ollama
DEFAULT_JUDGE = "ollama:qwen2.5:7b-instruct"


class Settings(BaseSettings):
    """Every setting of the service, with its default."""

    model_config = SettingsConfigDict(env_prefix="SRE_JUDGE_", extra="ignore")

    database_url: str = Field(
        default="sqlite+aiosqlite:///./sre-judge.db",
        description="SQLAlchemy URL; SQLite file in the working directory by default",
    )
    judge: str = Field(default=DEFAULT_JUDGE, description="BACKEND:MODEL[@BASE_URL]")
    rubric: str = Field(default="sregym-rca", description="default rubric id")
    rubric_dir: Path = Field(default=DEFAULT_RUBRIC_DIR, description="folder of rubric YAML files")
    judge_concurrency: int = Field(default=4, ge=1, le=256, description="calls per judge endpoint")
    workers: int | None = Field(
        default=None, ge=0, le=256, description="grading workers in serve (default: concurrency)"
    )
    judge_timeout: float = Field(default=120.0, gt=0, description="seconds per judge attempt")
    judge_max_attempts: int = Field(default=4, ge=1, le=20, description="attempts per judge call")
    judge_temperature: float = Field(default=0.0, ge=0, le=2)
    judge_seed: int | None = Field(default=0)
    judge_max_tokens: int = Field(default=1536, ge=16)
    max_text_bytes: int = Field(
        default=64 * 1024, ge=1024, description="largest diagnosis or ground truth, in bytes"
    )
    max_body_bytes: int = Field(default=256 * 1024, ge=4096, description="largest request body")
    host: str = Field(default="127.0.0.1")
    port: int = Field(default=8000, ge=0, le=65535)
    allow_anonymous: bool = Field(
        default=False, description="no token needed; refused unless bound to 127.0.0.1"
    )
    lease_seconds: float = Field(default=300.0, gt=0, description="how long a worker owns a claim")
    poll_seconds: float = Field(default=0.5, gt=0, description="worker poll interval when idle")
    judge_retry_seconds: float = Field(
        default=15.0, gt=0, description="wait before retrying a grading whose judge was unreachable"
    )

    @field_validator("judge")
    @classmethod
    def _valid_judge(cls, value: str) -> str:
        parse_judge_spec(value)
        return value

    @property
    def worker_count(self) -> int:
        """Grading workers inside ``serve``: enough to use the judge concurrency."""
        return self.judge_concurrency if self.workers is None else self.workers
