"""Per-question asking with the scripted judge: strict parsing, repair, cache, rubric key;
the confidence of an answer from the log-probabilities of its reply."""

from __future__ import annotations

import json
import math

import pytest

from judge.backends.scripted import ScriptedBackend, asked_question, scripted_reply
from judge.batch import RequestRecorder
from judge.cache import MemoryJudgeCache
from judge.calls import Completion, JudgeRequest, TokenLogprob
from judge.confidence import answer_token_confidences, confidence_tokens, with_logprob_confidence
from judge.errors import JudgeCallError
from judge.grader import Grader
from judge.reply import ParsedAnswer, ReplyInvalid, parse_answer_reply, parse_reply
from judge.retry import RetryPolicy
from judge.rubric import Rubric, load_rubric_dir

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
FAST = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01, jitter=0)


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def _all_yes(request: JudgeRequest) -> str:
    return scripted_reply(request)


async def test_per_question_asks_each_question_once_and_grades(rubric: Rubric) -> None:
    backend = ScriptedBackend([_all_yes] * 9)
    result = await Grader(backend, retry=FAST, asking="per_question").grade(
        rubric, TRUTH, DIAGNOSIS
    )
    assert result.status == "graded"
    assert [asked_question(r) for r in backend.requests] == [q.id for q in rubric.questions]
    assert result.outcome is not None and result.outcome.passed
    assert [v.call_index for v in result.votes] == list(range(9))


async def test_a_bad_answer_gets_one_repair_for_that_question_only(rubric: Rubric) -> None:
    script = [_all_yes, "not json", _all_yes, *([_all_yes] * 7)]
    backend = ScriptedBackend(script)  # type: ignore[arg-type]
    result = await Grader(backend, retry=FAST, asking="per_question").grade(
        rubric, TRUTH, DIAGNOSIS
    )
    assert result.status == "graded"
    assert [c.purpose for c in result.calls].count("repair") == 1
    repair = result.calls[2]
    assert repair.purpose == "repair" and "D1-Q2" in repair.request.messages[-1].content
    assert {v.question_id: v.call_index for v in result.votes}["D1-Q2"] == 2


async def test_two_bad_answers_make_the_grading_unscored(rubric: Rubric) -> None:
    wrong_id = json.dumps({"id": "D3-Q3", "answer": "yes", "evidence": ""})
    backend = ScriptedBackend(["not json", wrong_id])
    result = await Grader(backend, retry=FAST, asking="per_question").grade(
        rubric, TRUTH, DIAGNOSIS
    )
    assert result.status == "unscored" and result.unscored_reason == "unparseable_reply"
    assert result.detail is not None and "D1-Q1" in result.detail and "D3-Q3" in result.detail
    assert len(result.calls) == 2 and not result.answers


async def test_rendering_for_a_batch_asks_every_question_but_a_failed_call_ends_asking(
    rubric: Rubric,
) -> None:
    """A judge that records each request for a batch and answers none is sent every
    question: no question's request depends on another's reply, so all nine are calls a
    live grading makes first. A call that failed ends the grading at once."""
    recorder = RequestRecorder(ScriptedBackend())
    result = await Grader(recorder, retry=FAST, asking="per_question").grade(
        rubric, TRUTH, DIAGNOSIS
    )
    assert [asked_question(r) for r in recorder.requests] == [q.id for q in rubric.questions]
    assert result.status == "unscored" and len(result.calls) == 9
    failing = ScriptedBackend([JudgeCallError("the judge broke")])
    result = await Grader(failing, retry=FAST, asking="per_question").grade(
        rubric, TRUTH, DIAGNOSIS
    )
    assert (result.status, result.unscored_reason) == ("unscored", "judge_error")
    assert len(failing.requests) == len(result.calls) == 1


async def test_the_rubric_chooses_per_question_and_the_cache_keeps_each_question(
    rubric: Rubric,
) -> None:
    per_question = rubric.model_copy(update={"asking": "per_question"})
    assert per_question.version != rubric.version  # the asking mode is part of the version
    cache = MemoryJudgeCache()
    first = ScriptedBackend([_all_yes] * 9)
    await Grader(first, retry=FAST, cache=cache).grade(per_question, TRUTH, DIAGNOSIS)
    again = ScriptedBackend([])
    result = await Grader(again, retry=FAST, cache=cache).grade(per_question, TRUTH, DIAGNOSIS)
    assert len(first.requests) == 9 and not again.requests
    assert result.status == "graded" and all(c.cached for c in result.calls)


