"""What only the OpenAI-compatible backend does: the key and endpoint defaults, the
``json_schema`` fallback remembered per endpoint, one question per call, reading the
model listing.

Log-probabilities are in ``test_backend_openai_logprobs.py``; the behaviour both
backends share is in ``test_backend_contract.py``.
"""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from judge.backends.base import EndpointQuirks
from judge.backends.http import retrying_after
from judge.backends.openai import OpenAIBackend
from judge.errors import ContextOverflow, FeatureRefused, JudgeRejected, JudgeUnavailable
from judge.grader import Grader
from judge.retry import complete_with_retries
from judge.rubric import load_rubric_dir
from tests.judge.backend_servers import (
    FAST,
    OPENAI_BASE,
    OPENAI_MODEL,
    SCHEMA,
    ask_with_retries,
    make_request,
    sent_json,
)
from tests.judge.backend_servers import openai_completion_reply as completion_reply
from tests.judge.backend_servers import openai_error as error_reply

BASE, MODEL = OPENAI_BASE, OPENAI_MODEL
OTHER_BASE = "http://127.0.0.1:18081/v1"
JSON_SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "judge_reply", "strict": True, "schema": SCHEMA},
}
JSON_OBJECT_FORMAT = {"type": "json_object", "schema": SCHEMA}
SCHEMA_REFUSAL = "Unrecognized schema: json_schema is not supported by this server"


async def test_the_key_is_sent_as_a_bearer_token(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=completion_reply())

    await openai_backend.complete(make_request())

    assert sent_json(route)["response_format"] == JSON_SCHEMA_FORMAT
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-test"


async def test_api_key_defaults(
    openai_api: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=completion_reply())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = OpenAIBackend(MODEL, base_url=BASE)
    try:
        await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-no-key"


async def test_endpoint_defaults_to_openai_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", OTHER_BASE)
    judge = OpenAIBackend(MODEL, api_key="k")
    try:
        with respx.mock(assert_all_called=True) as router:
            route = router.post(f"{OTHER_BASE}/chat/completions").mock(
                return_value=completion_reply()
            )
            await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert route.call_count == 1
    assert judge.base_url is None
    assert judge.endpoint == f"{OTHER_BASE}/"


