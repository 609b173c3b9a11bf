"""A reply cut at its token budget is never parsed: asked again once with a larger
budget, else the grading is unscored with the reason ``reply_truncated``.

The real ``openai`` and ``ollama`` clients talk to respx in place of the servers, which
say ``finish_reason: "length"`` (OpenAI-compatible, streamed as server-sent events or
answered as one JSON body) or ``done_reason: "length"`` (Ollama, streamed as JSON lines
or answered as one). The cut replies below are complete, valid JSON on purpose: a
server may stop at the budget right after a closing brace, and such a reply must still
not be taken for the judge's answer. A reply that runs far past its budget (a server
that ignores it) is cut the same way, read no further than its size allows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx

from judge.backends.base import JudgeBackend
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import OpenAIBackend
from judge.backends.scripted import scripted_reply
from judge.backends.streaming import MIN_BODY_BYTES, MIN_REPLY_CHARS
from judge.calls import Completion, JudgeCall, JudgeRequest
from judge.context import estimate_tokens
from judge.errors import FeatureRefused, ReplyTruncated
from judge.grader import Grader
from judge.prompt import build_messages
from judge.retry import TRUNCATED_BUDGET_FACTOR, RetryPolicy, complete_with_retries
from judge.rubric import Rubric, load_rubric_dir
from tests.judge.backend_servers import (
    DIGEST,
    FAST,
    OLLAMA_BASE,
    OLLAMA_MODEL,
    OPENAI_BASE,
    OPENAI_MODEL,
    REPLY,
    make_request,
    ollama_tags_reply,
    sent_json,
)

TRUTH = "[fault_spec] component=deployment/user; namespace=hotel || USER_PORT set to 9999"
DIAGNOSIS = "The user deployment sets USER_PORT=9999, so the user service is unreachable."


def _openai_stream(content: str, finish: str) -> httpx.Response:
    """An SSE stream of ``content`` in two chunks, then ``finish_reason`` and usage."""

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0}
        return "data: " + json.dumps({**body, "model": OPENAI_MODEL, "choices": choices, **extra})

    half = len(content) // 2
    parts = [
        event([{"index": 0, "delta": {"content": content[:half]}, "finish_reason": None}]),
        event([{"index": 0, "delta": {"content": content[half:]}, "finish_reason": None}]),
        event([{"index": 0, "delta": {}, "finish_reason": finish}]),
        event([], usage={"prompt_tokens": 80, "completion_tokens": 16, "total_tokens": 96}),
        "data: [DONE]",
    ]
    body = "\n\n".join(parts) + "\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _openai_whole(content: str, finish: str) -> httpx.Response:
    """One JSON body (a server that ignores ``stream``)."""
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": OPENAI_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 80, "completion_tokens": 16, "total_tokens": 96},
    }
    return httpx.Response(200, json=body)


def _ollama_lines(content: str, finish: str) -> httpx.Response:
    """Ollama's stream: JSON lines of pieces, the last ``done`` with its ``done_reason``."""
    half = len(content) // 2
    base = {"model": OLLAMA_MODEL, "created_at": "2025-05-01T10:00:00Z"}
    lines = [
        {**base, "message": {"role": "assistant", "content": content[:half]}, "done": False},
        {**base, "message": {"role": "assistant", "content": content[half:]}, "done": False},
        {
            **base,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": finish,
            "prompt_eval_count": 80,
            "eval_count": 16,
        },
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    return httpx.Response(200, headers={"content-type": "application/x-ndjson"}, content=body)


def _ollama_whole(content: str, finish: str) -> httpx.Response:
    """Ollama's answer in one object."""
    body = {
        "model": OLLAMA_MODEL,
        "created_at": "2025-05-01T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": finish,
        "prompt_eval_count": 80,
        "eval_count": 16,
    }
    return httpx.Response(200, json=body)


Reply = Callable[[str, str], httpx.Response]
#: (name, base URL, chat path, the backend, a reply of (content, finish reason), the
#: body key of the budget)
Kind = tuple[str, str, str, Callable[[], JudgeBackend], Reply, str]
KINDS: list[Kind] = [
    (
        "openai-stream",
        OPENAI_BASE,
        "/chat/completions",
        lambda: OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="sk-test"),
        _openai_stream,
        "max_tokens",
    ),
    (
        "openai-whole",
        OPENAI_BASE,
        "/chat/completions",
        lambda: OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="sk-test"),
        _openai_whole,
        "max_tokens",
    ),
    (
        "ollama-stream",
        OLLAMA_BASE,
        "/api/chat",
        lambda: OllamaBackend(OLLAMA_MODEL, base_url=OLLAMA_BASE),
        _ollama_lines,
        "num_predict",
    ),
    (
        "ollama-whole",
        OLLAMA_BASE,
        "/api/chat",
        lambda: OllamaBackend(OLLAMA_MODEL, base_url=OLLAMA_BASE),
        _ollama_whole,
        "num_predict",
    ),
]