def test_the_asking_key_is_validated(rubric: Rubric) -> None:
    data = rubric.model_dump(mode="json")
    with pytest.raises(ValueError, match="asking"):
        Rubric.model_validate({**data, "asking": "sometimes"})


def test_confidence_is_the_share_of_yes_against_no_at_the_answer_token() -> None:
    tokens = (
        TokenLogprob(token='{"reasoning":"x","answer":"', logprob=-0.1),
        TokenLogprob(
            token="no",
            logprob=math.log(0.6),
            top=(("no", math.log(0.6)), ("yes", math.log(0.2)), ("maybe", math.log(0.2))),
        ),
        TokenLogprob(token='"}', logprob=-0.01),
    )
    found = answer_token_confidences(tokens, single_id="D1-Q1")
    assert found == {"D1-Q1": pytest.approx(0.25)}  # 0.2 / (0.2 + 0.6)


def test_confidence_finds_the_answers_of_an_sregym_array() -> None:
    def tok(text: str, top: tuple[tuple[str, float], ...] = ()) -> TokenLogprob:
        return TokenLogprob(token=text, logprob=top[0][1] if top else -0.01, top=top)

    tokens = (
        tok('[{"id":"D1-Q1","answer":"'),
        tok("Yes", (("Yes", math.log(0.9)), ("No", math.log(0.1)))),
        tok('"},{"id":"D1-Q2","answer":"'),
        tok("No", (("No", math.log(0.7)), ("Yes", math.log(0.3)))),
        tok('"}]'),
    )
    found = answer_token_confidences(tokens)
    assert found == {"D1-Q1": pytest.approx(0.9), "D1-Q2": pytest.approx(0.3)}


def _one_token_a_character(text: str, p_yes: dict[int, float]) -> list[TokenLogprob]:
    """``text`` as one token per character, except the answer values starting at the
    offsets of ``p_yes``: one token each, with P(yes) among its alternatives."""
    tokens: list[TokenLogprob] = []
    i = 0
    while i < len(text):
        if i in p_yes:
            word = "yes" if text.startswith("yes", i) else "no"
            p = p_yes[i]
            top = (("yes", math.log(p)), ("no", math.log(1 - p)))
            tokens.append(TokenLogprob(token=word, logprob=dict(top)[word], top=top))
            i += len(word)
        else:
            tokens.append(TokenLogprob(token=text[i], logprob=0.0))
            i += 1
    return tokens


def test_confidence_of_an_sregym_item_with_answer_before_id_is_its_own() -> None:
    """An SREGym array item may list ``answer`` before ``id``: the confidence read at
    that answer belongs to that item's question, not to the previous item's."""
    text = json.dumps([{"answer": "yes", "id": "D1-Q1"}, {"answer": "no", "id": "D1-Q2"}])
    first = text.index('"yes"') + 1
    second = text.index('"no"') + 1
    tokens = _one_token_a_character(text, {first: 0.95, second: 0.2})
    found = answer_token_confidences(tokens)
    # D1-Q1's answer token has P(yes) 0.95; D1-Q2's has 0.2
    assert found.get("D1-Q1") == pytest.approx(0.95)
    assert found.get("D1-Q2", 0.2) == pytest.approx(0.2)


@pytest.mark.parametrize("single_id", [None, "D1-Q1"])
def test_the_tokens_a_cache_keeps_give_the_confidences_of_the_whole_reply(
    single_id: str | None,
) -> None:
    """A judge cache keeps of a reply's log-probabilities only the answer tokens and the
    text between them: read back, they give every question the confidence the whole
    reply gave, in a reply of objects or of an SREGym array, asked whole or one question
    at a time."""
    objects = json.dumps({"D1-Q1": {"answer": "yes"}, "D1-Q2": {"answer": "no"}})
    items = json.dumps([{"answer": "yes", "id": "D1-Q1"}, {"id": "D1-Q2", "answer": "no"}])
    for text in (objects, items):
        at = [text.index('"yes"') + 1, text.index('"no"') + 1]
        tokens = _one_token_a_character(text, {at[0]: 0.95, at[1]: 0.2})
        kept = confidence_tokens(tokens)
        assert len(kept) == 5 and "".join(t.token for t in kept) == text
        whole = answer_token_confidences(tokens, single_id=single_id)
        assert whole and answer_token_confidences(kept, single_id=single_id) == whole
    assert confidence_tokens(()) == ()


