"""Asking "does it avoid ..." questions positively, and replies that contradict themselves
(issue 18, item 4).

A small judge answered "no" to 91 of 108 "does it avoid ..." questions where humans said
yes, often with reasoning such as "The diagnosis avoids naming a different component as
the root cause." A question may be asked in its positive wording, its answer inverted
in code; the recorded answer stays in the rubric's polarity. A reasoning that plainly
says the opposite of its answer sends the grading to review.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge.backends.openai import OpenAIBackend
from judge.backends.streaming import StreamLimits
from judge.consistency import reasoning_contradicts
from judge.errors import RubricError
from judge.grader import Grader
from judge.retry import RetryPolicy
from judge.rubric import Rubric, load_rubric, load_rubric_dir, rubric_from_mapping
from tests.support.judge_server import running_judge_server

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
FAST = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01, jitter=0)
#: the default rubric before issue 18, whose version stored gradings name
V1_RUBRIC = Path(__file__).parents[1] / "fixtures" / "rubrics" / "sregym-rca-v1+4067ac07a575.yaml"


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def full_reply(rubric: Rubric, answers: dict[str, tuple[str, str]]) -> str:
    """Every question yes with the diagnosis' quote, unless ``answers`` says (answer, reasoning)."""
    entries = {}
    for q in rubric.questions:
        answer, reasoning = answers.get(q.id, ("yes", "It does."))
        entries[q.id] = {
            "reasoning": reasoning,
            "evidence": "sets USER_PORT=9999" if answer == "yes" and q.requires_quote else "",
            "answer": answer,
            "confidence": "high",
        }
    return json.dumps(entries)


async def _grade(rubric: Rubric, reply: str, **grader: Any) -> tuple[Any, list[Any]]:
    with running_judge_server(replies=[reply]) as server:
        backend = OpenAIBackend(
            "m", base_url=server.openai_url, limits=StreamLimits(5, 5, None), logprobs=False
        )
        try:
            result = await Grader(backend, retry=FAST, **grader).grade(rubric, TRUTH, DIAGNOSIS)
        finally:
            await backend.aclose()
        return result, server.requests


async def test_positive_asking_sends_the_positive_wording_and_records_the_rubrics(
    rubric: Rubric,
) -> None:
    avoid = [q.id for q in rubric.questions if q.positive_text]
    said = {qid: ("no", "Nothing of the kind.") for qid in avoid}
    result, requests = await _grade(rubric, full_reply(rubric, said), ask_as="positive")
    prompt = requests[0]["messages"][1]["content"]
    d1q3 = rubric.question("D1-Q3")
    assert f"D1-Q3 {d1q3.positive_text}" in prompt
    assert d1q3.text not in prompt
    answers = {a.question_id: a for a in result.answers}
    for qid in avoid:  # the judge said "no" to the positive question: "yes", it avoids
        assert answers[qid].judge_answer is True and answers[qid].answer is True
        assert answers[qid].reasoning.startswith("[asked: Does it ")
        assert "-> no] Nothing of the kind." in answers[qid].reasoning
    assert result.outcome.yes_count == 9 and result.outcome.passed
    assert {v.question_id: v.answer for v in result.votes}["D1-Q3"] is True
    # the raw reply is stored as the judge wrote it, in the polarity it was asked
    assert json.loads(result.calls[0].completion.text)["D1-Q3"]["answer"] == "no"


async def test_a_positive_yes_is_recorded_as_no(rubric: Rubric) -> None:
    said = {"D1-Q3": ("yes", "It names redis as the root cause.")}
    result, _ = await _grade(rubric, full_reply(rubric, said), ask_as="positive")
    d1q3 = next(a for a in result.answers if a.question_id == "D1-Q3")
    assert d1q3.answer is False and d1q3.judge_answer is False
    assert "reasoning_contradicts" not in result.review_reasons


async def test_a_rubric_question_may_ask_positively_on_its_own(rubric: Rubric) -> None:
    data = rubric.model_dump(mode="json")
    data["dimensions"][0]["questions"][2]["ask_as"] = "positive"
    positive = rubric_from_mapping(data, source="test")
    assert positive.version != rubric.version
    said = {"D1-Q3": ("no", "Only user-service is blamed.")}
    result, requests = await _grade(positive, full_reply(positive, said))
    prompt = requests[0]["messages"][1]["content"]
    assert f"D1-Q3 {positive.question('D1-Q3').positive_text}" in prompt
    assert f"D2-Q3 {positive.question('D2-Q3').text}" in prompt  # the others as written
    assert next(a for a in result.answers if a.question_id == "D1-Q3").answer is True


