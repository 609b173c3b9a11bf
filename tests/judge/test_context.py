"""Context limits: a prompt that would not fit is not sent, or the diagnosis is cut."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
import respx

from judge.backends.openai import OpenAIBackend
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import SamplingParams
from judge.context import estimate_tokens, ground_truth_stand_in
from judge.errors import ContextOverflow
from judge.grader import Grader
from judge.prompt import build_messages, neutralize_untrusted
from judge.retry import RetryPolicy
from judge.rubric import Rubric, load_rubric_dir
from tests.support.llama_server import require_real_model, smollm2_gguf

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
SHORT = "user-service in hotel sets USER_PORT=9999; the frontend fails."
LONG = SHORT + "\n" + "\n".join(f"log line {i}: connection refused by peer" for i in range(400))
BASE = "http://127.0.0.1:18090/v1"
FAST = RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.01, jitter=0)


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def _window_for(rubric: Rubric, diagnosis: str, max_tokens: int = 1536) -> int:
    """The smallest window the prompt of ``diagnosis`` fits in."""
    return estimate_tokens(build_messages(rubric, TRUTH, diagnosis)) + max_tokens


async def test_a_prompt_that_does_not_fit_is_not_sent(rubric: Rubric) -> None:
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=_window_for(rubric, SHORT) + 50)
    result = await grader.grade(rubric, TRUTH, LONG)
    assert result.status == "unscored" and result.unscored_reason == "context_overflow"
    assert "over the judge's context window" in result.detail
    assert backend.requests == [] and result.calls == ()
    assert result.needs_review


async def test_a_prompt_that_fits_is_sent(rubric: Rubric) -> None:
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=_window_for(rubric, SHORT))
    result = await grader.grade(rubric, TRUTH, SHORT)
    assert result.status == "graded" and len(backend.requests) == 1


async def test_truncate_cuts_the_diagnosis_and_says_so(rubric: Rubric) -> None:
    backend = ScriptedBackend([scripted_reply])
    window = _window_for(rubric, SHORT) + 400
    grader = Grader(backend, context_tokens=window, context_overflow="truncate")
    result = await grader.grade(rubric, TRUTH, LONG)
    assert result.status == "graded"
    sent = backend.requests[0].messages
    assert estimate_tokens(sent) + 1536 <= window
    assert SHORT in sent[1].content and "log line 399" not in sent[1].content
    assert f"diagnosis cut from {len(LONG)} to " in result.detail
    assert f"context window of {window} tokens" in result.detail


async def test_truncate_counts_only_the_characters_the_prompt_holds(rubric: Rubric) -> None:
    """Invisible characters, which the prompt leaves out, take no room: a diagnosis
    ending in zero-width spaces is cut as its visible text is, and graded."""
    window = _window_for(rubric, SHORT) + 400
    sent = []
    for diagnosis in (LONG, LONG + "\u200b" * 12_000):
        backend = ScriptedBackend([scripted_reply])
        grader = Grader(backend, context_tokens=window, context_overflow="truncate")
        result = await grader.grade(rubric, TRUTH, diagnosis)
        assert result.status == "graded", result.detail
        sent.append(backend.requests[0].messages[1].content)
    assert sent[0] == sent[1]


async def test_truncate_counts_the_markers_the_prompt_writes(rubric: Rubric) -> None:
    """The prompt writes each ``>>`` of a diagnosis as a longer marker ("[angle
    brackets]"): a diagnosis quoting a script full of redirections is cut to the room
    those markers leave, not left unscored, and most of the room is used."""
    diagnosis = (
        SHORT
        + "\n"
        + "\n".join(f"  - run: cat config-{i}.yaml >> /tmp/all.yaml" for i in range(200))
    )
    window = _window_for(rubric, SHORT) + 900
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=window, context_overflow="truncate")
    result = await grader.grade(rubric, TRUTH, diagnosis)
    assert result.status == "graded", result.detail
    sent = backend.requests[0].messages
    assert estimate_tokens(sent) + 1536 <= window
    assert len(sent[1].content) - len(build_messages(rubric, TRUTH, SHORT)[1].content) > 1500


@pytest.mark.parametrize(
    "tail",
    [
        "\n".join(">" * 40 + f" section {i}" for i in range(60)),  # runs written shorter
        "\n" * 600,  # blank lines the fence strips
    ],
    ids=["banner lines", "blank lines"],
)
async def test_truncate_cuts_a_diagnosis_whose_dropped_tail_the_prompt_writes_shorter(
    rubric: Rubric, tail: str
) -> None:
    """A tail the prompt holds in fewer characters than it has (a run of 40 ``>`` is
    one 16-character marker; blank lines at the end are stripped) does not make the
    kept head look smaller than it is: the diagnosis is cut to fit, not left unscored."""
    window = _window_for(rubric, SHORT) + 500
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=window, context_overflow="truncate")
    result = await grader.grade(rubric, TRUTH, LONG + "\n" + tail)
    assert result.status == "graded", result.detail
    assert estimate_tokens(backend.requests[0].messages) + 1536 <= window


async def test_truncate_gives_up_when_nothing_useful_is_left(rubric: Rubric) -> None:
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=1600, context_overflow="truncate")
    result = await grader.grade(rubric, TRUTH, LONG)
    assert result.unscored_reason == "context_overflow"
    assert "even with the diagnosis cut" in result.detail
    assert backend.requests == []


async def test_the_ollama_window_is_the_num_ctx_sent(rubric: Rubric) -> None:
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, params=SamplingParams(num_ctx=2048))
    result = await grader.grade(rubric, TRUTH, LONG)
    assert result.unscored_reason == "context_overflow"
    assert "context window of 2048" in result.detail


async def test_a_repair_call_that_would_not_fit_is_not_sent(rubric: Rubric) -> None:
    backend = ScriptedBackend(["x" * 3000, scripted_reply])
    grader = Grader(backend, context_tokens=_window_for(rubric, SHORT) + 100)
    result = await grader.grade(rubric, TRUTH, SHORT)
    assert result.unscored_reason == "context_overflow"
    assert "repair call would not fit" in result.detail
    assert len(backend.requests) == 1 and len(result.calls) == 1


async def test_a_server_refusing_an_oversized_prompt_is_not_retried(rubric: Rubric) -> None:
    refusal = ContextOverflow("exceeds the available context size", status_code=400)
    backend = ScriptedBackend([refusal, scripted_reply])
    result = await Grader(backend, retry=FAST).grade(rubric, TRUTH, SHORT)
    assert result.status == "unscored" and result.unscored_reason == "context_overflow"
    assert len(backend.requests) == 1
    assert len(result.calls) == 1 and result.calls[0].error_code == "context_overflow"


@pytest.fixture
async def openai_backend() -> AsyncIterator[OpenAIBackend]:
    backend = OpenAIBackend("m", base_url=BASE, api_key="sk-test")
    yield backend
    await backend.aclose()


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "object": "model", "max_model_len": 4096}, 4096),  # vLLM
        ({"id": "m", "object": "model", "meta": {"n_ctx_train": 8192}}, 8192),  # llama.cpp
        ({"id": "m", "object": "model", "owned_by": "me"}, None),
    ],
)
async def test_openai_window_comes_from_models_metadata(
    openai_backend: OpenAIBackend, entry: dict[str, object], window: int | None
) -> None:
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        route = router.get("/models").mock(
            return_value=httpx.Response(200, json={"object": "list", "data": [entry]})
        )
        assert await openai_backend.context_window() == window
        assert await openai_backend.context_window() == window
    assert route.call_count == 1  # asked once


async def test_a_listing_of_other_models_says_nothing_of_the_window(
    openai_backend: OpenAIBackend,
) -> None:
    """A gateway listing several models, none under the name asked (OpenRouter, a
    LiteLLM proxy, a ``:beta`` variant): the first entry's window is another model's (it
    was taken: a false context_overflow, or a cut prompt). Only a lone entry (llama.cpp
    lists its one model under its file's path) speaks for the model asked."""
    others = [{"id": "tiny", "context_length": 2048}, {"id": "big", "context_length": 131072}]
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        router.get("/models").respond(200, json={"object": "list", "data": others})
        assert await openai_backend.context_window() is None


async def test_a_server_stated_window_stops_the_prompt_before_sending(
    rubric: Rubric, openai_backend: OpenAIBackend
) -> None:
    entry = {"id": "m", "object": "model", "max_model_len": 2048}
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.get("/models").mock(
            return_value=httpx.Response(200, json={"object": "list", "data": [entry]})
        )
        chat = router.post("/chat/completions")
        result = await Grader(openai_backend).grade(rubric, TRUTH, LONG)
    assert result.unscored_reason == "context_overflow"
    assert not chat.called


async def test_a_server_400_for_an_oversized_prompt_ends_as_context_overflow(
    rubric: Rubric, openai_backend: OpenAIBackend
) -> None:
    body = {"error": {"message": "Requested tokens (5000) exceed context window of 2048"}}
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        router.get("/models").mock(
            return_value=httpx.Response(200, json={"object": "list", "data": []})
        )
        chat = router.post("/chat/completions").mock(return_value=httpx.Response(400, json=body))
        result = await Grader(openai_backend, retry=FAST).grade(rubric, TRUTH, SHORT)
    assert result.unscored_reason == "context_overflow"
    assert chat.call_count == 1


async def test_a_server_without_a_model_listing_is_asked_once(
    openai_backend: OpenAIBackend,
) -> None:
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        route = router.get("/models").mock(return_value=httpx.Response(404, json={}))
        assert await openai_backend.context_window() is None
        assert await openai_backend.context_window() is None
    assert route.call_count == 1


_WINDOW_IN_A_FRESH_PROCESS = f"""
import asyncio, sys
import httpx, respx
from judge.backends.openai import OpenAIBackend

async def main():
    backend = OpenAIBackend("m", base_url="{BASE}", api_key="sk-test")
    entry = {{"id": "m", "object": "model", "max_model_len": 4096}}
    with respx.mock(base_url="{BASE}", assert_all_called=True) as router:
        route = router.get("/models").mock(
            return_value=httpx.Response(200, json={{"object": "list", "data": [entry]}})
        )
        window = await backend.context_window()
    await backend.aclose()
    auth = route.calls[0].request.headers["authorization"]
    print(window, auth, "openai.resources" in sys.modules)

asyncio.run(main())
"""


def test_the_window_is_asked_without_loading_every_resource_of_the_client() -> None:
    # client.models would import all of openai.resources (half a second) before a
    # grading's first request; the listing goes through the client's own GET instead
    done = subprocess.run(
        [sys.executable, "-c", _WINDOW_IN_A_FRESH_PROCESS],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["4096", "Bearer", "sk-test", "False"]


#: a ground truth of the largest length counted at the same budget as TRUTH
LONG_TRUTH = TRUTH + " || " + "mongodb-geo lost its replica set; " * 50


@pytest.mark.parametrize("policy", ["unscored", "truncate"])
async def test_with_a_budget_the_fit_depends_on_the_diagnosis_alone(
    rubric: Rubric, policy: str
) -> None:
    """A submitter sending diagnoses of growing length cannot tell a short ground truth
    from a long one: the overflow decision and any cut are the same for both."""
    assert len(TRUTH) < len(LONG_TRUTH) <= 2000
    window = _window_for(rubric, SHORT) + 1200
    outcomes: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for truth in (TRUTH, LONG_TRUTH):
        outcomes[truth] = []
        for lines in range(0, 400, 20):
            diagnosis = LONG.split("\n")[0] + "\n" + "\n".join(LONG.split("\n")[1 : lines + 1])
            backend = ScriptedBackend([scripted_reply])
            grader = Grader(
                backend,
                context_tokens=window,
                context_overflow=policy,  # type: ignore[arg-type]
                ground_truth_budget=2000,
            )
            result = await grader.grade(rubric, truth, diagnosis)
            # the detail says how many tokens were needed, or where the diagnosis was cut
            outcomes[truth].append((result.status, result.unscored_reason, result.detail))
    assert outcomes[TRUTH] == outcomes[LONG_TRUTH]
    statuses = {status for status, _, _ in outcomes[TRUTH]}
    assert statuses == ({"graded", "unscored"} if policy == "unscored" else {"graded"})
    if policy == "truncate":  # some were cut, each at the same place for both
        assert any("diagnosis cut from" in (detail or "") for _, _, detail in outcomes[TRUTH])


async def test_without_a_budget_the_ground_truths_length_decides(rubric: Rubric) -> None:
    """The control of the test above: counted at its own length, a long ground truth
    makes a diagnosis overflow that fits beside a short one."""
    window = _window_for(rubric, SHORT) + 50
    short = await Grader(ScriptedBackend([scripted_reply]), context_tokens=window).grade(
        rubric, TRUTH, SHORT
    )
    long = await Grader(ScriptedBackend([scripted_reply]), context_tokens=window).grade(
        rubric, LONG_TRUTH, SHORT
    )
    assert (short.status, long.unscored_reason) == ("graded", "context_overflow")


def test_a_ground_truth_is_measured_in_whole_budgets() -> None:
    assert ground_truth_stand_in("x" * 10, None) is None
    assert {len(ground_truth_stand_in(t, 100) or "") for t in ("", "x", "y" * 100)} == {100}
    assert len(ground_truth_stand_in("y" * 101, 100) or "") == 200


async def test_a_repair_is_checked_with_the_ground_truth_at_its_budget(rubric: Rubric) -> None:
    """The repair call repeats the first prompt with the judge's unusable reply: whether
    it fits is decided with the same stand-in, so not by the ground truth's length."""
    window = _window_for(rubric, SHORT) + 1200
    outcomes: dict[str, list[tuple[str, str | None]]] = {}
    for truth in (TRUTH, LONG_TRUTH):
        outcomes[truth] = []
        for chars in range(0, 6000, 600):
            backend = ScriptedBackend(["not json " + "x" * chars, scripted_reply])
            grader = Grader(backend, context_tokens=window, ground_truth_budget=2000)
            result = await grader.grade(rubric, truth, SHORT)
            outcomes[truth].append((result.status, result.unscored_reason))
    assert outcomes[TRUTH] == outcomes[LONG_TRUTH]
    assert {("graded", None), ("unscored", "context_overflow")} <= set(outcomes[TRUTH])


#: a ground truth under a 2,000-character budget that the prompt holds in more: each
#: ``>>`` (a shell redirection) is written as the 16-character marker "[angle brackets]"
REDIRECTS = "[fault_spec] component=configmap/nginx-conf; namespace=web || " + "".join(
    f"init: echo 'server 10.0.0.{i}:80;' >> up.conf\n" for i in range(42)
)


async def test_a_ground_truth_the_prompt_writes_longer_is_counted_as_the_prompt_holds_it(
    rubric: Rubric,
) -> None:
    """A ground truth under the budget whose ``>>`` the prompt writes as longer markers
    is counted at the length the prompt holds it: a prompt judged to fit the window with
    the ground truth at its budget fits it as sent."""
    assert len(REDIRECTS) < 2000
    stand_in = ground_truth_stand_in(REDIRECTS, 2000)
    assert stand_in is not None
    assert len(stand_in) >= len(neutralize_untrusted(REDIRECTS).strip())
    # the smallest window the prompt fits as measured with the stand-in
    window = estimate_tokens(build_messages(rubric, stand_in, SHORT)) + 1536
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=window, ground_truth_budget=2000, retry=FAST)
    result = await grader.grade(rubric, REDIRECTS, SHORT)
    assert result.status == "graded" and len(backend.requests) == 1
    needed = estimate_tokens(backend.requests[0].messages) + 1536
    assert needed <= window, f"a prompt needing {needed} tokens sent to a {window}-token window"


#: a diagnosis written in Chinese (an agent answering in its user's language)
CJK = "用户服务的端口配置被改为9999，导致前端无法连接用户服务，根因在hotel命名空间。" * 40


@pytest.mark.real_model
async def test_a_chinese_diagnosis_judged_to_fit_fits_the_real_tokenizer(rubric: Rubric) -> None:
    """Chinese, Japanese, emoji and most non-Latin text take a token a character or
    more: a prompt the grader judges to fit the window fits it as the real model's
    tokenizer (SmolLM2's) counts it, so no judge is sent a prompt it silently cuts."""
    require_real_model()
    import llama_cpp

    tokenizer = llama_cpp.Llama(model_path=str(smollm2_gguf()), vocab_only=True, verbose=False)
    window = estimate_tokens(build_messages(rubric, TRUTH, CJK)) + 1536
    backend = ScriptedBackend([scripted_reply])
    grader = Grader(backend, context_tokens=window, retry=FAST)
    result = await grader.grade(rubric, TRUTH, CJK)
    assert result.status == "graded" and backend.requests
    for request in backend.requests:
        text = "\n".join(message.content for message in request.messages)
        tokens = len(tokenizer.tokenize(text.encode(), add_bos=False, special=False))
        assert tokens + request.params.max_tokens <= window, (
            f"judged to fit a {window}-token window, the prompt takes {tokens} tokens "
            f"+ {request.params.max_tokens} for the reply"
        )
