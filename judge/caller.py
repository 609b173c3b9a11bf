"""Calling one judge: the cache, the retries, the call records and the context window.

A :class:`JudgeCaller` is what the asking strategies (one call for the whole rubric,
or one call per question) are given: they never talk to a backend directly. Every
call, answered or failed or served from the cache, comes back as one
:class:`~judge.calls.JudgeCall` record, built here and nowhere else, and the caller
keeps them all (``JudgeCaller.made``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from judge.backends.base import ContextWindowAware, JudgeBackend
from judge.cache import BatchJudgeCache, JudgeCache, cache_key
from judge.calls import ChatMessage, JudgeCall, JudgeRequest, SamplingParams
from judge.context import estimate_tokens
from judge.errors import JudgeCallError
from judge.retry import RetryPolicy, complete_with_retries

__all__ = ["JudgeCaller", "Purpose"]

#: cache keys a caller remembers (a grading asks at most a few dozen requests)
_KEYS_KEPT = 64
#: why a call was made: the first question, or the repair of an unusable reply
Purpose = Literal["grade", "repair"]


@dataclass
class JudgeCaller:
    """One judge backend with its sampling settings, retry policy, cache and window."""

    backend: JudgeBackend
    params: SamplingParams = field(default_factory=SamplingParams)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: reuse completions of identical requests at temperature 0 (see ``judge.cache``)
    cache: JudgeCache | None = None
    #: the judge's context window in tokens; None: ``params.num_ctx``, else what the
    #: backend reports (``ContextWindowAware``), else no check (see ``judge.context``)
    context_tokens: int | None = None
    #: characters counted beyond a prompt's own when checking that it fits (the ground
    #: truth counted at its budget: ``judge.context.Fit.padding_chars``)
    padding_chars: int = 0
    #: every call this caller made, in order (``remember``'s cache keys on them): what a
    #: grading that fails after the judge answered still keeps (``judge.grader``)
    made: list[JudgeCall] = field(default_factory=list, init=False, repr=False, compare=False)
    #: id(request) -> (request, its cache key), for the requests of this caller's grading
    _keys: dict[int, tuple[JudgeRequest, str | None]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def request(self, messages: Sequence[ChatMessage], schema: dict[str, Any]) -> JudgeRequest:
        """A request of ``messages`` and reply ``schema`` with this judge's settings."""
        return JudgeRequest(messages=tuple(messages), reply_schema=schema, params=self.params)

    async def context_window(self) -> int | None:
        """The context window in tokens: as configured, else as the backend says, or None."""
        if self.context_tokens is not None:
            return self.context_tokens
        if self.params.num_ctx is not None:
            return self.params.num_ctx
        if isinstance(self.backend, ContextWindowAware):
            return await self.backend.context_window()
        return None

    async def reply_room(self, messages: Sequence[ChatMessage]) -> int | None:
        """The tokens the context window leaves for the reply beside ``messages`` (counted
        with ``padding_chars``, as the grading's fit counted them); None if unknown."""
        window = await self.context_window()
        if window is None:
            return None
        return window - estimate_tokens(messages, padding_chars=self.padding_chars)

    async def fits(self, messages: Sequence[ChatMessage]) -> bool:
        """Whether ``messages`` and the reply fit the context window (True if unknown)."""
        room = await self.reply_room(messages)
        return room is None or self.params.max_tokens <= room

    async def call(self, purpose: Purpose, request: JudgeRequest) -> JudgeCall:
        """Answer ``request`` from the cache or the judge (with retries); never raises.

        The retry of a reply cut at its budget asks for no more than the context window
        leaves beside the prompt (``judge.retry``)."""
        key = self._cache_key(request)
        if self.cache is not None and key is not None:
            hit = await self.cache.get(key)
            if hit is not None:
                return self._record(purpose, request, completion=hit, cached=True)
        try:
            room = await self.reply_room(request.messages)
            completion, attempts = await complete_with_retries(
                self.backend, request, policy=self.retry, room=room
            )
        except JudgeCallError as exc:
            return self._record(
                purpose,
                request,
                error_code=exc.code,
                error=str(exc)[:1000],
                attempts=tuple(exc.attempts),
            )
        return self._record(purpose, request, completion=completion, attempts=tuple(attempts))

    async def prefetch(self, requests: Sequence[JudgeRequest]) -> None:
        """Let the cache look up the entries of ``requests`` at once (one query instead
        of one per request), when it can (``judge.cache.BatchJudgeCache``)."""
        if not isinstance(self.cache, BatchJudgeCache):
            return
        keys = [key for r in requests if (key := self._cache_key(r)) is not None]
        if keys:
            await self.cache.prefetch(keys)

    async def remember(self, calls: Sequence[JudgeCall]) -> tuple[JudgeCall, ...]:
        """Cache the completions of a conversation whose final reply was usable: the
        calls, each new completion's call carrying the key it is kept under."""
        if self.cache is None:
            return tuple(calls)
        kept = []
        for call in calls:
            key, completion = None, call.completion
            if completion is not None and not call.cached:  # else nothing new to keep
                key = self._cache_key(call.request)
                if key is not None:
                    key = await self.cache.put(key, completion)
            kept.append(call if key is None else call.model_copy(update={"cache_key": key}))
        keyed = {id(call): new for call, new in zip(calls, kept, strict=True) if new is not call}
        self.made[:] = [keyed.get(id(call), call) for call in self.made]
        return tuple(kept)

    def _cache_key(self, request: JudgeRequest) -> str | None:
        """The request's cache key, computed once (``prefetch`` and ``call`` both need it)."""
        if self.cache is None:
            return None
        known = self._keys.get(id(request))
        if known is not None and known[0] is request:
            return known[1]
        backend = self.backend
        key = cache_key(
            request, backend=backend.name, model=backend.model, base_url=backend.base_url
        )
        if len(self._keys) >= _KEYS_KEPT:  # a caller kept for long stays small
            self._keys.clear()
        self._keys[id(request)] = (request, key)  # the request kept: its id stays its own
        return key

    def _record(self, purpose: Purpose, request: JudgeRequest, **outcome: Any) -> JudgeCall:
        """The audit record of one call: which judge, what was asked, what came back."""
        backend = self.backend
        call = JudgeCall(
            purpose=purpose,
            backend=backend.name,
            model=backend.model,
            base_url=backend.base_url,
            request=request,
            **outcome,
        )
        self.made.append(call)
        return call