def test_positive_asking_needs_a_positive_wording(rubric: Rubric) -> None:
    data = rubric.model_dump(mode="json")
    data["dimensions"][0]["questions"][0]["ask_as"] = "positive"
    with pytest.raises(RubricError, match="ask_as: positive needs positive_text"):
        rubric_from_mapping(data, source="test")


def test_rubrics_without_the_new_keys_keep_their_version() -> None:
    # the default rubric as it was before issue 18: stored gradings name this version
    before = load_rubric(V1_RUBRIC)
    assert before.version == "v1+4067ac07a575"
    data = yaml.safe_load(V1_RUBRIC.read_text(encoding="utf-8"))
    explicit = json.loads(json.dumps(data))
    for dimension in explicit["dimensions"]:
        for q in dimension["questions"]:
            q.update(ask_as="as_written", positive_text="", positive_hint="", claims=None)
    explicit["reply_format"] = "full"
    assert rubric_from_mapping(explicit, source="explicit").version == "v1+4067ac07a575"


async def test_reasoning_that_says_the_opposite_goes_to_review(rubric: Rubric) -> None:
    said = {"D1-Q3": ("no", "The diagnosis avoids naming a different component as the root cause.")}
    result, _ = await _grade(rubric, full_reply(rubric, said))
    assert "reasoning_contradicts" in result.review_reasons
    assert "reasoning contradicts the answer for D1-Q3" in (result.detail or "")
    # the answer itself stands: a human decides
    assert next(a for a in result.answers if a.question_id == "D1-Q3").answer is False


async def test_contradictions_are_judged_against_the_question_as_asked(rubric: Rubric) -> None:
    # asked "does it name a healthy component ...?", "no" with "does not name" is consistent
    asked = rubric.question("D1-Q3").positive_text.removeprefix("Does it ").rstrip("?")
    said = {"D1-Q3": ("no", f"It does not {asked}.")}
    result, _ = await _grade(rubric, full_reply(rubric, said), ask_as="positive")
    assert "reasoning_contradicts" not in result.review_reasons
    said = {"D1-Q3": ("yes", f"It does not {asked}.")}
    result, _ = await _grade(rubric, full_reply(rubric, said), ask_as="positive")
    assert "reasoning_contradicts" in result.review_reasons


Q_AVOID = "Does it avoid naming a different component as the root cause?"
Q_NAME = "Does the diagnosis name the component where the fault originates?"
Q_KIND = "Does it identify the kind of fault (e.g. misconfiguration, resource limit, crash)?"
#: a judge's usual wording for a yes to Q_NAME: it names the origin and no other component
CONSISTENT_YES = "It names user-service as the origin; it does not name any other component."


@pytest.mark.parametrize(
    ("question", "answer", "reasoning", "contradicts"),
    [
        (
            Q_AVOID,
            False,
            "The diagnosis avoids naming a different component as the root cause.",
            True,
        ),
        (
            Q_AVOID,
            True,
            "The diagnosis avoids naming a different component as the root cause.",
            False,
        ),
        (
            Q_AVOID,
            False,
            "The diagnosis does not avoid naming another one: it blames redis.",
            False,
        ),
        (Q_AVOID, True, "It fails to avoid naming another component as the cause.", True),
        (Q_AVOID, False, "It blames redis as well; it avoids nothing.", False),
        (Q_NAME, False, "It names rate-quoter as the origin, but the truth names geo.", False),
        (Q_NAME, False, "does not name the component ... only mentions rate-quoter", False),
        (
            Q_NAME,
            True,
            "The diagnosis does not name the component where the fault originates.",
            True,
        ),
        (Q_NAME, False, "The diagnosis correctly names the component where it originates.", True),
        (Q_NAME, False, "Yes, user-service is named as the origin.", True),
        (Q_NAME, True, "Yes, user-service is named as the origin.", False),
        (Q_NAME, True, "No obvious gap: the component is named.", False),
        (Q_NAME, True, "Notably, the component is named.", False),
        # a statement about another component neither affirms nor denies the question's
        (Q_NAME, True, CONSISTENT_YES, False),
        (Q_NAME, True, "It names user-service; it does not name another component.", False),
        (Q_NAME, True, "It doesn't name a different component as the origin.", False),
        (Q_NAME, True, "It does not name the frontend component as the origin.", False),
        (Q_NAME, True, "It does not name any component other than user-service.", False),
        (Q_NAME, False, "It names a different component, redis, as the origin.", False),
        # ... but one about the question's own object still does
        (Q_NAME, True, "It does not name any component as the origin.", True),
        (Q_NAME, True, "The diagnosis does not name the correct component.", True),
        (Q_NAME, True, "It doesn't name a component where the fault originates.", True),
        (Q_NAME, True, "It fails to name a single component; only symptoms.", True),
        (Q_NAME, False, "It names the root component, user-service.", True),
        (Q_KIND, True, "It identifies a misconfiguration of the port.", False),
        (Q_KIND, False, "It identifies a crash, but the fault is a resource limit.", False),
        (Q_KIND, True, "It does not identify the kind of fault.", True),
        (Q_KIND, True, "", False),
    ],
)
def test_reasoning_contradiction_rules(
    question: str, answer: bool, reasoning: str, contradicts: bool
) -> None:
    assert reasoning_contradicts(question, answer, reasoning) is contradicts


