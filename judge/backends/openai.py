"""A judge behind any OpenAI-compatible server, through the official ``openai`` client.

The reply is constrained with ``response_format`` of type ``json_schema`` (strict).
Some servers refuse that form (llama-cpp-python answers 500); for them the request is
sent once more, at once, as ``{"type": "json_object", "schema": ...}``, and that
choice is remembered for the endpoint so later calls go straight to it. What an
endpoint refused is held in the backend's :class:`EndpointQuirks`, which a backend
pool shares among its backends.

Token log-probabilities are asked for (``logprobs=True, top_logprobs=5``) unless the
backend was built with ``logprobs=False``; they give an answer's confidence
(``judge.confidence``). A server that refuses them (an error whose message names
logprobs: a 400, or llama-cpp-python's 500 when started without ``--logits_all``) gets
the request once more without, and the endpoint is remembered as one that does not
take them, like the format fallback.

Replies are streamed (``stream: true``, usage asked for with
``stream_options.include_usage``) and read within :class:`StreamLimits`: a first-token
limit, an idle limit between chunks and an overall cap (``judge.backends.openai_stream``).
A stream that comes back empty (the server failed after its headers) is
:class:`StreamRefused`, and the next attempt of that request asks without streaming,
so that the server's error comes back as a status that says what it is.

The client retries nothing (``max_retries=0``): retries are ``judge.retry``'s, so that
every attempt is recorded. Its errors are translated to ``judge.errors`` in one place,
:func:`map_openai_errors`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
from openai import AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from judge.backends.base import EndpointQuirks, digest_of_fields
from judge.backends.http import MAX_ERROR_TEXT, previous_error, tls_context
from judge.backends.openai_errors import (
    LOGPROBS_REJECTION,
    map_openai_errors,
    refuses_json_schema,
)
from judge.backends.openai_stream import (
    SERVER,
    EmptyStream,
    completion_of,
    read_stream,
    token_logprobs,
)
from judge.backends.streaming import StreamLimits, answered
from judge.calls import Completion, JudgeRequest
from judge.errors import (
    FeatureRefused,
    JudgeCallError,
    JudgeRejected,
    JudgeUnavailable,
)

__all__ = [
    "EndpointQuirks",
    "OpenAIBackend",
    "StreamRefused",
    "chat_body",
    "form_of",
    "map_openai_errors",
    "reply_of",
]

JSON_SCHEMA = "json_schema"
#: what a ``/v1/models`` entry says of every model: no digest
_LISTING_NOISE = frozenset({"id", "object", "created", "owned_by", "permissions", "permission"})
#: what a ``/v1/models`` entry changes on each listing (vLLM makes a new permission, a
#: random id and the time, every time): never part of a digest
_LISTING_VOLATILE = frozenset({"created", "permissions", "permission"})
JSON_OBJECT = "json_object"
#: client errors of ``GET /props`` that say "not now" rather than "no such path"
_NOT_NOW = frozenset({408, 429})

TOP_LOGPROBS = 5

#: keys of a ``/v1/models`` entry that give the context window, the served one first
#: (vLLM ``max_model_len``; LM Studio, OpenRouter and others), then llama.cpp's
#: ``meta.n_ctx_train``, the trained window: an upper bound of what the server runs with
_CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "n_ctx", "context_window")


def _window_of(entry: dict[str, Any]) -> int | None:
    """The context window a ``/v1/models`` entry states, if any."""
    meta = entry.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    stated = [entry.get(key) for key in _CONTEXT_KEYS]
    for value in (*stated, meta.get("n_ctx"), meta.get("n_ctx_train")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _entries_of(reply: httpx.Response) -> list[dict[str, Any]] | None:
    """The model entries of a ``/v1/models`` reply (``{"data": [{...}, ...]}``), or None
    when it is no such listing: a page (a gateway's, a web UI's at a base URL without
    ``/v1``), JSON of another shape, ``data`` that is null or holds other than objects."""
    try:
        body = reply.json()
    except (ValueError, RecursionError):
        return None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not all(isinstance(entry, dict) for entry in data):
        return None
    return data


def _response_format(form: str, schema: dict[str, Any]) -> dict[str, Any]:
    if form == JSON_OBJECT:
        return {"type": JSON_OBJECT, "schema": schema}
    return {
        "type": JSON_SCHEMA,
        "json_schema": {"name": "judge_reply", "strict": True, "schema": schema},
    }


def chat_body(
    model: str, request: JudgeRequest, *, form: str, logprobs: bool, streamed: bool = False
) -> dict[str, Any]:
    """The body of a chat completion request for ``request``: what the backend POSTs, and
    what a batch engine's JSONL line carries (``judge.batch``)."""
    params = request.params
    messages: Any = [{"role": m.role, "content": m.content} for m in request.messages]
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        "response_format": _response_format(form, request.reply_schema),
    }
    if streamed:
        body.update(stream=True, stream_options={"include_usage": True})
    if params.seed is not None:
        body["seed"] = params.seed
    if logprobs:
        body.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
    return body


