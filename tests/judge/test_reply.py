"""Strict parsing of judge replies in our own format and SREGym's."""

from __future__ import annotations

import json

import pytest

from judge.reply import ReplyInvalid, parse_reply
from judge.rubric import Rubric, load_rubric_dir
from tests.support.judge_server import sregym_reply

IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def _own(answer: object = "yes", ids: list[str] = IDS) -> dict[str, object]:
    return {
        qid: {"reasoning": "r", "evidence": "e", "answer": answer, "confidence": "medium"}
        for qid in ids
    }


def test_own_format_parses(rubric: Rubric) -> None:
    parsed = parse_reply(json.dumps(_own()), rubric)
    assert list(parsed) == IDS
    assert all(a.answer for a in parsed.values())
    assert parsed["D1-Q1"].confidence == 0.6
    assert parsed["D1-Q1"].evidence == "e"


def test_sregym_format_in_a_code_fence_parses(rubric: Rubric) -> None:
    reply = "Here is my grading:\n" + sregym_reply({"D1-Q1", "D2-Q2"}, evidence="port 9999")
    parsed = parse_reply(reply, rubric)
    assert {qid for qid, a in parsed.items() if a.answer} == {"D1-Q1", "D2-Q2"}
    assert parsed["D2-Q2"].evidence == "port 9999"
    assert parsed["D2-Q2"].confidence == 0.9


def test_wrapped_answers_array_parses(rubric: Rubric) -> None:
    items = [{"id": qid, "answer": "No", "evidence": ""} for qid in IDS]
    parsed = parse_reply(json.dumps({"answers": items}), rubric)
    assert not any(a.answer for a in parsed.values())
    assert parsed["D1-Q1"].confidence is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Yes", True),
        ("YES", True),
        ("yes", True),
        (" no ", False),
        ("No", False),
    ],
)
def test_answer_spellings(rubric: Rubric, raw: object, expected: bool) -> None:
    parsed = parse_reply(json.dumps(_own(raw)), rubric)
    assert all(a.answer is expected for a in parsed.values())


def test_a_fenced_reply_may_quote_backticks_in_its_strings(rubric: Rubric) -> None:
    """Evidence quoting a diagnosis' own inline code (```kubectl get pods```) is inside
    a JSON string: the reply is one code block, not three."""
    items = [{"id": q, "answer": "No", "evidence": "ran ```kubectl get pods``` first"}
             for q in IDS]  # fmt: skip
    for reply in (
        "```json\n" + json.dumps(items) + "\n```",
        "Here it is:\n```json\n" + json.dumps(items) + "\n```\nThat is all.",
    ):
        parsed = parse_reply(reply, rubric)
        assert set(parsed) == set(IDS) and "```kubectl" in parsed["D1-Q1"].evidence


def test_a_reasoning_models_thinking_before_its_reply_is_not_the_reply(rubric: Rubric) -> None:
    """qwen3 or deepseek-r1 behind a server that does not split the thinking out put
    ``<think>...</think>`` first: a brace in it (the schema recalled) was taken for the
    reply's start, and the answer after it was refused as incomplete JSON."""
    thinking = '<think>\nThe schema wants {"D1-Q1": {...}}; it names the deployment.\n</think>\n'
    for reply in (thinking + sregym_reply(set(IDS)), thinking.replace("think>", "thinking>")):
        if "thinking>" in reply:
            reply += json.dumps(_own())
        parsed = parse_reply(reply, rubric)
        assert set(parsed) == set(IDS)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("", "empty"),
        ("The diagnosis looks fine.", "no JSON"),
        (json.dumps(_own())[:-40], "not complete JSON"),
        (json.dumps(_own(ids=IDS[:-1])), "missing question id(s) D3-Q3"),
        (json.dumps(_own(ids=[*IDS, "D4-Q1"])), "unknown question id D4-Q1"),
        (json.dumps(_own("maybe")), "answer 'maybe' is not yes or no"),
        (json.dumps(_own(1)), "is not yes or no"),
        (json.dumps(_own(True)), "answer True is not yes or no"),
        (json.dumps(_own("true")), "answer 'true' is not yes or no"),
        (json.dumps(_own("y")), "answer 'y' is not yes or no"),
        (json.dumps(_own()) + " and more", "text after the JSON"),
        # a draft and a correction: which one is the reply? Asked again, never guessed
        (
            "Draft:\n" + sregym_reply(set(IDS)) + "\nCorrected:\n" + sregym_reply(set()),
            "more than one code block",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        # an integer past Python's 4,300 digits: a ValueError that no caller expected
        (json.dumps(_own())[:-1] + ', "note": 1' + "0" * 5000 + "}", "cannot be read"),
        ("```\nls -l\n```\n" + sregym_reply(set(IDS)), "more than one code block"),
        ('{"D1-Q1": {"answer": "yes"}, "D1-Q1": {"answer": "no"}}', "D1-Q1 appears more than once"),
        (
            json.dumps([{"id": q, "answer": "Yes"} for q in [*IDS, "D1-Q1"]]),
            "appears more than once",
        ),
        (json.dumps([{"answer": "Yes"}]), "not an object with an id"),
        (json.dumps("yes"), "no JSON object or array"),
        (json.dumps({q: "yes" for q in IDS}), "expected an object"),
        (
            json.dumps({q: {"answer": "yes", "evidence": 3} for q in IDS}),
            "evidence must be a string",
        ),
    ],
)
def test_bad_replies_are_rejected_with_precise_problems(
    rubric: Rubric, reply: str, problem: str
) -> None:
    with pytest.raises(ReplyInvalid) as info:
        parse_reply(reply, rubric)
    assert problem in str(info.value)


