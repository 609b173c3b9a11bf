"""The protocol every judge backend follows."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from judge.calls import Completion, JudgeRequest

__all__ = ["ContextWindowAware", "JudgeBackend"]


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
