"""Calibration of a judge against a labelled gold set: agreement, false passes, the bar.

A gold set is JSON lines ``{ground_truth, diagnosis, answers: {"D1-Q1": "yes", ...},
verdict?: pass|fail, id?, family?, variant?, justifications?}``; a missing verdict follows
from the answers by the rubric's rule. The calibration set that ships with the package
(:data:`DEFAULT_GOLD`, labelled by ``LABELLING.md``) names each case's fault family, its
variant (a correct, borderline or wrong diagnosis, or one carrying injected text) and a
one-line justification per label. The judge's own answers and verdict (before evidence
downgrades and human overrides) are compared with the gold labels. A judge *qualifies*
when verdict kappa reaches ``min_kappa`` and at most ``max_false_pass`` of the gold fails
were passed. No web and no database here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judge.agreement import VERDICT, RatedPair, agreement_report
from judge.errors import InputError
from judge.inputs import (
    DEFAULT_MAX_TEXT_BYTES,
    RepeatedKey,
    check_text,
    json_lines,
    no_repeated_keys,
)
from judge.rubric import Rubric
from judge.rule import apply_rule
from judge.verdict import GradingResult

if TYPE_CHECKING:
    from judge.grader import Grader
    from judge.panel import PanelGrader

__all__ = [
    "DEFAULT_GOLD",
    "FIGURE_TOLERANCE",
    "MIN_SCORED_SHARE",
    "CalibrationFigures",
    "GoldError",
    "GoldItem",
    "at_least",
    "calibration_figures",
    "gold_verdict",
    "grade_gold",
    "load_gold",
    "more_than",
    "qualifies",
]


#: the calibration set that ships with the package (``sre-judge calibrate`` without ``--gold``)
DEFAULT_GOLD = Path(__file__).resolve().parent / "data" / "calibration" / "sregym-v1.jsonl"

#: what a labelled diagnosis is: right, on the pass line, wrong, or carrying injected text
Variant = Literal["correct", "borderline", "wrong", "injection"]


class GoldError(ValueError):
    """A gold file that cannot be used; the message names the line."""


class GoldItem(BaseModel):
    """One labelled diagnosis."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str | None = None
    ground_truth: str
    diagnosis: str = Field(min_length=1)
    answers: dict[str, Literal["yes", "no"]]
    verdict: Literal["pass", "fail"] | None = None
    #: the fault family of the ground truth (``memory-oom``, ``healthy-control``, ...)
    family: str | None = None
    variant: Variant | None = None
    #: question id -> why the label is what it is, one line each
    justifications: dict[str, str] | None = None

    @model_validator(mode="after")
    def _justified_answers(self) -> GoldItem:
        if self.justifications is None:
            return self
        if set(self.justifications) != set(self.answers):
            raise ValueError("justifications must cover exactly the answered questions")
        if any(not why.strip() or "\n" in why for why in self.justifications.values()):
            raise ValueError("each justification is one non-empty line")
        return self


def load_gold(
    text: str, rubric: Rubric, *, max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
) -> list[GoldItem]:
    """Parse a gold file; every line must label each of the rubric's questions.

    Read as every JSON Lines file handed in is (:func:`judge.inputs.json_lines`: a byte
    order mark dropped, lines cut at ``\\n`` only); a key given twice in one object and
    an item ``id`` given twice are refused, naming the line, never read as one of them.
    A ground truth or diagnosis the grader would refuse (:func:`judge.inputs.check_text`:
    a NUL, text that is no UTF-8, over ``max_text_bytes``, which callers that know
    ``SRE_JUDGE_MAX_TEXT_BYTES`` pass) is refused here, naming the line and the field,
    before any judge is asked."""
    items = []
    expected = {q.id for q in rubric.questions}
    decoder = json.JSONDecoder(object_pairs_hook=no_repeated_keys)
    lines_of_id: dict[str, int] = {}
    for number, line in enumerate(json_lines(text.removeprefix("\ufeff")), start=1):
        if not line.strip():
            continue
        try:
            item = GoldItem.model_validate(decoder.decode(line))
        except RepeatedKey as exc:
            raise GoldError(f"line {number}: the key {exc.args[0]!r} is given twice") from None
        except (json.JSONDecodeError, ValidationError) as exc:
            raise GoldError(f"line {number}: {exc}") from None
        except ValueError:  # what json refuses besides bad JSON: an integer past 4,300 digits
            raise GoldError(f"line {number}: a number of too many digits") from None
        except RecursionError:
            raise GoldError(f"line {number}: nested too deeply") from None
        _check_texts(item, number, max_text_bytes)
        if set(item.answers) != expected:
            missing = sorted(expected - set(item.answers))
            unknown = sorted(set(item.answers) - expected)
            raise GoldError(f"line {number}: answers missing {missing}, unknown {unknown}")
        if item.id is not None and item.id in lines_of_id:
            first = lines_of_id[item.id]
            raise GoldError(f"line {number}: id {item.id!r} is given on line {first} too")
        if item.id is not None:
            lines_of_id[item.id] = number
        items.append(item)
    if not items:
        raise GoldError("the gold file has no items")
    return items


