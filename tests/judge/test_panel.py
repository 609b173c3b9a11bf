"""Panels and self-consistency: votes per question, majority, splits to review."""

from __future__ import annotations

import json

import pytest

from judge import grader as grader_module
from judge import panel as panel_module
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import JudgeRequest
from judge.errors import JudgeUnavailable
from judge.grader import Grader, GradingFailed
from judge.panel import PanelGrader, PanelMember, combine_votes
from judge.retry import RetryPolicy
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric, load_rubric_dir

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
FAST = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01, jitter=0)
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def _saying(yes: set[str], *, model: str, times: int = 1) -> ScriptedBackend:
    def reply(request: JudgeRequest) -> str:
        return scripted_reply(request, yes=yes)

    return ScriptedBackend([reply] * times, model=model)


def _member(spec: str, backend: ScriptedBackend) -> PanelMember:
    return PanelMember(spec, Grader(backend, retry=FAST))


async def test_a_panel_of_two_keeps_both_votes_and_routes_a_split_to_review(
    rubric: Rubric,
) -> None:
    local = _saying(set(IDS), model="local")
    cloud = _saying(set(IDS) - {"D2-Q2"}, model="cloud")
    panel = PanelGrader([_member("scripted:local", local), _member("scripted:cloud", cloud)])
    result = await panel.grade(rubric, TRUTH, DIAGNOSIS)

    assert result.status == "graded"
    assert (result.judge_backend, result.judge_model) == ("panel", "scripted:local+scripted:cloud")
    assert len(result.votes) == 18 and len(result.calls) == 2
    on_split = [v for v in result.votes if v.question_id == "D2-Q2"]
    assert {(v.judge_spec, v.answer) for v in on_split} == {
        ("scripted:local", True),
        ("scripted:cloud", False),
    }
    # each vote points at the call its judge made
    for vote in result.votes:
        assert vote.call_index is not None
        assert result.calls[vote.call_index].model == vote.judge_spec.split(":", 1)[1]
    answer = next(a for a in result.answers if a.question_id == "D2-Q2")
    assert answer.judge_answer is False  # a tie counts as no
    assert answer.confidence == 0.5
    assert ReviewReason.JUDGE_SPLIT in result.review_reasons and result.needs_review
    assert result.detail is not None and "D2-Q2" in result.detail
    unanimous = next(a for a in result.answers if a.question_id == "D1-Q1")
    assert unanimous.judge_answer is True and unanimous.confidence == 1.0


async def test_a_unanimous_panel_needs_no_review(rubric: Rubric) -> None:
    panel = PanelGrader(
        [
            _member("scripted:a", _saying(set(IDS), model="a")),
            _member("scripted:b", _saying(set(IDS), model="b")),
        ]
    )
    result = await panel.grade(rubric, TRUTH, DIAGNOSIS)
    assert ReviewReason.JUDGE_SPLIT not in result.review_reasons
    assert result.outcome is not None and result.outcome.passed


async def test_samples_take_the_majority_with_distinct_recorded_seeds(rubric: Rubric) -> None:
    answers = [set(IDS), set(IDS) - {"D3-Q1"}, set(IDS)]
    script = [lambda r, yes=yes: scripted_reply(r, yes=yes) for yes in answers]
    backend = ScriptedBackend(script, model="sampled")
    grader = Grader(backend, retry=FAST)
    panel = PanelGrader([PanelMember("scripted:sampled", grader)], samples=3)
    result = await panel.grade(rubric, TRUTH, DIAGNOSIS)

    params = [call.request.params for call in result.calls]
    assert [p.temperature for p in params] == [0.7, 0.7, 0.7]
    assert sorted(p.seed for p in params) == [0, 1, 2]
    assert sorted({v.sample_index for v in result.votes}) == [0, 1, 2]
    d3q1 = next(a for a in result.answers if a.question_id == "D3-Q1")
    assert d3q1.judge_answer is True and d3q1.confidence == pytest.approx(2 / 3, abs=1e-4)
    assert ReviewReason.JUDGE_SPLIT in result.review_reasons
    assert result.judge_backend == "scripted" and result.judge_model == "sampled"


async def test_an_unscored_voter_makes_the_grading_unscored_with_every_call(
    rubric: Rubric,
) -> None:
    good = _saying(set(IDS), model="good")
    bad = ScriptedBackend(["not json", "still not json"], model="bad")
    panel = PanelGrader([_member("scripted:good", good), _member("scripted:bad", bad)])
    result = await panel.grade(rubric, TRUTH, DIAGNOSIS)
    assert result.status == "unscored" and result.unscored_reason == "unparseable_reply"
    assert result.detail is not None and result.detail.startswith("scripted:bad")
    assert len(result.calls) == 3
    assert result.judge_backend == "panel"


@pytest.mark.parametrize("order", [("garbage", "away"), ("away", "garbage")])
async def test_a_member_away_keeps_the_grading_pending_whatever_the_panel_order(
    rubric: Rubric, order: tuple[str, str]
) -> None:
    """With one member unreachable and another replying what cannot be read, the
    grading is unscored as the judge being away (which the service keeps pending and
    asks again), whichever the panel lists first; its detail names both members."""
    refusals = [JudgeUnavailable("connection refused") for _ in range(10)]
    away = ScriptedBackend(refusals, model="away")
    members = {
        "garbage": _member(
            "scripted:garbage", ScriptedBackend(["not json", "still not json"], model="garbage")
        ),
        "away": _member("scripted:away", away),
    }
    panel = PanelGrader([members[name] for name in order])
    result = await panel.grade(rubric, TRUTH, DIAGNOSIS)
    assert result.status == "unscored"
    assert result.unscored_reason == "judge_unavailable", order
    assert result.detail is not None and result.detail.startswith("scripted:away")
    assert "scripted:garbage" in result.detail


