"""Logs: one JSON object a line, with the request, grading and judge call they concern.

``configure_logging`` installs one handler on the root logger; the service's own
loggers, uvicorn's and Litestar's all go through it. Context comes from context
variables (``bind_log_context``): the request id (set by the request middleware),
the grading id and judge call (set by the workers) are added to every line written
while they are bound.

Nothing secret is written: every line is scrubbed, after formatting and so
tracebacks included, of bearer tokens, ``srej_`` API tokens, ``sk-`` style keys,
the credentials of URLs (masked ``***`` by :mod:`judge.masking`, as everywhere a URL is
shown), and the literal values registered with ``register_secret`` (the
bootstrap token, the database password, ``OPENAI_API_KEY``). Diagnoses and ground
truths are never passed to a logger in the first place.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from api.service.settings import Settings
from api.terminal import inert_json, terminal_text
from judge.masking import mask_passwords
from judge.verdict import GradingResult

__all__ = [
    "REDACTED",
    "ContextFilter",
    "RedactingJsonFormatter",
    "bind_log_context",
    "configure_logging",
    "log_grading",
    "redact",
    "register_secret",
]

REDACTED = "[redacted]"

#: request_id, grading_id, judge_call: what the current line is about
_CONTEXT: ContextVar[dict[str, str] | None] = ContextVar("sre_judge_log_context", default=None)

#: literal secret values to scrub wherever they appear
_SECRETS: set[str] = set()

_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"),
    re.compile(r"srej_[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|password|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]+"),
)

#: the environment variables whose values are secrets of the judge clients
SECRET_ENVIRONMENT = ("OPENAI_API_KEY", "OLLAMA_API_KEY")

#: loggers too chatty at INFO (one line per HTTP request to the judge)
_QUIET = ("httpx", "httpcore", "openai", "ollama", "sqlalchemy.engine")


def register_secret(value: str | None) -> None:
    """Scrub ``value`` from every log line from now on (values under 6 characters are ignored)."""
    if value and len(value.strip()) >= 6:
        _SECRETS.add(value.strip())


def redact(text: str) -> str:
    """``text`` with known secrets and secret-looking values replaced by ``[redacted]``,
    and the credentials of every URL in it masked as everywhere a URL is shown
    (:func:`judge.masking.mask_passwords`: ``http://user:***@host``)."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(_keep_prefix, text)
    return mask_passwords(text)


def _keep_prefix(match: re.Match[str]) -> str:
    groups = [g for g in match.groups() if g is not None]
    return f"{groups[0] if groups else ''}{REDACTED}"


@contextmanager
def bind_log_context(**values: str | None) -> Iterator[None]:
    """Add ``values`` (None ones skipped) to every log line written inside the block."""
    current = dict(_CONTEXT.get() or {})
    current.update({k: v for k, v in values.items() if v is not None})
    token = _CONTEXT.set(current)
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class ContextFilter(logging.Filter):
    """Copies the bound context (request id, grading id, judge call) onto each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keep the record; only add attributes."""
        for key, value in (_CONTEXT.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        if hasattr(record, "color_message"):  # uvicorn's copy of the message, with ANSI colors
            del record.color_message
        return True


class RedactingJsonFormatter(JsonFormatter):
    """python-json-logger's formatter, every text value scrubbed by :func:`redact` before
    it is encoded (the patterns read plain text: run over the encoded line, a value's
    match took the backslash JSON puts before a quote, closed the string early and left
    the rest of the secret outside it).

    JSON escapes the C0 controls (ESC included); what it leaves raw that a terminal would
    act on (a log read with ``docker logs`` or ``tail``: DEL, the C1 controls, the
    bidirectional overrides; ``api.terminal.UNSAFE_CHARACTERS``) or that a reader would
    take for the end of a line (U+2028, U+2029) is written (``api.terminal.inert_json``)
    as ``\\u`` escapes too: the line still parses to the same values."""

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        """The record's values with secrets removed from every text in them."""
        return {key: _redacted(value) for key, value in log_data.items()}

    def format(self, record: logging.LogRecord) -> str:
        """One JSON line, secrets removed, nothing in it that acts on a terminal."""
        return inert_json(super().format(record))


def _redacted(value: Any) -> Any:
    """``value`` with :func:`redact` applied to every text in it (lists, dicts)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    if isinstance(value, BaseException):  # encoded as its text: scrub that
        return redact(f"{type(value).__name__}: {value}")
    return value


class _RedactingTextFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        """The line before a traceback: one line whatever the message holds (a newline in
        what a judge or another server said would forge a log line), secrets removed."""
        return terminal_text(redact(super().formatMessage(record)), one_line=True)

    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(f"{k}={v}" for k, v in (_CONTEXT.get() or {}).items())
        line = super().format(record)  # the message line, then any traceback's lines
        # a message may quote what a judge or another server said: shown inert
        return terminal_text(redact(f"{line} {context}" if context else line))


def _formatter(settings: Settings) -> logging.Formatter:
    if settings.log_format == "text":
        return _RedactingTextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    return RedactingJsonFormatter(
        "%(levelname)s %(name)s %(message)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
        json_ensure_ascii=False,
    )


def _database_password(url: str) -> str | None:
    """The password of the database URL (``database_password_file``'s, once read)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).password
    except (ArgumentError, ValueError):
        return None


def configure_logging(settings: Settings, *, stream: Any = None) -> None:
    """Send every log record to ``stream`` (stderr) as JSON lines, secrets scrubbed."""
    for name in SECRET_ENVIRONMENT:
        register_secret(os.environ.get(name))
    register_secret(_database_password(settings.database_url))
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_formatter(settings))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "litestar"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def log_grading(
    logger: logging.Logger,
    result: GradingResult,
    stored: str,
    *,
    pending_reason: str | None = None,
) -> None:
    """Log each judge call of a grading (``grade-1``, ``repair-2``...) and what was stored.

    A deferred grading stays pending: its line says ``status: pending`` with the
    ``pending_reason`` it waits under, not the unscored result that deferred it.
    Counts, timings and outcomes only: never a prompt, a reply or a diagnosis.
    """
    for number, call in enumerate(result.calls, start=1):
        with bind_log_context(judge_call=f"{call.purpose}-{number}"):
            logger.info(
                "judge call %s",
                "cached" if getattr(call, "cached", False) else call.error_code or "ok",
                extra={
                    "backend": call.backend,
                    "model": call.model,
                    "attempts": len(call.attempts),
                    "latency_ms": round(call.latency_ms, 1),
                    "prompt_tokens": call.prompt_tokens,
                    "completion_tokens": call.completion_tokens,
                },
            )
    if stored == "deferred":
        outcome = {"status": "pending", "pending_reason": pending_reason}
    else:
        outcome = {"status": result.status, "unscored_reason": result.unscored_reason}
    logger.info(
        "grading %s",
        stored,
        extra={**outcome, "passed": result.passed, "held": result.held},
    )
