"""The judge cache: reuse a completion for a byte-identical deterministic request.

A completion is reused only when everything that shapes it is identical: the messages
(so the diagnosis, the ground truth and every question's text), the reply schema, the
backend, the model, the endpoint and the sampling settings. Only requests at
temperature 0 are cached; a sampled judge's answers are never reused, because asking
again is the point of sampling.

The rubric asks every question in one call today, so the cache works per call: a
reworded question changes the prompt and re-asks the whole call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from judge.calls import ChatMessage, Completion, JudgeRequest, SamplingParams

__all__ = [
    "CACHE_GRANULARITY",
    "BatchJudgeCache",
    "CacheKeys",
    "JudgeCache",
    "MemoryJudgeCache",
    "cache_key",
]

#: what one cache entry covers: one judge call asking every question of the rubric
CACHE_GRANULARITY = "call"


@runtime_checkable
class JudgeCache(Protocol):
    """Where completions of deterministic judge requests are kept."""

    async def get(self, key: str) -> Completion | None:
        """The completion stored under ``key``, or None."""
        ...

    async def put(self, key: str, completion: Completion) -> None:
        """Keep ``completion`` under ``key`` (a key already present is left alone)."""
        ...


@runtime_checkable
class BatchJudgeCache(JudgeCache, Protocol):
    """A judge cache that can look up many keys at once (per-question asking asks one
    request per question: their entries are read in one query)."""

    async def prefetch(self, keys: Sequence[str]) -> None:
        """Look up ``keys`` now; later ``get`` calls of them answer without a lookup."""
        ...


class CacheKeys:
    """Cache keys of requests sharing one judge, reply schema and sampling settings.

    The shared part is hashed once, so keying many requests (a dry run over thousands
    of submissions) costs little more than hashing their messages.
    """

    def __init__(
        self,
        reply_schema: dict[str, Any],
        params: SamplingParams,
        *,
        backend: str,
        model: str,
        base_url: str | None,
    ) -> None:
        self.cacheable = params.temperature == 0
        shared = {
            "backend": backend,
            "model": model,
            "base_url": base_url,
            "reply_schema": reply_schema,
            "params": params.model_dump(mode="json"),
        }
        canonical = json.dumps(shared, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self._prefix = hashlib.sha256(canonical.encode("utf-8"))

    def key(self, messages: Sequence[ChatMessage]) -> str | None:
        """The key of a request with these messages; None when not cacheable."""
        if not self.cacheable:
            return None
        digest = self._prefix.copy()
        for message in messages:
            for part in (message.role, message.content):
                data = part.encode("utf-8")
                digest.update(len(data).to_bytes(8, "big"))
                digest.update(data)
        return digest.hexdigest()


def cache_key(
    request: JudgeRequest, *, backend: str, model: str, base_url: str | None
) -> str | None:
    """SHA-256 of the request and the judge's identity; None when not cacheable.

    Not cacheable: a temperature above 0 (the judge samples).
    """
    keys = CacheKeys(
        request.reply_schema, request.params, backend=backend, model=model, base_url=base_url
    )
    return keys.key(request.messages)


class MemoryJudgeCache:
    """A judge cache in a dict: for tests and for one-off runs without a database."""

    def __init__(self) -> None:
        self.entries: dict[str, Completion] = {}

    async def get(self, key: str) -> Completion | None:
        """The completion stored under ``key``, or None."""
        return self.entries.get(key)

    async def put(self, key: str, completion: Completion) -> None:
        """Keep the first completion stored under ``key``."""
        self.entries.setdefault(key, completion)