def _reply_for_d1q2(answer: str, quote: str) -> str:
    items = [
        {"id": q, "answer": answer if q == "D1-Q2" else "Yes",
         "evidence": quote if q == "D1-Q2" else "sets USER_PORT=9999", "confidence": "High"}
        for q in IDS
    ]  # fmt: skip
    return json.dumps(items)


async def test_the_majority_answer_does_not_depend_on_the_order_of_the_members(
    rubric: Rubric,
) -> None:
    """Two yes (one quoting what the diagnosis does not say, downgraded to no) and a no:
    the majority is yes, and its answer is the verified yes whichever voter is listed
    first (the first majority voter's was taken, so the order decided)."""
    strict = rubric.model_copy(update={"unverified_yes": "downgrade"})
    replies = {
        "fabricated": _reply_for_d1q2("Yes", "the database connection pool was exhausted"),
        "verified": _reply_for_d1q2("Yes", "sets USER_PORT=9999"),
        "no": _reply_for_d1q2("No", ""),
    }
    results = {
        name: await Grader(ScriptedBackend([reply])).grade(strict, TRUTH, DIAGNOSIS)
        for name, reply in replies.items()
    }
    for order in (("fabricated", "verified", "no"), ("verified", "fabricated", "no")):
        combined = combine_votes(strict, [(n, 0) for n in order], [results[n] for n in order])
        d1q2 = next(a for a in combined.answers if a.question_id == "D1-Q2")
        assert (d1q2.answer, d1q2.evidence) == (True, "sets USER_PORT=9999"), order


def _failing_member(name: str, no: set[str]) -> PanelMember:
    def reply(request: JudgeRequest) -> str:
        return scripted_reply(request, yes=set(IDS) - no)

    return PanelMember(f"scripted:{name}", Grader(ScriptedBackend([reply], model=name), retry=FAST))


#: gives no value of the ground truth, so a yes to D2-Q2 (a mutated value stated) is
#: vetoed in code (LABELLING.md: no ground-truth value is stated: no)
NO_VALUE = (
    "The user-service deployment in namespace hotel has a wrong port setting, so the "
    "frontend fails with connection refused when it calls user-service."
)


async def test_a_majority_pass_over_a_vetoed_yes_is_held_as_judge_overruled() -> None:
    """Each member fails on its own (its yes to D2-Q2 vetoed), so none flagged the
    overruled yes; no question has two no votes, and the combined answers pass 8 of 9
    over the veto: an injection signal that must hold the pass, as a single judge's."""
    rubric = load_rubric_dir()["sregym-rca"]
    # each member fails on its own (at most 6 judge yes, then D2-Q2 vetoed); no question
    # has two "no" votes, so the majority says yes to all nine
    panel = PanelGrader(
        [
            _failing_member("a", {"D1-Q1", "D2-Q1", "D3-Q1"}),
            _failing_member("b", {"D1-Q2", "D2-Q3", "D3-Q2"}),
            _failing_member("c", {"D1-Q3", "D3-Q3"}),
        ]
    )
    result = await panel.grade(rubric, TRUTH, NO_VALUE)
    assert result.status == "graded"
    d2q2 = next(a for a in result.answers if a.question_id == "D2-Q2")
    assert d2q2.judge_answer is True and d2q2.answer is False  # grounding vetoed it
    assert result.outcome is not None and result.outcome.passed  # 8 of 9 effective yes
    # the rule passes over a yes that code vetoed: an injection signal that holds it
    assert ReviewReason.JUDGE_OVERRULED in result.review_reasons
    assert result.held and result.passed is None


async def test_a_fault_in_one_members_grading_brings_the_calls_of_every_member(
    rubric: Rubric, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault of the service's own in one member's grading (in the checks run on its
    judge's reply) is raised once every member has finished, as a ``GradingFailed``
    bringing the calls of all of them, so the failed try keeps every prompt and reply."""
    checked = grader_module.graded_result

    def broken_for_cloud(*args: object, **kwargs: object) -> object:
        backend = args[1]
        if backend.model == "cloud":  # type: ignore[attr-defined]
            raise RuntimeError("a fault of the service's own")
        return checked(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grader_module, "graded_result", broken_for_cloud)
    local = _saying(set(IDS), model="local")
    cloud = _saying(set(IDS), model="cloud")
    panel = PanelGrader([_member("scripted:local", local), _member("scripted:cloud", cloud)])
    with pytest.raises(GradingFailed) as info:
        await panel.grade(rubric, TRUTH, DIAGNOSIS)
    assert sorted(c.model for c in info.value.calls) == ["cloud", "local"]
    assert isinstance(info.value.error, RuntimeError)
    assert [c.request for c in info.value.calls if c.model == "cloud"] == cloud.requests


async def test_a_fault_combining_the_votes_brings_every_members_calls(
    rubric: Rubric, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault while the members' votes are combined keeps the calls of every member."""

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a fault of the service's own")

    monkeypatch.setattr(panel_module, "combine_votes", broken)
    local = _saying(set(IDS), model="local")
    cloud = _saying(set(IDS), model="cloud")
    panel = PanelGrader([_member("scripted:local", local), _member("scripted:cloud", cloud)])
    with pytest.raises(GradingFailed) as info:
        await panel.grade(rubric, TRUTH, DIAGNOSIS)
    assert sorted(c.model for c in info.value.calls) == ["cloud", "local"]