def form_of(body: dict[str, Any]) -> str:
    """The structured-output form (``json_schema``, ``json_object``) a request body asks for."""
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    return kind if isinstance(kind, str) else JSON_SCHEMA


def reply_of(body: dict[str, Any], *, form: str, model: str) -> Completion:
    """The completion of a whole chat completion reply given as JSON (a batch result's
    ``response.body``), read as a live unstreamed reply is."""
    return completion_of(ChatCompletion.construct(**body), form, model, token_logprobs)


class StreamRefused(FeatureRefused):
    """An empty stream, read as streaming refused: the server failed after its headers
    (an overflowing prompt, a refused feature) and only a plain answer says which. The
    next attempt of the same request (``judge.backends.http.previous_error``) asks without
    streaming; every other call streams still."""


class OpenAIBackend:
    """A judge model behind an OpenAI-compatible API (``openai:MODEL[@BASE_URL]``)."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        limits: StreamLimits | None = None,
        logprobs: bool = True,
        quirks: EndpointQuirks | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        #: how long a streamed reply may take (first token, between tokens, overall)
        self.limits = limits or StreamLimits()
        #: ask for token log-probabilities (confidence of the answers)
        self.logprobs = logprobs
        self._client_options: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key",
            "timeout": self.limits.http_timeout(),
            "max_retries": 0,
        }
        self._client = self._new_client()
        #: requests under way on each client; a client replaced while some are (after an
        #: empty stream) is closed when the last of them ends (``_using``)
        self._users: dict[openai.AsyncOpenAI, int] = {}
        #: the endpoint really used (``OPENAI_BASE_URL`` applies when base_url is None)
        self.endpoint = str(self._client.base_url)
        #: what this endpoint refused so far (``json_schema``, ``logprobs``)
        self.quirks = quirks if quirks is not None else EndpointQuirks()
        self._context_window: int | None = None
        self._context_known = False

    async def complete(self, request: JudgeRequest) -> Completion:
        """Send one chat completion request and read its streamed reply.

        A refusal of ``json_schema`` or of ``logprobs`` is noted for the endpoint and
        raised as :class:`FeatureRefused`: the retry loop records it as an attempt and
        asks again at once, without the refused feature. So is an empty stream
        (:class:`StreamRefused`), for this request alone: its next attempt goes without
        streaming, so that the server's error (a refused feature, an overflowing prompt)
        comes back as a status that says what it is.
        """
        form = self.quirks.formats.get(self.endpoint, JSON_SCHEMA)
        logprobs = self.logprobs and self.endpoint not in self.quirks.no_logprobs
        streamed = not isinstance(previous_error(), StreamRefused)
        started = asyncio.get_running_loop().time()
        limits = self.limits if streamed else self.limits.whole_call()
        with map_openai_errors():
            async with self._using() as client:
                try:
                    reply = await answered(
                        self._create(client, request, form, logprobs=logprobs, streamed=streamed),
                        limits,
                        server=SERVER,
                        started=started,
                    )
                except openai.APIStatusError as exc:
                    refused = self._note_refusal(exc, form, logprobs=logprobs)
                    if refused is None:
                        raise
                    raise refused from exc
                try:
                    return await read_stream(
                        reply,
                        limits,
                        form=form,
                        model=self.model,
                        max_tokens=request.params.max_tokens,
                        logprobs_of=token_logprobs,
                        started=started,
                        whole=not streamed,
                    )
                except EmptyStream as exc:
                    # the server failed after its headers and drops that connection: do
                    # not send the next request down it (a ReadError), open new ones
                    await self._renew_client()
                    raise StreamRefused(
                        f"{self.endpoint} sent an empty stream (an error after its headers); "
                        "asking once without streaming to learn which",
                        status_code=200,
                    ) from exc

    def _note_refusal(
        self, exc: openai.APIStatusError, form: str, *, logprobs: bool
    ) -> FeatureRefused | None:
        """The refused feature, noted for the endpoint, if ``exc`` refuses one."""
        status, message = exc.status_code, str(exc.message)
        said = f"({status}: {message[:MAX_ERROR_TEXT]})"
        # llama-cpp-python answers 500 "logprobs is not supported ..." without logits_all
        if logprobs and status != 429 and LOGPROBS_REJECTION.search(message):
            self.quirks.no_logprobs.add(self.endpoint)
            return FeatureRefused(
                f"{self.endpoint} refused logprobs {said}; asking without them",
                status_code=status,
            )
        if form == JSON_OBJECT and 400 <= status < 500 and status != 429:
            # the remembered fallback is refused too: try json_schema again next time
            self.quirks.formats.pop(self.endpoint, None)
        if form == JSON_SCHEMA and refuses_json_schema(exc):
            self.quirks.formats[self.endpoint] = JSON_OBJECT
            return FeatureRefused(
                f"{self.endpoint} refused json_schema {said}; asking with json_object",
                status_code=status,
            )
        return None

    async def _create(
        self,
        client: openai.AsyncOpenAI,
        request: JudgeRequest,
        form: str,
        *,
        logprobs: bool,
        streamed: bool = True,
    ) -> AsyncStream[ChatCompletionChunk]:
        """Send the request through ``client``, asking for a stream or a whole reply; the
        reply comes back unread once its headers came (``read_stream`` reads it)."""
        body = chat_body(self.model, request, form=form, logprobs=logprobs, streamed=streamed)
        # The client's own POST (its retries off, its errors, auth and parsing kept), not
        # chat.completions.create: that one walks every node of the body against the
        # typed parameters on each call, which cost more than a grading's storage
        # (bench/overhead.py); the body here is built from checked values already.
        # A whole reply is not read by the client either: read_stream reads it within
        # the limits and its size, and the transport waits for it up to the cap.
        timeout = (self.limits if streamed else self.limits.whole_call()).http_timeout()
        stream: AsyncStream[ChatCompletionChunk] = await client.post(
            "/chat/completions",
            cast_to=ChatCompletion,
            body=body,
            options={"timeout": timeout},
            stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )
        return stream

    def batch_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The unstreamed body of ``request`` for a batch engine, with what the endpoint
        is known to accept (its structured-output form, log-probabilities or not)."""
        form = self.quirks.formats.get(self.endpoint, JSON_SCHEMA)
        logprobs = self.logprobs and self.endpoint not in self.quirks.no_logprobs
        return chat_body(self.model, request, form=form, logprobs=logprobs)

    def batch_client(self, *, timeout: float = 300.0) -> openai.AsyncOpenAI:
        """A new client of this endpoint for the Batch API (files and batches), with the
        client's own retries of transient failures (nothing it does is a judge call)."""
        return self._new_client(timeout=timeout, max_retries=2)

    def _new_client(self, **overrides: Any) -> openai.AsyncOpenAI:
        """A client of this endpoint with the options given, its own connection pool and
        the process's TLS context (``tls_context``)."""
        http = openai.DefaultAsyncHttpxClient(verify=tls_context())
        return openai.AsyncOpenAI(**{**self._client_options, **overrides}, http_client=http)

    async def _list_models(self) -> list[dict[str, Any]] | None:
        """The entries of ``GET /models``, or None when the server answered with no
        listing (``_entries_of``); raises a JudgeCallError when it cannot be asked.

        Sent through the client's own GET, as ``client.models.list()`` sends it: the
        ``client.models`` resource would import every resource of the client (chat,
        audio, beta, admin...), half a second before the first request.
        """
        with map_openai_errors():
            async with self._using() as client:
                reply = await client.get("/models", cast_to=httpx.Response)
        return _entries_of(reply)

    async def probe(self) -> None:
        """Check that the server answers (lists its models); raise a JudgeCallError if not,
        JudgeUnavailable when what it answered is no model listing."""
        if await self._list_models() is None:
            raise JudgeUnavailable(
                f"{SERVER} answered GET /models with no model listing (a page, or JSON "
                "without a list of model objects): is the base URL the API's?"
            )

    async def model_digest(self) -> str | None:
        """What model answers behind the name, as the server tells (``DigestAware``).

        A llama.cpp server names its model file in ``GET /props`` (``model_path``):
        ``props:sha256:<hex>`` of it. Else the model's ``/v1/models`` entry, when it says
        more than its name: the server's own id for it when the name asked is not listed
        and one model is (a llama.cpp server answers any name with its model, listed
        under its file's path), or details such as vLLM's ``root`` or llama.cpp's
        ``meta``: ``models:sha256:<hex>`` of the entry without its volatile fields.
        None when the server says nothing more than the name (OpenAI's listing): the
        completions' ``system_fingerprint`` is all there is then (``judge.identity``).

        None too when the server could not be asked just now (``/props`` or the listing
        unreachable, timed out or failing): the digest known stands. Only a server that
        has no ``/props`` to give (a client error such as 404, or a reply without
        ``model_path``) is known by its listing: a llama.cpp server loading its model
        answers ``/props`` 503 while its listing answers, and is no other model then.
        """
        try:
            props = await self._props()
            if props is not None:
                return digest_of_fields("props", {"model_path": props["model_path"]})
            entries = await self._list_models()
        except JudgeCallError:
            return None
        listed = self._entry_of(entries) if entries is not None else None
        if listed is None:
            return None
        entry = {k: v for k, v in listed.items() if v is not None and k not in _LISTING_VOLATILE}
        if entry.get("id") == self.model and set(entry) <= _LISTING_NOISE:
            return None
        return digest_of_fields("models", entry)

    async def _props(self) -> dict[str, Any] | None:
        """A llama.cpp server's ``GET /props`` (at the server's root) when it names the
        model file (``model_path``); None when the server has none to give: it refuses
        the path for good (a client error: 404 and the like) or answers without a model
        path (not JSON, another shape). Raises a JudgeCallError when it could not be
        asked now: no connection, a timeout (or 408), a limit (429) or a server error
        (a llama.cpp server loading its model answers 503).
        """
        root = str(self._client.base_url).rstrip("/")
        root = root.removesuffix("/v1")
        with map_openai_errors():
            try:
                async with self._using() as client:
                    reply = await client.get(f"{root}/props", cast_to=httpx.Response)
            except openai.APIStatusError as exc:
                status = exc.status_code
                if 400 <= status < 500 and status not in _NOT_NOW:
                    return None  # no /props here: no llama.cpp server
                raise
        try:
            body = reply.json()
        except (ValueError, RecursionError):
            return None
        return body if isinstance(body, dict) and body.get("model_path") else None

    async def context_window(self) -> int | None:
        """The model's context window from ``/v1/models`` metadata, or None if not given.

        Asked once; a server that cannot be reached now is asked again on the next call.
        One that answers with no listing (a page, odd JSON) will not tell: None.
        """
        if self._context_known:
            return self._context_window
        try:
            entries = await self._list_models()
        except JudgeRejected:  # the server has no model listing: it will not tell
            self._context_known = True
            return None
        except JudgeCallError:  # not reachable now: ask again next time
            return None
        listed = self._entry_of(entries) if entries is not None else None
        self._context_window = _window_of(listed) if listed is not None else None
        self._context_known = True
        return self._context_window

    def _entry_of(self, entries: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The ``/v1/models`` entry of this judge's model: listed under its name, or the
        only one listed (a llama.cpp server answers any name with its one model, listed
        under its file's path); None when several are listed and not this one (an entry
        of another model says nothing of this one's window or identity)."""
        mine = [e for e in entries if e.get("id") == self.model]
        if not mine and len(entries) == 1:
            mine = entries
        return mine[0] if mine else None

    @asynccontextmanager
    async def _using(self) -> AsyncIterator[openai.AsyncOpenAI]:
        """The client for one request, kept open until the request is done with it (its
        reply read) even if another call replaces it meanwhile (``_renew_client``)."""
        client = self._client
        self._users[client] = self._users.get(client, 0) + 1
        try:
            yield client
        finally:
            self._users[client] -= 1
            if not self._users[client]:
                del self._users[client]
                if client is not self._client:  # replaced: its last request is done
                    await client.close()

    async def _renew_client(self) -> None:
        """Send new requests through a fresh client (and connection pool); the old one is
        closed once the requests under way on it are done (``_using``), never under them."""
        old, self._client = self._client, self._new_client()
        if old not in self._users:
            await old.close()

    async def aclose(self) -> None:
        """Close the HTTP connections of every client: the current one and any replaced
        one with requests still under way."""
        for client in {self._client, *self._users}:
            await client.close()
