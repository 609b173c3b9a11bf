"""Judge specs: ``BACKEND:MODEL[@BASE_URL]``.

The model may contain colons (``ollama:qwen3:8b``); everything after the last ``@``
is the base URL (``openai:qwen2.5-1.5b@http://127.0.0.1:8080/v1``). Without a base
URL the clients' own defaults and variables apply (``OLLAMA_HOST``,
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from judge.errors import JudgeSpecError

__all__ = ["BACKEND_NAMES", "SPEC_FORMS", "JudgeSpec", "parse_judge_spec"]

BACKEND_NAMES = ("ollama", "openai", "scripted")

SPEC_FORMS = (
    "accepted forms: ollama:MODEL[@BASE_URL] (e.g. ollama:qwen3:8b@http://127.0.0.1:11434), "
    "openai:MODEL[@BASE_URL] (e.g. openai:gpt-4o-mini or "
    "openai:qwen2.5-1.5b@http://127.0.0.1:8080/v1), "
    "scripted:pass|fail|garbage (a scripted judge for demos and tests, not a model)"
)


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """A parsed judge spec."""

    backend: str
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        text = f"{self.backend}:{self.model}"
        return f"{text}@{self.base_url}" if self.base_url else text


def parse_judge_spec(text: str) -> JudgeSpec:
    """Parse ``BACKEND:MODEL[@BASE_URL]``; raise JudgeSpecError naming the accepted forms."""
    raw = text.strip()
    backend, sep, rest = raw.partition(":")
    if not sep or not backend or not rest:
        raise JudgeSpecError(f"malformed judge spec {text!r}; {SPEC_FORMS}")
    backend = backend.lower()
    if backend not in BACKEND_NAMES:
        raise JudgeSpecError(f"unknown judge backend {backend!r}; {SPEC_FORMS}")
    model, at, base_url = rest.rpartition("@")
    if not at:
        model, base_url = rest, ""
    model = model.strip()
    if not model:
        raise JudgeSpecError(f"judge spec {text!r} names no model; {SPEC_FORMS}")
    if at:
        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise JudgeSpecError(
                f"judge spec {text!r} has base URL {base_url!r}, not an http(s) URL; {SPEC_FORMS}"
            )
    return JudgeSpec(backend=backend, model=model, base_url=base_url.rstrip("/") or None)