def test_a_duplicate_key_inside_an_answer_is_not_called_a_duplicate_question_id(
    rubric: Rubric,
) -> None:
    """The repair call must say precisely what was wrong: an entry that repeats its
    ``answer`` key is not a question id "answer" appearing twice."""
    entries = ",".join(
        f'"{q.id}": {{"reasoning": "r", "evidence": "", "answer": "yes", "answer": "no", '
        f'"confidence": "high"}}'
        for q in rubric.questions
    )
    with pytest.raises(ReplyInvalid) as caught:
        parse_reply("{" + entries + "}", rubric)
    assert not any("question id answer" in p for p in caught.value.problems), caught.value.problems


@pytest.mark.parametrize(
    "reply",
    [
        # a fenced draft, then a bare corrected object after the closing fence
        "```json\n" + json.dumps(_own("yes")) + "\n```\nCorrection:\n" + json.dumps(_own("no")),
        # a bare draft in the prose, then a fenced answer
        "Draft: "
        + json.dumps(_own("yes"))
        + "\nFinal:\n```json\n"
        + json.dumps(_own("no"))
        + "\n```",
    ],
    ids=["json-after-the-fence", "json-before-the-fence"],
)
def test_a_reply_with_a_second_json_answer_outside_its_code_block_is_refused(
    rubric: Rubric, reply: str
) -> None:
    """Two complete answer sets in one reply, one fenced and one bare, leave open which
    is the reply: the judge is asked again, neither is picked."""
    with pytest.raises(ReplyInvalid, match="JSON value outside its code block"):
        parse_reply(reply, rubric)


def test_prose_around_a_code_block_may_hold_brackets(rubric: Rubric) -> None:
    """Prose before or after the block is allowed, brackets and all, as long as it holds
    no complete JSON object or array; a long run of brackets is read at once."""
    fenced = "```json\n" + json.dumps(_own("no")) + "\n```"
    for before, after in [
        ("Grading {as asked} [see below]:\n", "\nDone: the answers are {yes, no}."),
        ("Note: " + "[" * 50_000 + "\n", "\n" + "[1, " * 10_000),
    ]:
        parsed = parse_reply(before + fenced + after, rubric)
        assert not any(a.answer for a in parsed.values())


def test_an_entry_whose_own_id_names_another_question_is_refused(rubric: Rubric) -> None:
    """An entry keyed by one question id whose ``id`` names another leaves open which
    question it answers: refused, as a per-question reply answering another question is."""
    shifted = {
        qid: {
            "id": IDS[(i + 1) % len(IDS)],
            "reasoning": "r",
            "evidence": "",
            "answer": "yes" if i % 2 else "no",
            "confidence": "high",
        }
        for i, qid in enumerate(IDS)
    }
    with pytest.raises(ReplyInvalid, match="the reply answers 'D1-Q2', not D1-Q1"):
        parse_reply(json.dumps(shifted), rubric)
    same = {qid: {**entry, "id": qid} for qid, entry in shifted.items()}
    assert set(parse_reply(json.dumps(same), rubric)) == set(IDS)


@pytest.mark.parametrize(
    "evidence", [[], {}, 0, False, ["x"]], ids=["list", "object", "zero", "false", "strings"]
)
def test_evidence_that_is_not_a_string_is_refused_whatever_its_value(
    rubric: Rubric, evidence: object
) -> None:
    """Evidence of any other type than a string (or null) gets the repair call, an empty
    list or a ``false`` as much as a list of quotes."""
    entries = {
        qid: {"reasoning": "r", "evidence": evidence, "answer": "no", "confidence": "low"}
        for qid in IDS
    }
    with pytest.raises(ReplyInvalid, match="evidence must be a string"):
        parse_reply(json.dumps(entries), rubric)
    compact = {qid: {"answer": "no", "quote": evidence} for qid in IDS}
    with pytest.raises(ReplyInvalid, match="D1-Q1: quote must be a string"):
        parse_reply(json.dumps(compact), rubric, reply_format="compact")


def test_null_evidence_is_empty_evidence(rubric: Rubric) -> None:
    """``"evidence": null`` is a "no" without evidence, not a schema violation."""
    entries = {
        qid: {"reasoning": "r", "evidence": None, "answer": "no", "confidence": "low"}
        for qid in IDS
    }
    assert {a.evidence for a in parse_reply(json.dumps(entries), rubric).values()} == {""}


def test_a_problem_quoting_a_lone_surrogate_of_the_reply_is_storable_text(
    rubric: Rubric,
) -> None:
    """A reply whose question id carries an escaped lone surrogate (``"D1-Q1\\ud800"``)
    is refused with problems that read it as U+FFFD, as a judge server's text is kept:
    they go into the repair prompt and the unscored detail, stored and hashed as UTF-8."""
    entries = _own()
    entries["D1-Q1\ud800"] = entries.pop("D1-Q1")
    text = json.dumps(entries)
    assert text.isascii()
    with pytest.raises(ReplyInvalid) as caught:
        parse_reply(text, rubric)
    assert "unknown question id D1-Q1\ufffd" in caught.value.problems
    assert str(caught.value).encode("utf-8")
    assert ReplyInvalid(["unexpected key x\udc00\x00"]).problems == ["unexpected key x\ufffd"]