async def test_a_yes_naming_the_origin_and_no_other_component_keeps_its_pass(
    rubric: Rubric,
) -> None:
    """A reasoning that says the diagnosis names the origin and no other component is
    consistent with its yes: a correct diagnosis answered yes nine times passes, not
    held for review as self-contradicting."""
    said = {"D1-Q1": ("yes", CONSISTENT_YES)}
    result, _ = await _grade(rubric, full_reply(rubric, said))
    assert result.status == "graded", result.detail
    assert "reasoning_contradicts" not in result.review_reasons, result.detail
    assert result.passed is True


@pytest.mark.parametrize(
    ("answer", "reasoning"),
    [
        (True, "The diagnosis does not name the component frontend; it names user-service."),
        (False, "The diagnosis names the component frontend, but the fault originates in geo."),
    ],
)
def test_a_statement_about_a_named_other_component_contradicts_nothing(
    answer: bool, reasoning: str
) -> None:
    """A component named right after the object ("the component frontend") is another
    component, as "the frontend component" is: the statement neither affirms nor denies
    the question's object, whichever way the name is placed."""
    swapped = reasoning.replace("the component frontend", "the frontend component")
    assert reasoning_contradicts(Q_NAME, answer, swapped) is False
    assert reasoning_contradicts(Q_NAME, answer, reasoning) is False


async def test_a_yes_that_rules_out_a_named_other_component_keeps_its_pass(
    rubric: Rubric,
) -> None:
    """A yes whose reasoning says the diagnosis does not name "the component frontend"
    but names the origin is consistent: a correct diagnosis answered yes nine times
    passes, not held for review as self-contradicting."""
    said = {
        "D1-Q1": (
            "yes",
            "The diagnosis does not name the component frontend as the origin; "
            "it names user-service.",
        )
    }
    result, _ = await _grade(rubric, full_reply(rubric, said))
    assert result.status == "graded", result.detail
    assert "reasoning_contradicts" not in result.review_reasons, result.detail
    assert result.passed is True


@pytest.mark.parametrize(
    "reasoning",
    [
        "The diagnosis never names the component where the fault originates.",
        "It never explicitly names the component.",
        "It doesn’t name the component where the fault originates.",
        "The diagnosis didn’t name any component.",
    ],
)
def test_never_and_typographic_apostrophes_deny(reasoning: str) -> None:
    """A reasoning saying the diagnosis "never names" the object denies it as "does not
    name" does, and "doesn’t" with a typographic apostrophe as "doesn't" does: such a
    reasoning contradicts a yes and agrees with a no."""
    assert reasoning_contradicts(Q_NAME, True, reasoning) is True
    assert reasoning_contradicts(Q_NAME, False, reasoning) is False


Q_IMPACT = "Is the impact it reports consistent with the ground truth's?"


@pytest.mark.parametrize(
    ("question", "answer", "reasoning", "contradicts"),
    [
        (
            Q_IMPACT,
            True,
            "No-fault control scenario: the diagnosis reports a healthy cluster, "
            "as the ground truth does.",
            False,
        ),
        (Q_NAME, True, "No-op rollout aside, the component is named.", False),
        (Q_NAME, True, "No - the diagnosis names frontend.", True),
        (Q_NAME, True, "No- the diagnosis names frontend.", True),
        (Q_NAME, False, "Yes -it names user-service.", True),
    ],
)
def test_a_word_joined_to_no_or_yes_by_a_hyphen_is_no_answer(
    question: str, answer: bool, reasoning: str, contradicts: bool
) -> None:
    """A reasoning opening with a hyphenated word ("No-fault control scenario", "No-op")
    does not open with the answer "no", so a consistent yes keeps its pass; a dash with
    a space beside it ("No - it names frontend") still opens with the answer."""
    assert reasoning_contradicts(question, answer, reasoning) is contradicts
