"""The protocol every judge backend follows."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from judge.calls import Completion, JudgeRequest

__all__ = [
    "DIGEST_FINGERPRINTS",
    "ContextWindowAware",
    "DigestAware",
    "EndpointQuirks",
    "JudgeBackend",
    "digest_of_fields",
]


@runtime_checkable
class JudgeBackend(Protocol):
    """A judge model behind some client.

    ``complete`` makes exactly one attempt and raises only ``judge.errors.JudgeCallError``
    subclasses: retries are the caller's business (``judge.retry``), so that every
    attempt can be recorded.
    """

    #: ``ollama``, ``openai`` or ``scripted``
    name: str
    model: str
    base_url: str | None

    async def complete(self, request: JudgeRequest) -> Completion:
        """Send one request and return the server's reply, or raise a JudgeCallError."""
        ...

    async def probe(self) -> None:
        """Check cheaply that the judge server answers; raise a JudgeCallError if not."""
        ...

    async def aclose(self) -> None:
        """Release the client's connections."""
        ...


@runtime_checkable
class ContextWindowAware(Protocol):
    """A backend that can tell its model's context window (an optional capability)."""

    async def context_window(self) -> int | None:
        """The context window in tokens as the server reports it, or None if it does not."""
        ...


@runtime_checkable
class DigestAware(Protocol):
    """A backend that can tell what model is behind its name (an optional capability).

    A name stays while what it names changes: a cloud model is updated behind the same
    id, a local model file is replaced behind the same tag. The digest says which one
    answers (``judge.identity``).
    """

    async def model_digest(self) -> str | None:
        """The digest or fingerprint of the model as the server reports it now, or None
        if it reports none; asked of the server on every call (``judge.identity`` keeps
        it). Raises nothing: a server that cannot be asked now gives None."""
        ...


#: the backends (by ``name``) whose completions' fingerprint is the digest
#: ``model_digest`` reads (Ollama's: the tag's digest, from ``/api/tags``), not a second
#: mark of the model: one of their judges is never known by a ``fingerprint:`` digest,
#: and a digest it cannot read now leaves the one known (``judge.identity``)
DIGEST_FINGERPRINTS = frozenset({"ollama"})


def digest_of_fields(source: str, fields: dict[str, Any]) -> str:
    """``source:sha256:<hex>`` of ``fields`` as canonical JSON (a server's description of
    its model, e.g. ``{"model_path": ...}``)."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return f"{source}:sha256:{hashlib.sha256(canonical.encode()).hexdigest()}"


class StandIn:
    """A backend that stands in for a real one: its name, model, URL and context window,
    answering from somewhere else (a batch's replies, the judge cache) or not at all.

    Subclasses give ``complete``; ``probe`` probes the real judge, and closing closes
    nothing (the real backend is shared).
    """

    def __init__(self, real: JudgeBackend) -> None:
        """Stand in for ``real``."""
        self.name, self.model, self.base_url = real.name, real.model, real.base_url
        self._real = real

    async def context_window(self) -> int | None:
        """The real judge's window, as a live grading sees it (None: unknown)."""
        if isinstance(self._real, ContextWindowAware):
            return await self._real.context_window()
        return None

    async def probe(self) -> None:
        """Probe the real judge."""
        await self._real.probe()

    async def aclose(self) -> None:
        """Nothing of its own to close (the real backend is shared)."""


@dataclass
class EndpointQuirks:
    """What OpenAI-compatible endpoints were found to refuse, by endpoint URL.

    A backend keeps its own unless given one; a backend pool gives all its backends
    the same, so that each endpoint's refusals are learned once.
    """

    #: endpoint -> the response_format type it accepts, for those that refused json_schema
    formats: dict[str, str] = field(default_factory=dict)
    #: endpoints that rejected ``logprobs``
    no_logprobs: set[str] = field(default_factory=set)