def _parts(parts: list[tuple[str, dict[str, float] | None]]) -> tuple[TokenLogprob, ...]:
    """Tokens of the given texts; one with probabilities carries its own and the
    alternatives' (an answer value)."""
    tokens = []
    for text, probs in parts:
        if probs is None:
            tokens.append(TokenLogprob(token=text, logprob=0.0))
        else:
            top = tuple((t, math.log(p)) for t, p in probs.items())
            tokens.append(TokenLogprob(token=text, logprob=math.log(probs[text]), top=top))
    return tuple(tokens)


def test_confidence_is_read_at_the_replys_answer_not_at_a_draft_in_its_thinking() -> None:
    """A reasoning model's leading <think> block is not the reply: the parser reads the
    answer after it, and the confidence is read at that answer's token, not at a draft's
    in the thinking. The cache keeps that token, and no draft's."""
    tokens = _parts(
        [
            ('<think>Draft: {"answer": "', None),
            ("yes", {"yes": 0.99, "no": 0.01}),
            (
                '"} - on reflection, no.</think>\n{"reasoning": "r", "evidence": "", "answer": "',
                None,
            ),
            ("no", {"no": 0.9, "yes": 0.1}),
            ('", "confidence": "high"}', None),
        ]
    )
    text = "".join(t.token for t in tokens)
    parsed = parse_answer_reply(text, "D1-Q1")
    assert parsed.answer is False
    completion = Completion(text=text, model="m", logprobs=tokens)
    got = with_logprob_confidence({"D1-Q1": parsed}, completion, single_id="D1-Q1")
    # P(no) / (P(yes) + P(no)) at the reply's answer token, not 0.01 from the draft
    assert got["D1-Q1"].confidence == pytest.approx(0.9)
    kept = confidence_tokens(tokens)
    assert "".join(t.token for t in kept) == text
    assert [t.token for t in kept if t.top] == ["no"]
    assert answer_token_confidences(kept, single_id="D1-Q1") == pytest.approx({"D1-Q1": 0.1})


def test_single_asking_confidence_ignores_a_draft_in_the_thinking(rubric: Rubric) -> None:
    """The same for a reply answering the whole rubric: a draft's answer to D1-Q1 in the
    thinking does not stand for the reply's."""
    parts: list[tuple[str, dict[str, float] | None]] = [
        ('<think>maybe {"D1-Q1": {"answer": "', None),
        ("yes", {"yes": 0.99, "no": 0.01}),
        ('"}} no wait</think>\n{', None),
    ]
    for i, q in enumerate(rubric.questions):
        parts.append((f'{", " if i else ""}"{q.id}": {{"reasoning": "r", "answer": "', None))
        parts.append(("no", {"no": 0.8, "yes": 0.2}))
        parts.append(('", "evidence": "", "confidence": "high"}', None))
    parts.append(("}", None))
    tokens = _parts(parts)
    text = "".join(t.token for t in tokens)
    parsed = parse_reply(text, rubric)
    got = with_logprob_confidence(parsed, Completion(text=text, model="m", logprobs=tokens))
    assert {qid: a.confidence for qid, a in got.items()} == {
        q.id: pytest.approx(0.8) for q in rubric.questions
    }
    kept = confidence_tokens(tokens)
    assert answer_token_confidences(kept) == answer_token_confidences(tokens)
    assert len([t for t in kept if t.top]) == len(rubric.questions)  # no draft token kept


def test_confidence_is_read_in_the_fenced_reply_not_in_prose_around_it() -> None:
    """Prose before a fenced reply may hold an unfinished draft answer: the confidence
    is read in the value the parser reads."""
    tokens = _parts(
        [
            ('I first thought "answer": "', None),
            ("yes", {"yes": 0.95, "no": 0.05}),
            ('" but no.\n```json\n{"answer": "', None),
            ("no", {"no": 0.7, "yes": 0.3}),
            ('"}\n```', None),
        ]
    )
    assert answer_token_confidences(tokens, single_id="D1-Q1") == pytest.approx({"D1-Q1": 0.3})
    assert answer_token_confidences(confidence_tokens(tokens), single_id="D1-Q1") == (
        pytest.approx({"D1-Q1": 0.3})
    )