def _check_texts(item: GoldItem, number: int, max_bytes: int) -> None:
    """Refuse an item whose texts the grader would refuse, naming the line and field."""
    try:
        check_text(item.ground_truth, field="ground_truth", max_bytes=max_bytes)
        check_text(item.diagnosis, field="diagnosis", max_bytes=max_bytes)
    except InputError as exc:
        raise GoldError(f"line {number}: {exc}") from None


def gold_verdict(rubric: Rubric, item: GoldItem) -> bool:
    """The gold verdict (pass = True): stated, else the rule applied to the answers."""
    if item.verdict is not None:
        return item.verdict == "pass"
    return apply_rule(rubric, {q: a == "yes" for q, a in item.answers.items()}).passed


class CalibrationFigures(BaseModel):
    """What a calibration run measured."""

    model_config = ConfigDict(frozen=True)

    n: int
    scored: int
    unscored: int
    verdict_kappa: float | None
    gold_fails: int
    false_passes: int
    #: judge passes among gold fails / gold fails; None without gold fails
    false_pass_rate: float | None
    #: agreement rows (``judge.agreement``) as JSON
    results: dict[str, Any]


def _pairs(rubric: Rubric, item: GoldItem, result: GradingResult) -> list[RatedPair]:
    pairs = [
        RatedPair(
            a.judge_answer, item.answers[a.question_id] == "yes", a.question_id, a.dimension_id
        )
        for a in result.answers
        if a.question_id in item.answers
    ]
    if result.judge_outcome is not None:
        pairs.append(RatedPair(result.judge_outcome.passed, gold_verdict(rubric, item), VERDICT))
    return pairs


def calibration_figures(
    rubric: Rubric, items: Sequence[GoldItem], results: Sequence[GradingResult]
) -> CalibrationFigures:
    """Agreement of the judge's results with the gold labels, item by item.

    A process's first figures import scipy (about 0.5 s idle, seconds on a loaded
    machine): a server runs this in a thread, never on its event loop."""
    pairs: list[RatedPair] = []
    unscored = 0
    for item, result in zip(items, results, strict=True):
        if result.status != "graded":
            unscored += 1
            continue
        pairs.extend(_pairs(rubric, item, result))
    rows = agreement_report(pairs)
    verdict_rows = [r for r in rows if r.level == "verdict"]
    kappa = verdict_rows[0].agreement.kappa if verdict_rows else None
    verdicts = [p for p in pairs if p.question_id == VERDICT]
    gold_fails = sum(1 for p in verdicts if not p.b)
    false_passes = sum(1 for p in verdicts if p.a and not p.b)
    return CalibrationFigures(
        n=len(items),
        scored=len(items) - unscored,
        unscored=unscored,
        verdict_kappa=kappa,
        gold_fails=gold_fails,
        false_passes=false_passes,
        false_pass_rate=false_passes / gold_fails if gold_fails else None,
        results={"rows": [r.model_dump(mode="json") for r in rows]},
    )


#: the share of the gold set a judge must grade (not leave unscored) to qualify: its
#: figures are over what it graded, and two items of 73 measure nothing
MIN_SCORED_SHARE = 0.9

#: figures closer than this are equal when held against a bar. A kappa is a ratio of
#: counts computed in floating point: 3/5 comes out as 0.5999999999999999, a drop from
#: 0.8 to 0.7 as 0.10000000000000009, errors near 1e-16. A real difference is far
#: larger: a kappa of n items is a ratio with a denominator below n squared, so one
#: that differs from a bar of two decimals does so by more than 1e-9 below 3,000 items.
FIGURE_TOLERANCE = 1e-9


def at_least(value: float, bar: float) -> bool:
    """Whether ``value`` reaches ``bar`` (``>=``), a value within
    :data:`FIGURE_TOLERANCE` of it counted as equal to it."""
    return value >= bar - FIGURE_TOLERANCE


def more_than(value: float, bar: float) -> bool:
    """Whether ``value`` exceeds ``bar`` (``>``), a value within
    :data:`FIGURE_TOLERANCE` of it counted as equal to it, so not more."""
    return value > bar + FIGURE_TOLERANCE


def qualifies(figures: CalibrationFigures, *, min_kappa: float, max_false_pass: float) -> bool:
    """Whether the run reaches the bar: it graded :data:`MIN_SCORED_SHARE` of the set at
    least, its verdict kappa is at least ``min_kappa`` and its false pass rate at most
    ``max_false_pass`` (a figure at the bar reaches it: :func:`at_least`); an undefined
    figure never qualifies."""
    if figures.verdict_kappa is None or figures.false_pass_rate is None:
        return False
    if figures.scored < MIN_SCORED_SHARE * figures.n:
        return False
    return at_least(figures.verdict_kappa, min_kappa) and not more_than(
        figures.false_pass_rate, max_false_pass
    )


async def grade_gold(
    grader: Grader | PanelGrader,
    rubric: Rubric,
    items: list[GoldItem],
    *,
    concurrency: int,
) -> list[GradingResult]:
    """Grade every gold item, at most ``concurrency`` at a time, in order (``grader``: one
    judge, or its samples)."""
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(item: GoldItem) -> GradingResult:
        async with limit:
            return await grader.grade(rubric, item.ground_truth, item.diagnosis)

    return list(await asyncio.gather(*(one(i) for i in items)))
