"""Self-consistency and panels: several votes per question, the majority answers.

A self-consistent judge is asked ``samples`` times at a temperature above 0, each
sample with its own seed (recorded with its call); a panel is several judges (a local
model and a cloud model, say). Every member and sample grades on its own
(``judge.grader.Grader``), and the answers are combined per question:

- the majority of the judges' answers is the answer; a tie counts as no;
- the combined answer carries the evidence and checks of a member that gave it, and as
  confidence the share of votes agreeing with it;
- any question whose votes are not unanimous adds the review reason ``judge_split``;
- every vote is kept (``GradingResult.votes``) with the index of its judge call.

A vote needs every voter: when any member or sample is unscored, so is the grading,
with the reason of a judge that is away (``judge.errors.RETRY_LATER``: the service
keeps the grading pending) if any, else of the first unscored voter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

from judge.calls import JudgeCall
from judge.errors import RETRY_LATER, InputError
from judge.grader import Grader, GradingFailed, screened
from judge.inputs import check_text
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric
from judge.rule import apply_rule
from judge.screening import Screening, overruled_yes
from judge.spec import panel_model
from judge.verdict import Answer, GradingResult, Vote

__all__ = ["PanelGrader", "PanelMember", "combine_votes"]


@dataclass(frozen=True)
class PanelMember:
    """One judge of a panel: its spec (as recorded with the votes) and its grader."""

    spec: str
    grader: Grader


@dataclass(frozen=True)
class _Run:
    spec: str
    sample: int
    grader: Grader


@dataclass
class PanelGrader:
    """Grades with every member, ``samples`` times each, and takes the majority."""

    members: Sequence[PanelMember]
    samples: int = 1
    #: temperature of each sample when ``samples`` > 1
    sample_temperature: float = 0.7

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a panel needs at least one judge")
        if self.samples < 1:
            raise ValueError("samples must be at least 1")

    @property
    def judge_backend(self) -> str:
        """``panel`` for several judges, else the one judge's backend."""
        return "panel" if len(self.members) > 1 else self.members[0].grader.backend.name

    @property
    def judge_model(self) -> str:
        """The members' specs joined by ``+``, or the one judge's model."""
        if len(self.members) > 1:
            return panel_model([m.spec for m in self.members])
        return self.members[0].grader.backend.model

    def _runs(self) -> list[_Run]:
        runs = []
        for member in self.members:
            if self.samples == 1:
                runs.append(_Run(member.spec, 0, member.grader))
                continue
            base = member.grader.params.seed or 0
            for index in range(self.samples):
                params = member.grader.params.model_copy(
                    update={"temperature": self.sample_temperature, "seed": base + index}
                )
                runs.append(_Run(member.spec, index, replace(member.grader, params=params)))
        return runs

    async def grade(
        self,
        rubric: Rubric,
        ground_truth: str,
        diagnosis: str,
        *,
        screening: Screening | None = None,
    ) -> GradingResult:
        """Grade with every member and sample concurrently; combine the votes.

        The diagnosis is screened once for all of them (``screening``, when given, is
        the one made at intake: see ``Grader.grade``)."""
        runs = self._runs()
        if screening is None and runs and diagnosis.strip():
            grader = runs[0].grader
            check_text(ground_truth, field="ground_truth", max_bytes=grader.max_text_bytes)
            check_text(diagnosis, field="diagnosis", max_bytes=grader.max_text_bytes)
            screening = await screened(diagnosis)
        outcomes = await asyncio.gather(
            *(
                run.grader.grade(rubric, ground_truth, diagnosis, screening=screening)
                for run in runs
            ),
            return_exceptions=True,  # every member finishes: the calls of all are kept
        )
        results = [o for o in outcomes if isinstance(o, GradingResult)]
        if len(results) < len(outcomes):
            raise _failed(outcomes)
        voters = [(run.spec, run.sample) for run in runs]
        try:
            combined = combine_votes(rubric, voters, results)
        except Exception as exc:
            raise GradingFailed(exc, tuple(c for r in results for c in r.calls)) from exc
        return combined.model_copy(
            update={"judge_backend": self.judge_backend, "judge_model": self.judge_model}
        )


def _failed(outcomes: Sequence[GradingResult | BaseException]) -> BaseException:
    """What a panel raises when a member's grading raised: the first member's error as
    it is where it is no fault of the service's (bad input, a cancel), else a
    :class:`GradingFailed` bringing the calls of every member (those of the members that
    graded, and those a failed one made before its fault)."""
    first = next(o for o in outcomes if isinstance(o, BaseException))
    if not isinstance(first, Exception) or isinstance(first, InputError):
        return first
    calls = tuple(
        call for o in outcomes if isinstance(o, GradingResult | GradingFailed) for call in o.calls
    )
    error = first.error if isinstance(first, GradingFailed) else first
    failed = GradingFailed(error, calls)
    failed.__cause__ = first
    return failed