@pytest.mark.parametrize(
    ("logprob", "top", "confidence"),
    [
        (800.0, (("no", -2.5),), 1 / (1 + math.exp(-2.5))),  # counts as log-probability 0
        (math.inf, (("yes", math.inf), ("no", -2.5)), 0.0),  # counts as no mass at all
        (math.nan, (("no", -2.5),), 0.0),
    ],
    ids=["large-positive", "infinity", "nan"],
)
def test_a_log_probability_out_of_range_still_gives_a_probability(
    logprob: float, top: tuple[tuple[str, float], ...], confidence: float
) -> None:
    """A server's log-probability above 0 (a bug, a rescaling proxy, JSON's ``Infinity``)
    neither fails the grading of a usable reply nor gives a confidence outside [0, 1]:
    one above 0 counts as 0, an infinite or NaN one not at all."""
    tokens = (
        TokenLogprob(token='{"D1-Q1": {"answer": "', logprob=0.0),
        TokenLogprob(token="yes", logprob=logprob, top=top),
        TokenLogprob(token='"}}', logprob=0.0),
    )
    completion = Completion(text="".join(t.token for t in tokens), model="m", logprobs=tokens)
    parsed = {"D1-Q1": ParsedAnswer(answer=True, evidence="", reasoning="", confidence=0.9)}
    got = with_logprob_confidence(parsed, completion)
    assert got["D1-Q1"].confidence == pytest.approx(confidence, abs=1e-4)  # kept to 4 places


@pytest.mark.parametrize("key", ["D1-Q1", "D1-Q2", "note"])
def test_a_per_question_reply_carrying_a_second_answer_is_refused(key: str) -> None:
    """A per-question reply holds one answer: an answer object that also carries an
    answer under a key (its own question id or another) answers twice, and gets the
    repair call instead of the outer answer being taken."""
    inner = {"reasoning": "named", "evidence": "", "answer": "yes", "confidence": "high"}
    reply = json.dumps(
        {"reasoning": "r", "evidence": "", "answer": "no", "confidence": "low", key: inner}
    )
    with pytest.raises(ReplyInvalid, match=f"more than one answer .one more under {key}"):
        parse_answer_reply(reply, "D1-Q1")
    assert parse_answer_reply(json.dumps({"D1-Q1": inner}), "D1-Q1").answer is True


def _escaped(part: bytes) -> str:
    """A token's text as OpenAI-compatible servers name a token that is part of a
    character: its bytes escaped (``\\xf0\\x9f``)."""
    return "".join(f"\\x{b:02x}" for b in part)


def test_a_character_split_over_tokens_keeps_the_logprob_confidence(rubric: Rubric) -> None:
    """A character the tokenizer splits over several tokens (an emoji, a rare symbol)
    comes back as tokens named by their escaped bytes, the bytes themselves in
    ``bytes``: the reply is read from the bytes, so every answer still gets the
    confidence of its answer token, and the tokens a cache keeps give the same."""
    emoji = "\U0001f642".encode()
    parts: list[tuple[str, dict[str, float] | None]] = [("{", None)]
    for i, q in enumerate(rubric.questions):
        head = f'{", " if i else ""}"{q.id}": {{"reasoning": "named", "evidence": "'
        parts += [(head + "user-service fails ", None), ("\U0001f642", None)]
        parts += [('", "answer": "', None), ("yes", {"yes": 0.3, "no": 0.7})]
        parts.append(('", "confidence": "high"}', None))
    parts.append(("}", None))
    tokens: list[TokenLogprob] = []
    for token in _parts(parts):
        if token.token == "\U0001f642":  # as servers send it: two tokens of two bytes
            for half in (emoji[:2], emoji[2:]):
                tokens.append(TokenLogprob(token=_escaped(half), logprob=-0.1, bytes=tuple(half)))
        else:
            tokens.append(token.model_copy(update={"bytes": tuple(token.token.encode())}))
    text = "".join(part for part, _ in parts)
    parsed = parse_reply(text, rubric)
    got = with_logprob_confidence(parsed, Completion(text=text, model="m", logprobs=tuple(tokens)))
    assert {qid: a.confidence for qid, a in got.items()} == {
        q.id: pytest.approx(0.3) for q in rubric.questions
    }
    kept = confidence_tokens(tokens)
    assert "".join(t.token for t in kept) == text
    assert answer_token_confidences(kept) == answer_token_confidences(tokens)
