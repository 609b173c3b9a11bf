"""The batch exchange format: custom ids, result lines, checks against the requests."""

from __future__ import annotations

import json

import pytest

from judge.batch import (
    BatchAnswers,
    BatchLineError,
    CustomId,
    ExpectedRequest,
    check_results,
    parse_custom_id,
    parse_result_lines,
    request_hash,
    request_line,
)
from judge.calls import ChatMessage, Completion, JudgeRequest

GRADING = "0123456789abcdef0123456789abcdef"


def test_a_custom_id_names_grading_call_and_sample_and_reads_back() -> None:
    cid = CustomId(GRADING, 3, 1)
    assert str(cid) == f"rg-{GRADING}-c3-s1"
    assert parse_custom_id(str(cid)) == cid


@pytest.mark.parametrize(
    "text", ["", "rg-abc-c0-s0", f"rg-{GRADING}-c0", f"rg-{GRADING.upper()}-c0-s0", f"x{GRADING}"]
)
def test_anything_else_is_no_custom_id(text: str) -> None:
    with pytest.raises(ValueError, match="custom_id"):
        parse_custom_id(text)


def test_a_request_line_is_an_openai_batch_line() -> None:
    line = json.loads(request_line("rg-x", {"model": "m"}))
    assert line == {
        "custom_id": "rg-x",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m"},
    }


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{", "line"),
        ("[1]", "line"),
        ('{"custom_id": 3}', "custom_id"),
        ('{"custom_id": "a", "response": 1}', "response"),
        ('{"custom_id": "a", "response": {"status_code": "200"}}', "status_code"),
        ('{"custom_id": "a", "response": {"status_code": 200, "body": []}}', "body"),
    ],
)
def test_an_unreadable_result_line_names_its_line_and_field(text: str, field: str) -> None:
    with pytest.raises(BatchLineError) as caught:
        parse_result_lines(f"\n{text}\n")
    assert (caught.value.line, caught.value.field) == (2, field)


def test_result_lines_end_at_line_feeds_only() -> None:
    """A runner that writes UTF-8 as is (``vllm run-batch``) leaves U+2028, U+2029 and
    U+0085 raw inside a reply's strings, as JSON allows: each result is still one line
    with its reply whole, and a carriage return before a line feed is no part of it."""
    said = "out of memory\u2028at noon\u2029then\x85restarted"
    body = {"model": "m", "choices": [{"message": {"role": "assistant", "content": said}}]}
    lines = [
        json.dumps(
            {"custom_id": cid, "response": {"status_code": 200, "body": body}, "error": None},
            ensure_ascii=False,
        )
        for cid in ("a", "b")
    ]
    results = parse_result_lines(f"{lines[0]}\r\n{lines[1]}\n")
    assert [(r.line, r.custom_id, r.ok) for r in results] == [(1, "a", True), (2, "b", True)]
    assert results[1].body == body


def _body(model: str, text: str) -> dict[str, object]:
    return {
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def _line(cid: str, body: object = None, status: int = 200, error: object = None) -> str:
    return json.dumps(
        {
            "id": "b",
            "custom_id": cid,
            "response": {"status_code": status, "body": body},
            "error": error,
        }
    )


def test_results_are_checked_against_their_requests() -> None:
    expected = {
        c: ExpectedRequest(c, "gpt-4o-mini", "json_schema") for c in ("a", "b", "c", "d", "e")
    }
    text = "\n".join(
        [
            _line("a", _body("gpt-4o-mini-2024-07-18", "{}")),  # a dated snapshot of the alias
            _line("b", _body("gpt-4o", "{}")),  # another model
            _line("c", {"error": "x"}, status=500),
            _line("d", None, error={"code": "batch_expired", "message": "expired"}),
            _line("e", _body("gpt-4o-mini", "{}")),  # kept already
            _line("z", _body("gpt-4o-mini", "{}")),  # no such request
            _line("a", _body("gpt-4o-mini", "{}")),  # twice
        ]
    )
    checked = check_results(parse_result_lines(text), expected, answered={"e"}, via="batch b1")
    assert list(checked.answers) == ["a"]
    answer = checked.answers["a"]
    assert (answer.text, answer.prompt_tokens, answer.via, answer.response_format) == (
        "{}",
        10,
        "batch b1",
        "json_schema",
    )
    assert checked.failures == {"c": "HTTP 500: x", "d": "batch_expired: expired"}
    assert checked.duplicates == 1
    assert [(r.custom_id, r.line) for r in checked.refused] == [("b", 2), ("z", 6), ("a", 7)]


def test_a_failure_kept_from_the_same_result_is_a_duplicate() -> None:
    """A failed result whose failure is kept already (by its ``id``) is a duplicate;
    another result failing the same request, or one with no id, is a new failure."""
    expected = {c: ExpectedRequest(c, "gpt-4o-mini", "json_schema") for c in ("a", "b", "c")}
    text = "\n".join(
        [
            _line("a", {"error": "x"}, status=500),  # id "b", the failure kept for "a"
            _line("b", {"error": "x"}, status=500),  # "b" failed by another result
            json.dumps({"custom_id": "c", "response": None, "error": "x"}),  # no id
        ]
    )
    kept = {"a": "b", "b": "an-earlier-run", "c": "b"}
    checked = check_results(
        parse_result_lines(text), expected, answered=set(), via=None, failed=kept
    )
    assert (checked.duplicates, sorted(checked.failures)) == (1, ["b", "c"])
    assert checked.failed_by == {"b": "b"}


def test_a_result_that_is_no_answer_fails_saying_what_it_said() -> None:
    """A refusal and a reply without choices are failures with the server's words, not
    an empty reply nor a bare exception type."""
    expected = {c: ExpectedRequest(c, "gpt-4o-mini", "json_schema") for c in ("r", "n")}
    refused = _body("gpt-4o-mini", "")
    refused["choices"][0]["message"] = {"role": "assistant", "content": None,  # type: ignore[index]
                                        "refusal": "I cannot help with that."}  # fmt: skip
    text = "\n".join([_line("r", refused), _line("n", {"model": "gpt-4o-mini", "choices": []})])
    checked = check_results(parse_result_lines(text), expected, answered=set(), via=None)
    assert not checked.answers
    assert "I cannot help with that." in checked.failures["r"]
    assert "without choices" in checked.failures["n"]


async def test_batch_answers_give_each_kept_reply_once_then_ask_live() -> None:
    request = JudgeRequest(messages=(ChatMessage(role="user", content="q"),), reply_schema={})

    class Live:
        name, model, base_url = "openai", "m", None
        asked = 0

        async def complete(self, r: JudgeRequest) -> Completion:
            Live.asked += 1
            return Completion(text="live", model="m")

        async def probe(self) -> None: ...

        async def aclose(self) -> None: ...

    kept = Completion(text="batch", model="m", via="batch 1")
    answers = BatchAnswers(Live(), {request_hash(request): [kept]})
    assert (await answers.complete(request)).text == "batch"
    assert (await answers.complete(request)).text == "live"
    assert (Live.asked, answers.live_calls) == (1, 1)