@pytest.fixture(params=KINDS, ids=[k[0] for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    chosen: Kind = request.param
    return chosen


def _budget(body: dict[str, Any], key: str) -> int:
    value = body["options"][key] if key == "num_predict" else body[key]
    return int(value)


async def _ask(
    kind: Kind,
    replies: list[httpx.Response],
    request: JudgeRequest,
) -> tuple[Callable[[], Any], respx.Route, list[Any]]:
    """Call through the retry loop; returns (outcome thunk, the chat route, attempts)."""
    _name, base, path, make, _reply, _key = kind
    backend = make()
    try:
        with respx.mock(base_url=base, assert_all_called=False) as api:
            api.get("/api/tags").mock(return_value=ollama_tags_reply((OLLAMA_MODEL, DIGEST)))
            route = api.post(path).mock(side_effect=replies)
            try:
                completion, attempts = await complete_with_retries(backend, request, policy=FAST)
            except ReplyTruncated as exc:
                error = exc
                return (lambda: error), route, list(exc.attempts)
    finally:
        await backend.aclose()
    return (lambda: completion), route, list(attempts)


async def test_a_cut_reply_is_asked_again_once_with_a_larger_budget(
    kind: Kind,
) -> None:
    _name, _base, _path, _make, reply, key = kind
    whole = '{"answers": ["whole"]}'
    outcome, route, attempts = await _ask(
        kind, [reply(REPLY, "length"), reply(whole, "stop")], make_request(max_tokens=300)
    )
    completion = outcome()
    assert isinstance(completion, Completion)
    assert completion.text == whole and completion.finish_reason == "stop"
    assert route.call_count == 2
    budgets = [_budget(sent_json(route, i), key) for i in range(2)]
    assert budgets == [300, 300 * TRUNCATED_BUDGET_FACTOR]
    assert [a.outcome for a in attempts] == ["reply_truncated", "ok"]
    assert [a.max_tokens for a in attempts] == [None, 600]
    assert "max_tokens budget of 300" in (attempts[0].error or "")


async def test_a_cut_reply_and_its_tokens_are_kept_on_its_attempt(kind: Kind) -> None:
    """A reply cut at its budget is never parsed, but it is what the server sent and the
    judge read the prompt and wrote the budget for it: its attempt keeps its text and the
    tokens the server said it spent, and the call's token counts (what metrics and a
    regrade job add up) are both replies'."""
    _name, _base, _path, _make, reply, _key = kind
    whole = '{"answers": ["whole"]}'
    outcome, _route, attempts = await _ask(
        kind, [reply(REPLY, "length"), reply(whole, "stop")], make_request(max_tokens=300)
    )
    completion = outcome()
    assert isinstance(completion, Completion)
    assert [(a.prompt_tokens, a.completion_tokens) for a in attempts] == [(80, 16), (None, None)]
    assert [a.reply for a in attempts] == [REPLY, None]  # the whole one is the completion
    call = JudgeCall(
        purpose="grade",
        backend="b",
        model="m",
        request=make_request(),
        completion=completion,
        attempts=tuple(attempts),
    )
    assert (call.prompt_tokens, call.completion_tokens) == (2 * 80, 2 * 16)
    unanswered = call.model_copy(update={"completion": None, "attempts": tuple(attempts[:1])})
    assert (unanswered.prompt_tokens, unanswered.completion_tokens) == (80, 16)
    unknown = call.model_copy(update={"completion": None, "attempts": ()})
    assert (unknown.prompt_tokens, unknown.completion_tokens) == (None, None)


async def test_a_reply_cut_twice_is_never_parsed(
    kind: Kind,
) -> None:
    _name, _base, _path, _make, reply, _key = kind
    outcome, route, attempts = await _ask(
        kind, [reply(REPLY, "length"), reply(REPLY, "length")], make_request(max_tokens=300)
    )
    error = outcome()
    assert isinstance(error, ReplyTruncated) and error.code == "reply_truncated"
    assert "max_tokens budget of 600" in str(error)
    assert route.call_count == 2  # once more, not until the attempts run out
    assert [a.outcome for a in attempts] == ["reply_truncated", "reply_truncated"]
    assert [a.reply for a in attempts] == [REPLY, REPLY]  # each as the server sent it


async def test_a_whole_reply_keeps_its_finish_reason(
    kind: Kind,
) -> None:
    _name, _base, _path, _make, reply, _key = kind
    outcome, route, attempts = await _ask(kind, [reply(REPLY, "stop")], make_request())
    completion = outcome()
    assert isinstance(completion, Completion)
    assert (completion.text, completion.finish_reason) == (REPLY, "stop")
    assert route.call_count == 1 and [a.outcome for a in attempts] == ["ok"]


#: far more reply text than a budget of 16 tokens allows: past the least text read
#: (``MIN_REPLY_CHARS``), and as a whole body past the least body read
#: (``MIN_BODY_BYTES``)
_PAST_TEXT = '{"answers": ["' + "x" * (MIN_REPLY_CHARS + 1) + '"]}'
_PAST_BODY = '{"answers": ["' + "x" * (MIN_BODY_BYTES + 1) + '"]}'


@pytest.mark.parametrize("content", [_PAST_TEXT, _PAST_BODY], ids=["text", "body"])
async def test_a_reply_far_past_its_budget_is_cut_never_kept(kind: Kind, content: str) -> None:
    """A server that ignores the budget cannot fill a worker's memory, nor the audit
    trail: its reply is read no further than its size allows and handled as a reply cut
    at its budget (asked again once with twice the budget, then ``reply_truncated``);
    nothing of it is kept, whatever it says of why it stopped."""
    _name, _base, _path, _make, reply, key = kind
    outcome, route, attempts = await _ask(
        kind, [reply(content, "stop"), reply(content, "stop")], make_request(max_tokens=16)
    )
    error = outcome()
    assert isinstance(error, ReplyTruncated), error
    assert route.call_count == 2
    assert [_budget(sent_json(route, i), key) for i in range(2)] == [16, 32]
    assert [a.outcome for a in attempts] == ["reply_truncated", "reply_truncated"]
    assert all("far beyond its max_tokens budget" in (a.error or "") for a in attempts)
    assert all(a.reply is None for a in attempts)
    assert "xxxx" not in str(error)


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


@pytest.mark.parametrize("server", ["openai", "ollama"])
async def test_a_grading_whose_replies_are_cut_is_unscored_not_parsed(
    rubric: Rubric, server: str
) -> None:
    """A nine-yes reply that is valid JSON but stopped at the budget: unscored, never
    a pass; the second ask went with the larger budget."""

    def nine_yes(body: dict[str, Any]) -> str:
        # the scripted judge's well-formed reply to this very prompt
        request = JudgeRequest.model_validate(
            {
                "messages": body["messages"],
                "reply_schema": body.get("format")
                or body["response_format"]["json_schema"]["schema"],
            }
        )
        return scripted_reply(request)

    def cut(http_request: httpx.Request) -> httpx.Response:
        text = nine_yes(json.loads(http_request.content))
        return (
            _openai_stream(text, "length") if server == "openai" else _ollama_lines(text, "length")
        )

    if server == "openai":
        backend: JudgeBackend = OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="k")
        base, path = OPENAI_BASE, "/chat/completions"
    else:
        backend = OllamaBackend(OLLAMA_MODEL, base_url=OLLAMA_BASE)
        base, path = OLLAMA_BASE, "/api/chat"
    try:
        with respx.mock(base_url=base, assert_all_called=False) as api:
            api.get("/api/tags").mock(return_value=ollama_tags_reply((OLLAMA_MODEL, DIGEST)))
            route = api.post(path).mock(side_effect=cut)
            result = await Grader(backend, retry=FAST).grade(rubric, TRUTH, DIAGNOSIS)
    finally:
        await backend.aclose()
    assert result.status == "unscored" and result.unscored_reason == "reply_truncated"
    assert result.passed is None and not result.answers
    assert "never parsed" in (result.detail or "")
    assert route.call_count == 2  # the first ask and its one retry: no repair of a cut reply
    assert [a.outcome for a in result.calls[0].attempts] == ["reply_truncated"] * 2
    # no reply kept, yet both were read and written: the call's tokens count them
    assert (result.calls[0].prompt_tokens, result.calls[0].completion_tokens) == (160, 32)


class _CutThenWhole:
    """A judge whose first reply stops at its budget (``finish_reason`` length) and whose
    second is whole."""

    name, model, base_url = "scripted", "cut-then-whole", None

    def __init__(self) -> None:
        self.requests: list[JudgeRequest] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        self.requests.append(request)
        if len(self.requests) == 1:
            return Completion(text='{"D1-Q1": {"reas', model=self.model, finish_reason="length")
        return Completion(text=scripted_reply(request), model=self.model, finish_reason="stop")

    async def probe(self) -> None:  # pragma: no cover - not used
        return None

    async def aclose(self) -> None:  # pragma: no cover - not used
        return None


@pytest.mark.parametrize("spare", [200, 0])
async def test_the_retry_of_a_cut_reply_stays_inside_the_context_window(
    rubric: Rubric, spare: int
) -> None:
    """A cut reply is asked again with no more budget than the judge's context window
    leaves beside the prompt (a larger request is refused by vLLM, or has its prompt's
    start dropped by Ollama); where the window leaves no more than the budget, it is not
    asked again and the grading is unscored as ``reply_truncated``."""
    prompt = estimate_tokens(build_messages(rubric, TRUTH, DIAGNOSIS))
    window = prompt + 1536 + spare  # fits the first call, not one with twice the budget
    backend = _CutThenWhole()
    result = await Grader(backend, context_tokens=window, retry=FAST).grade(
        rubric, TRUTH, DIAGNOSIS
    )
    budgets = [request.params.max_tokens for request in backend.requests]
    for request in backend.requests:
        assert estimate_tokens(request.messages) + request.params.max_tokens <= window
    if spare:
        assert result.status == "graded" and budgets == [1536, 1536 + spare]
    else:
        assert result.unscored_reason == "reply_truncated" and budgets == [1536]


class _SlowFirstReply:
    """A judge whose first reply, slow as a CPU judge writing its whole budget is, is
    cut at ``max_tokens`` (or refuses a feature), and whose second is whole."""

    name, model, base_url = "openai", "slow-judge", None

    def __init__(self, first: str, seconds: float) -> None:
        self.first, self.seconds = first, seconds
        self.budgets: list[int] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        self.budgets.append(request.params.max_tokens)
        if len(self.budgets) == 1:
            await asyncio.sleep(self.seconds)
            if self.first == "feature_refused":
                raise FeatureRefused("json_schema is not supported")
            return Completion(text='{"answers": [', model=self.model, finish_reason="length")
        return Completion(text='{"answers": []}', model=self.model, finish_reason="stop")

    async def probe(self) -> None:  # pragma: no cover - not used
        return None

    async def aclose(self) -> None:  # pragma: no cover - not used
        return None


@pytest.mark.parametrize("first", ["reply_truncated", "feature_refused"])
async def test_an_owed_retry_is_asked_after_the_loops_time_bound(first: str) -> None:
    """A judge on a CPU takes minutes to write its whole budget: its cut reply (or a
    refused feature) comes after the retry loop's ``max_total_seconds``, and the one
    retry it is owed (a larger budget, or without the feature) is still asked, at once."""
    backend = _SlowFirstReply(first, seconds=0.3)
    policy = RetryPolicy(max_total_seconds=0.2, initial_wait=0.01, max_wait=0.05, jitter=0)
    completion, attempts = await complete_with_retries(
        backend, make_request(max_tokens=300), policy=policy
    )
    assert completion.finish_reason == "stop"
    assert [a.outcome for a in attempts] == [first, "ok"]
    budget = 300 * TRUNCATED_BUDGET_FACTOR if first == "reply_truncated" else 300
    assert backend.budgets == [300, budget]