def _relabelled(
    voters: Sequence[tuple[str, int]], results: Sequence[GradingResult]
) -> tuple[list[JudgeCall], list[Vote]]:
    """All calls in order, and every vote with its voter and its call's new index."""
    calls: list[JudgeCall] = []
    votes: list[Vote] = []
    for (spec, sample), result in zip(voters, results, strict=True):
        offset = len(calls)
        calls.extend(result.calls)
        for vote in result.votes:
            index = None if vote.call_index is None else vote.call_index + offset
            votes.append(
                vote.model_copy(
                    update={"judge_spec": spec, "sample_index": sample, "call_index": index}
                )
            )
    return calls, votes


def _unscored(
    voters: Sequence[tuple[str, int]],
    results: Sequence[GradingResult],
    calls: list[JudgeCall],
    votes: list[Vote],
) -> GradingResult | None:
    """The combined result when any voter is unscored, else None.

    It is unscored as a voter whose judge is away (``RETRY_LATER``: the service keeps
    the grading pending and asks again) if there is one, else as the first unscored
    voter, whatever order the panel lists its judges in; its detail names every
    unscored voter, that one first."""
    unscored = [
        (spec if sample == 0 else f"{spec} sample {sample}", result)
        for (spec, sample), result in zip(voters, results, strict=True)
        if result.status == "unscored"
    ]
    if not unscored:
        return None
    unscored.sort(key=lambda voter: voter[1].unscored_reason not in RETRY_LATER)  # stable
    chosen = unscored[0][1]
    detail = "; ".join(f"{who}: {r.detail or r.unscored_reason}" for who, r in unscored)
    return chosen.model_copy(
        update={
            "detail": detail,
            "calls": tuple(calls),
            "votes": tuple(votes),
            "answers": (),
        }
    )


def _combined_answer(question_id: str, results: Sequence[GradingResult]) -> tuple[Answer, bool]:
    """The majority answer of one question (a tie is no) and whether the votes split; its
    evidence a majority voter's whose answer its checks kept, if any."""
    given = [next(a for a in r.answers if a.question_id == question_id) for r in results]
    yes = sum(a.judge_answer for a in given)
    majority = yes * 2 > len(given)
    agreeing = yes if majority else len(given) - yes
    # the answer of a majority voter whose own check kept it (a verified quote), so the
    # effective answer does not depend on the order the panel lists its judges in
    chosen = next(
        (a for a in given if a.judge_answer == majority and a.answer == majority),
        next(a for a in given if a.judge_answer == majority),
    )
    if len(given) > 1:
        chosen = chosen.model_copy(update={"confidence": round(agreeing / len(given), 4)})
    return chosen, 0 < yes < len(given)


def combine_votes(
    rubric: Rubric, voters: Sequence[tuple[str, int]], results: Sequence[GradingResult]
) -> GradingResult:
    """One grading from the results of several voters (``(spec, sample)`` each)."""
    calls, votes = _relabelled(voters, results)
    unscored = _unscored(voters, results, calls, votes)
    if unscored is not None:
        return unscored
    first = results[0]
    if not first.answers or not votes:  # e.g. an empty diagnosis: no judge was asked
        return first.model_copy(update={"calls": tuple(calls), "votes": tuple(votes)})
    answers: list[Answer] = []
    split: list[str] = []
    for question in rubric.questions:
        answer, was_split = _combined_answer(question.id, results)
        answers.append(answer)
        if was_split:
            split.append(question.id)
    reasons = list(dict.fromkeys(r for result in results for r in result.review_reasons))
    notes = list(dict.fromkeys(result.detail for result in results if result.detail))
    if split:
        reasons.append(ReviewReason.JUDGE_SPLIT)
        notes.append(f"judges split on {', '.join(split)}")
    combined = first.model_copy(
        update={
            "answers": tuple(answers),
            "outcome": apply_rule(rubric, {a.question_id: a.answer for a in answers}),
            "judge_outcome": apply_rule(rubric, {a.question_id: a.judge_answer for a in answers}),
        }
    )
    # each voter's check saw its own outcome (a fail needs no signal); the majority may
    # pass over a yes code vetoed that no voter's own pass did
    overruled = overruled_yes(combined)
    if overruled and ReviewReason.JUDGE_OVERRULED not in reasons:
        reasons.append(ReviewReason.JUDGE_OVERRULED)
        notes.append(f"the rule passes over yes answers code vetoed: {', '.join(overruled)}")
    return combined.model_copy(
        update={
            "review_reasons": tuple(reasons),
            "detail": "; ".join(notes) or None,
            "calls": tuple(calls),
            "votes": tuple(votes),
        }
    )
