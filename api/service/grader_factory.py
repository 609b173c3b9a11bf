"""One place that turns the settings into a Grader, for the service and the commands."""

from __future__ import annotations

from api.service.settings import Settings
from judge.backends.base import JudgeBackend
from judge.cache import JudgeCache
from judge.calls import SamplingParams
from judge.grader import Grader
from judge.retry import RetryPolicy

__all__ = ["grader_for"]


def grader_for(
    settings: Settings, backend: JudgeBackend, *, cache: JudgeCache | None = None
) -> Grader:
    """A grader with the configured sampling, retries, limits and asking mode."""
    return Grader(
        backend,
        params=SamplingParams(
            temperature=settings.judge_temperature,
            seed=settings.judge_seed,
            max_tokens=settings.judge_max_tokens,
            # Ollama gets the configured window as num_ctx; other servers know their own
            num_ctx=settings.judge_context_tokens if backend.name == "ollama" else None,
        ),
        retry=RetryPolicy(max_attempts=settings.judge_max_attempts),
        max_text_bytes=settings.max_text_bytes,
        context_tokens=settings.judge_context_tokens,
        context_overflow=settings.context_overflow,
        cache=cache,
        asking=settings.judge_asking,
        reply_format=settings.judge_reply_format,
        ask_as=settings.judge_ask_as,
    )