async def test_the_served_model_name_is_kept(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    openai_api.post("/chat/completions").mock(
        return_value=completion_reply(model="qwen2.5-1.5b-instruct-q4_k_m.gguf")
    )

    completion = await openai_backend.complete(make_request())

    assert completion.model == "qwen2.5-1.5b-instruct-q4_k_m.gguf"
    assert completion.fingerprint == "b5123-8c2a1f"


async def test_missing_content_becomes_empty_text(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    openai_api.post("/chat/completions").mock(return_value=completion_reply(content=None))

    completion = await openai_backend.complete(make_request())

    assert completion.text == ""
    assert completion.model == MODEL


@pytest.mark.parametrize(
    "reply",
    [
        completion_reply(choices=[]),
        httpx.Response(200, json={"id": "x", "object": "chat.completion", "model": MODEL}),
        # gateways (LiteLLM, OpenRouter) answer 200 with an error: the server's words kept
        httpx.Response(200, json={"error": {"message": "model is loading", "type": "x"}}),
        httpx.Response(200, json={"error": "upstream provider returned an error"}),
        # a proxy or a captive portal: no API reached
        httpx.Response(200, headers={"content-type": "text/html"}, text="<html>Sign in</html>"),
    ],
    ids=["no-choices", "bare", "error-object", "error-text", "html"],
)
async def test_a_200_that_is_no_completion_is_an_unavailable_judge(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend, reply: httpx.Response
) -> None:
    """Not an empty reply (a repair call wasted, then unscored for good as
    unparseable): the judge was not really answered, so the grading stays pending."""
    openai_api.post("/chat/completions").mock(return_value=reply)

    async def ask() -> None:
        try:
            await openai_backend.complete(make_request())
        except FeatureRefused as refused:  # a page streamed reads as an empty stream:
            with retrying_after(refused):  # asked again unstreamed
                await openai_backend.complete(make_request())

    with pytest.raises(JudgeUnavailable) as caught:
        await ask()
    body = reply.content.decode()
    if "error" in body:
        assert ("model is loading" in str(caught.value)) or ("upstream" in str(caught.value))


async def test_a_200_error_with_a_client_status_is_rejected_and_an_overflow_said_so(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    """An error body's numeric code reads as the status it names; a context overflow
    sent as an event in the stream (llama.cpp, LiteLLM) is one, not an unreadable reply."""
    too_long = {"message": "the request exceeds the available context size", "code": 400}
    stream = "data: " + json.dumps({"error": too_long}) + "\n\n"
    route = openai_api.post("/chat/completions")
    route.mock(return_value=httpx.Response(200, json={"error": {"message": "bad", "code": 400}}))
    with pytest.raises(JudgeRejected):
        await openai_backend.complete(make_request())
    route.mock(
        return_value=httpx.Response(200, headers={"content-type": "text/event-stream"}, text=stream)
    )
    with pytest.raises(ContextOverflow):
        await openai_backend.complete(make_request())


#: what Hugging Face TGI streams, after a 200, when a chat request's prompt does not fit:
#: its error as an event whose ``error`` is text
TGI_OVERFLOW = (
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
    "Given: 5000 `inputs` tokens and 1536 `max_new_tokens`"
)


async def test_a_streamed_error_given_as_text_is_read_as_the_error_it_names(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    """A stream event ``{"error": "<text>", "error_type": ...}`` (TGI's form) is read by
    the server's words, as the same error in a whole body is: a prompt that does not fit
    is a context overflow, said in the server's words and not asked again."""
    event = "data: " + json.dumps({"error": TGI_OVERFLOW, "error_type": "validation"}) + "\n\n"
    stream = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=event.encode()
    )
    route = openai_api.post("/chat/completions").mock(return_value=stream)

    with pytest.raises(ContextOverflow, match="must be <= 4096"):
        await complete_with_retries(openai_backend, make_request(), policy=FAST)

    assert route.call_count == 1


async def test_a_refusal_is_an_error_keeping_the_models_words(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    """Structured outputs answer a refusal as ``message.refusal`` with no content: it was
    an empty text, the model's words lost from the call's record."""
    refusal = "I'm sorry, but I cannot assist with grading this content."
    reply = completion_reply(content=None)
    body = json.loads(reply.content)
    body["choices"][0]["message"]["refusal"] = refusal
    openai_api.post("/chat/completions").mock(return_value=httpx.Response(200, json=body))

    with pytest.raises(JudgeRejected) as caught:
        await openai_backend.complete(make_request())
    assert refusal in str(caught.value)


async def test_a_streamed_refusal_is_an_error_keeping_the_models_words(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    """Streamed, structured outputs send a refusal as ``delta.refusal`` chunks with no
    content; every call streams, so this is how a refusal really arrives. It reads as
    the unstreamed one: a JudgeRejected keeping the model's words, not an empty text
    parsed, repaired and lost."""
    refusal = "I'm sorry, but I cannot assist with grading this content."

    def event(delta: dict[str, object], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
        return "data: " + json.dumps({**chunk, "choices": [choice]}) + "\n\n"

    events = (
        event({"role": "assistant", "content": None, "refusal": ""})
        + event({"refusal": refusal[:20]})
        + event({"refusal": refusal[20:]})
        + event({}, "stop")
        + "data: [DONE]\n\n"
    )
    openai_api.post("/chat/completions").mock(
        return_value=httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=events.encode()
        )
    )
    with pytest.raises(JudgeRejected) as caught:
        await openai_backend.complete(make_request())
    assert refusal in str(caught.value)


async def test_json_schema_refused_with_500_falls_back_and_is_remembered(
    openai_api: respx.MockRouter,
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(500, SCHEMA_REFUSAL), completion_reply()]
    )
    quirks = EndpointQuirks()  # as a backend pool shares among its backends
    backend = OpenAIBackend(MODEL, base_url=BASE, api_key="sk-test", quirks=quirks)

    completion, outcomes = await ask_with_retries(backend)

    assert outcomes == ["feature_refused 500", "ok"]  # every request is an attempt on record
    assert route.call_count == 2
    assert sent_json(route, 0)["response_format"] == JSON_SCHEMA_FORMAT
    assert sent_json(route, 1)["response_format"] == JSON_OBJECT_FORMAT
    assert completion.response_format == "json_object"

    route.side_effect = None
    route.return_value = completion_reply()
    again = await backend.complete(make_request())
    sharing = OpenAIBackend("other-model", base_url=BASE, api_key="sk-test", quirks=quirks)
    shared = await sharing.complete(make_request())
    fresh = OpenAIBackend(MODEL, base_url=BASE, api_key="sk-test")
    unknown = await fresh.complete(make_request())
    for judge in (backend, sharing, fresh):
        await judge.aclose()

    assert route.call_count == 5
    assert [sent_json(route, i)["response_format"] for i in (2, 3, 4)] == [
        JSON_OBJECT_FORMAT,
        JSON_OBJECT_FORMAT,
        JSON_SCHEMA_FORMAT,  # a backend with its own memory has not learned it
    ]
    assert again.response_format == shared.response_format == "json_object"
    assert unknown.response_format == "json_schema"


async def test_fallback_memory_is_per_endpoint() -> None:
    quirks = EndpointQuirks()
    one = OpenAIBackend(MODEL, base_url=BASE, api_key="k", quirks=quirks)
    two = OpenAIBackend(MODEL, base_url=OTHER_BASE, api_key="k", quirks=quirks)
    with respx.mock(assert_all_called=True) as router:
        first = router.post(f"{BASE}/chat/completions").mock(
            side_effect=[error_reply(500, SCHEMA_REFUSAL), completion_reply()]
        )
        other = router.post(f"{OTHER_BASE}/chat/completions").mock(return_value=completion_reply())
        try:
            await ask_with_retries(one)
            completion = await two.complete(make_request())
        finally:
            await one.aclose()
            await two.aclose()

    assert first.call_count == 2
    assert sent_json(other)["response_format"] == JSON_SCHEMA_FORMAT
    assert completion.response_format == "json_schema"
    assert quirks.formats == {f"{BASE}/": "json_object"}


async def test_json_schema_refused_with_400_falls_back(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[
            error_reply(400, "Unsupported response_format type: json_schema"),
            completion_reply(),
        ]
    )

    with pytest.raises(FeatureRefused) as caught:
        await openai_backend.complete(make_request())
    completion = await openai_backend.complete(make_request())

    assert caught.value.status_code == 400 and "json_schema" in str(caught.value)
    assert route.call_count == 2
    assert completion.response_format == "json_object"


async def test_a_plain_server_error_is_not_taken_for_a_format_refusal(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(500, "Internal Server Error"), completion_reply()]
    )

    with pytest.raises(JudgeUnavailable) as caught:
        await openai_backend.complete(make_request())
    completion = await openai_backend.complete(make_request())

    assert caught.value.status_code == 500
    assert route.call_count == 2
    assert [sent_json(route, i)["response_format"] for i in (0, 1)] == [JSON_SCHEMA_FORMAT] * 2
    assert completion.response_format == "json_schema"  # nothing learnt from a crash


async def test_a_refused_fallback_is_forgotten(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[
            error_reply(400, "response_format json_schema unsupported"),
            error_reply(400, "response_format json_object unsupported"),
            completion_reply(),
        ]
    )

    with pytest.raises(JudgeRejected):
        await ask_with_retries(openai_backend)
    completion = await openai_backend.complete(make_request())

    assert route.call_count == 3
    assert sent_json(route, 2)["response_format"] == JSON_SCHEMA_FORMAT
    assert completion.response_format == "json_schema"


async def test_plain_bad_request_does_not_fall_back(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        return_value=error_reply(400, "'messages' must contain at least one message")
    )

    with pytest.raises(JudgeRejected):
        await openai_backend.complete(make_request())

    assert route.call_count == 1


# --- token log-probabilities: asked for, fallback, confidence; per-question asking ---


async def test_per_question_calls_share_a_byte_identical_prefix_and_ask_one_question(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    from judge.grader import Grader
    from judge.rubric import load_rubric_dir

    rubric = load_rubric_dir()["sregym-rca"]
    ids = [q.id for q in rubric.questions]

    def answer(request: httpx.Request) -> httpx.Response:
        last = json.loads(request.content)["messages"][-1]["content"]
        asked = [qid for qid in ids if f"Question {qid}" in last]
        assert len(asked) == 1
        entry = {"reasoning": "r", "evidence": "", "answer": "no", "confidence": "low"}
        return completion_reply(json.dumps(entry))

    route = openai_api.post("/chat/completions").mock(side_effect=answer)
    grader = Grader(openai_backend, retry=FAST, asking="per_question")
    result = await grader.grade(rubric, "[fault_spec] component=deployment/a || x", "a is down")

    assert result.status == "graded" and len(result.calls) == 9 and route.call_count == 9
    bodies = [sent_json(route, i) for i in range(9)]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 1
    users = [b["messages"][1]["content"] for b in bodies]
    prefix = users[0][: users[0].index("Question ")]
    assert "<<<DIAGNOSIS" in prefix and "<<<GROUND_TRUTH" in prefix
    for qid, user in zip(ids, users, strict=True):
        assert user.startswith(prefix)
        question = user[len(prefix) :]
        assert question.startswith(f"Question {qid}")
        assert [other for other in ids if other in question] == [qid]
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"reasoning", "evidence", "answer", "confidence"}
    assert {a.question_id: a.confidence for a in result.answers}["D1-Q1"] == 0.3


async def test_an_overloaded_judge_is_away_not_refusing_a_feature() -> None:
    """Streamed, a 200 with no chunk (a refused feature, asked again plainly); plainly,
    a 503. The refusals used up between the 503s made the call a refused feature, and
    the grading unscored for good: it is the judge being away, so it waits, pending."""

    def overloaded(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"")
        return error_reply(503, "server overloaded")

    with respx.mock(base_url=BASE) as api:
        api.post("/chat/completions").mock(side_effect=overloaded)
        backend = OpenAIBackend(MODEL, base_url=BASE, logprobs=False)
        try:
            with pytest.raises(JudgeUnavailable) as caught:
                await complete_with_retries(backend, make_request(), policy=FAST)
            rubric = load_rubric_dir()["sregym-rca"]
            truth = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT=7777"
            result = await Grader(backend, retry=FAST).grade(rubric, truth, "geo listens on 7777")
        finally:
            await backend.aclose()
    outcomes = [a.outcome for a in caught.value.attempts]
    assert "feature_refused" in outcomes and "judge_unavailable" in outcomes
    assert (result.status, result.unscored_reason) == ("unscored", "judge_unavailable")


@pytest.mark.parametrize(
    "listing",
    [
        # a gateway's page, or a web UI's at a base URL without /v1
        httpx.Response(200, text="<html><body>gateway</body></html>"),
        httpx.Response(200, json={"object": "list", "data": None}),
        httpx.Response(200, json={"object": "list", "data": ["qwen2.5-1.5b"]}),
        httpx.Response(200, json=[]),
    ],
    ids=["html-page", "data-null", "data-strings", "json-array"],
)
async def test_a_model_listing_of_another_shape_says_nothing_of_the_model(
    openai_backend: OpenAIBackend, listing: httpx.Response
) -> None:
    """The window and the digest are unknown (the window is not asked again); a probe
    says the server answered oddly, as an unavailable judge."""
    with respx.mock(assert_all_called=True) as router:
        models = router.get(f"{BASE}/models").mock(return_value=listing)
        router.get(BASE.removesuffix("/v1") + "/props").mock(return_value=httpx.Response(404))
        assert await openai_backend.context_window() is None
        assert await openai_backend.context_window() is None
        assert await openai_backend.model_digest() is None
        with pytest.raises(JudgeUnavailable, match="no model listing"):
            await openai_backend.probe()
    assert models.call_count == 3  # the window once, the digest, the probe
