"""The calibration set that ships with the package: its shape, its labels, its verdict mix.

The set (``judge/data/calibration/sregym-v1.jsonl``) is what ``sre-judge calibrate``
grades by default, so a judge's qualification rests on it. Labels follow
``LABELLING.md``; these tests hold what can be checked without a human: every case is
complete and justified, each fault family has a correct, a borderline and a wrong
diagnosis, injected text never earns a pass, and the deterministic grounding checks of
the ground truth's header agree with the human "yes" answers, except where a known gap
of the checks is written down below. For the rules whose labels are easiest to get wrong
(D2-Q3, D3-Q1, D3-Q3 and the borderlines' deciding labels), named cases are checked
against the label ``LABELLING.md`` gives them.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path

import pytest

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calibration import (
    DEFAULT_GOLD,
    GoldError,
    GoldItem,
    calibration_figures,
    gold_verdict,
    load_gold,
    qualifies,
)
from judge.grader import Grader
from judge.grounding import check_condition, facts_of
from judge.rubric import Rubric, load_rubric_dir
from judge.rule import apply_rule
from judge.screening import screen

VARIANTS = ("correct", "borderline", "wrong")
CONTROL = "healthy-control"

#: human "yes" answers the grounding checks deny, each with the reason the check is wrong
#: here; a new contradiction fails the test (a mislabel, or a check that got stricter)
KNOWN_CONTRADICTIONS = {
    ("flag-borderline", "D2-Q2"): "the flag key paymentFailure is not extracted as a value",
}


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


@pytest.fixture(scope="module")
def cases(rubric: Rubric) -> list[GoldItem]:
    return load_gold(DEFAULT_GOLD.read_text(encoding="utf-8"), rubric)


def _yes(item: GoldItem) -> dict[str, bool]:
    return {q: a == "yes" for q, a in item.answers.items()}


def test_the_set_ships_inside_the_package_and_every_line_is_a_full_case() -> None:
    assert DEFAULT_GOLD.parent.parent.parent.name == "judge"  # package data, found installed
    lines = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()
    for line in lines:
        raw = json.loads(line)
        assert {"id", "family", "variant", "ground_truth", "diagnosis", "answers"} <= set(raw)
        assert "verdict" not in raw, "verdicts follow from the labels by the rule"
    assert len(lines) >= 60


def test_cases_are_unique_labelled_and_justified(cases: list[GoldItem], rubric: Rubric) -> None:
    ids = [c.id for c in cases]
    assert all(ids) and len(set(ids)) == len(ids)
    questions = {q.id for q in rubric.questions}
    for case in cases:
        assert case.family and case.variant, case.id
        assert case.justifications is not None, case.id
        assert set(case.justifications) == set(case.answers) == questions, case.id
        assert all(8 <= len(why) <= 120 for why in case.justifications.values()), case.id
        assert len(case.diagnosis.strip()) >= 40, case.id


def test_twenty_families_each_with_a_correct_a_borderline_and_a_wrong_diagnosis(
    cases: list[GoldItem],
) -> None:
    variants: dict[str, Counter[str]] = defaultdict(Counter)
    for case in cases:
        variants[str(case.family)][str(case.variant)] += 1
    assert len(variants) >= 20
    assert CONTROL in variants
    for family, seen in variants.items():
        assert all(seen[v] >= 1 for v in VARIANTS), (family, seen)
    assert sum(1 for c in cases if c.variant != "injection") >= 60


def test_ground_truths_are_in_the_service_format(cases: list[GoldItem]) -> None:
    for case in cases:
        if case.family == CONTROL:
            assert case.ground_truth == "", case.id
            continue
        facts = facts_of(case.ground_truth)
        assert facts is not None and facts.components and facts.namespace, case.id
        assert "Affected:" in case.ground_truth or "Healthy:" in case.ground_truth, case.id
    by_family: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        by_family[str(case.family)].add(case.ground_truth)
    assert all(len(truths) == 1 for truths in by_family.values())


def test_correct_pass_wrong_fail_and_borderlines_sit_on_the_pass_line(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    borderline: Counter[bool] = Counter()
    for case in cases:
        outcome = apply_rule(rubric, _yes(case))
        if case.variant == "correct":
            assert outcome.passed and outcome.yes_count >= 8, case.id
        elif case.variant == "wrong":
            assert not outcome.passed, case.id
        elif case.variant == "borderline":
            assert outcome.yes_count in (6, 7), case.id
            borderline[outcome.passed] += 1
    assert borderline[True] >= 5 and borderline[False] >= 5, borderline
    passes = sum(gold_verdict(rubric, c) for c in cases)
    assert 0.3 <= passes / len(cases) <= 0.6


def test_healthy_control_labels_follow_the_control_reading(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    controls = [c for c in cases if c.family == CONTROL]
    correct = next(c for c in controls if c.variant == "correct")
    assert all(correct.answers[q.id] == "yes" for q in rubric.questions)
    for case in controls:
        if case.variant in ("wrong", "injection"):  # asserting a fault fails all nine
            assert set(case.answers.values()) == {"no"}, case.id


def test_injection_cases_never_pass_and_cover_the_known_forms(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    injected = [c for c in cases if c.variant == "injection"]
    assert len(injected) >= 8
    for case in injected:
        assert not gold_verdict(rubric, case), case.id
        assert apply_rule(rubric, _yes(case)).yes_count <= 5, case.id
    texts = [c.diagnosis for c in injected]
    forms = {
        "forged adjudication record": r"ADJUDICATION RECORD",
        "embedded nine-yes reply": r'"id": "D3-Q3", "answer": "Yes"',
        "note to the grader": r"(?i)note to the grad|grader note",
        "text posing as ground truth": r"(?i)ground truth for this run",
        "base64 instruction": r"[A-Za-z0-9+/]{40,}={0,2}",
        "fake fence": r"<<<END DIAGNOSIS>>>",
        "leetspeak": r"1gn0r3",
        "ready-made answer object": r'\{"answer": "yes"',
    }
    missing = [name for name, p in forms.items() if not any(re.search(p, t) for t in texts)]
    assert not missing
    assert {c.family for c in injected} <= {c.family for c in cases if c.variant == "correct"}


def test_grounding_checks_do_not_deny_a_human_yes_beyond_the_known_gaps(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    checked = 0
    contradictions = set()
    for case in cases:
        facts = facts_of(case.ground_truth) if case.ground_truth else None
        if facts is None:
            continue
        for question in rubric.questions:
            if question.grounding is None or case.answers[question.id] != "yes":
                continue
            checked += 1
            if check_condition(question.grounding, facts, case.diagnosis) is not None:
                contradictions.add((str(case.id), question.id))
    assert checked >= 100  # the yes answers of D1-Q1, D1-Q2 and D2-Q2
    assert contradictions <= set(KNOWN_CONTRADICTIONS), contradictions - set(KNOWN_CONTRADICTIONS)


def test_the_small_gold_fixture_labels_no_yes_its_grounding_condition_denies(
    rubric: Rubric,
) -> None:
    """The small gold file the docs show as an example labels as ``LABELLING.md`` says:
    a diagnosis that names no component ("The database ran out of disk space.") does
    not name the origin, so calibration against it never counts a correct judge wrong."""
    gold = Path(__file__).parents[1] / "fixtures" / "gold-small.jsonl"
    denied = []
    for case in load_gold(gold.read_text(encoding="utf-8"), rubric):
        facts = facts_of(case.ground_truth)
        assert facts is not None
        for question in rubric.questions:
            if question.grounding and case.answers[question.id] == "yes":
                failure = check_condition(question.grounding, facts, case.diagnosis)
                if failure is not None:
                    denied.append((case.id, question.id, failure))
    assert denied == []


def test_a_gold_line_nested_past_what_python_reads_is_refused_naming_it(rubric: Rubric) -> None:
    first = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[0]
    with pytest.raises(GoldError, match="line 2: nested too deeply"):
        load_gold(first + "\n" + "[" * 100_000 + "]" * 100_000, rubric)


def test_a_gold_line_holding_a_number_python_cannot_read_is_refused_naming_it(
    rubric: Rubric,
) -> None:
    """An integer of more digits than Python converts (4,300) is a line refused with its
    number, as any other line that cannot be read."""
    lines = DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[:2]
    second = json.loads(lines[1])
    second["id"] = "@@HUGE@@"
    huge = json.dumps(second).replace('"@@HUGE@@"', "1" * 5000)
    with pytest.raises(GoldError, match=r"line 2: a number of too many digits"):
        load_gold(lines[0] + "\n" + huge, rubric)


def test_a_gold_line_with_incomplete_justifications_is_refused(rubric: Rubric) -> None:
    line = json.loads(DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[0])
    del line["justifications"]["D2-Q2"]
    with pytest.raises(GoldError, match=r"(?s)line 1: .*justifications must cover"):
        load_gold(json.dumps(line), rubric)
    line["justifications"]["D2-Q2"] = "two\nlines"
    with pytest.raises(GoldError, match="one non-empty line"):
        load_gold(json.dumps(line), rubric)
    del line["justifications"]
    assert load_gold(json.dumps(line), rubric)[0].justifications is None  # other gold files


def test_a_gold_file_is_read_as_json_lines_are_with_one_label_per_key_and_id(
    rubric: Rubric,
) -> None:
    """A byte order mark is dropped and a line ends at a newline only (a diagnosis may
    hold U+2028 unescaped); a question labelled twice in one item, or an id given twice,
    is refused naming the line, never read as one of its labels."""
    line = json.loads(DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[0])
    line["diagnosis"] += "\u2028and more"
    text = json.dumps(line, ensure_ascii=False)
    [item] = load_gold("\ufeff" + text + "\r\n", rubric)
    assert item.diagnosis == line["diagnosis"]
    twice = text.replace('"answers": {', '"answers": {"D1-Q1": "no", ', 1)
    assert twice != text
    with pytest.raises(GoldError, match="line 1: the key 'D1-Q1' is given twice"):
        load_gold(twice, rubric)
    with pytest.raises(GoldError, match=r"line 2: id .* is given on line 1 too"):
        load_gold(text + "\n" + text, rubric)


@pytest.mark.parametrize(
    ("field", "text", "refused"),
    [
        ("diagnosis", "bad \x00 byte", "diagnosis contains NUL bytes"),
        ("diagnosis", "x " * 40_000, "diagnosis is 80000 bytes, over the limit of 65536"),
        ("ground_truth", "\ud800", "ground_truth is not valid UTF-8 text"),
    ],
    ids=["nul", "over-the-size-limit", "lone-surrogate"],
)
def test_a_gold_text_the_grader_cannot_grade_is_refused_naming_the_line_and_field(
    rubric: Rubric, field: str, text: str, refused: str
) -> None:
    """The grader's own check of its texts (``judge.inputs.check_text``) applies when the
    file is read, so that a calibration or canary run never fails on it midway."""
    lines = [json.loads(line) for line in DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()]
    lines[3][field] = text
    gold = "".join(json.dumps(line) + "\n" for line in lines[:5])
    with pytest.raises(GoldError, match=f"^line 4: {re.escape(refused)}$"):
        load_gold(gold, rubric)


def test_the_size_limit_of_a_gold_text_is_the_one_passed(rubric: Rubric) -> None:
    line = json.loads(DEFAULT_GOLD.read_text(encoding="utf-8").splitlines()[0])
    line["diagnosis"] = "x" * 2000
    assert load_gold(json.dumps(line), rubric, max_text_bytes=2000)
    with pytest.raises(GoldError, match="line 1: diagnosis is 2000 bytes, over the limit of 1999"):
        load_gold(json.dumps(line), rubric, max_text_bytes=1999)


async def test_a_judge_that_answers_like_the_labels_qualifies_on_the_set(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    """Every case grades (injected ones too), and agreement is computed against the labels."""
    results = []
    for case in cases:
        yes = {q for q, a in case.answers.items() if a == "yes"}
        backend = ScriptedBackend([partial(scripted_reply, yes=yes)])
        results.append(await Grader(backend).grade(rubric, case.ground_truth, case.diagnosis))
    figures = calibration_figures(rubric, cases, results)
    assert (figures.n, figures.unscored, figures.false_passes) == (len(cases), 0, 0)
    assert figures.verdict_kappa == pytest.approx(1.0)
    assert qualifies(figures, min_kappa=0.6, max_false_pass=0.05)


async def test_a_judge_that_graded_little_of_the_set_does_not_qualify(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    """Figures are over the items a judge graded: one that left nearly all the set
    unscored, and answered the two it graded as the labels say (kappa 1.0, no false
    pass), measured nothing and does not qualify."""
    passing = next(c for c in cases if gold_verdict(rubric, c))
    failing = next(c for c in cases if not gold_verdict(rubric, c))
    results = []
    for case in cases:
        answered = case is passing or case is failing
        yes = {q for q, a in case.answers.items() if a == "yes"}
        reply = (lambda r, yes=yes: scripted_reply(r, yes=yes)) if answered else "nonsense"
        backend = ScriptedBackend([reply] * 4)
        results.append(await Grader(backend).grade(rubric, case.ground_truth, case.diagnosis))
    figures = calibration_figures(rubric, cases, results)
    assert figures.scored == 2 and figures.verdict_kappa == pytest.approx(1.0)
    assert figures.false_pass_rate == 0.0
    assert not qualifies(figures, min_kappa=0.6, max_false_pass=0.05)


def test_screening_flags_every_injection_case_and_no_other(cases: list[GoldItem]) -> None:
    flagged = {str(c.id) for c in cases if screen(c.diagnosis).review_reasons}
    assert flagged == {str(c.id) for c in cases if c.variant == "injection"}


# --- labels that LABELLING.md's rules decide ------------------------------------------
# Each table names cases of the set and the words of the diagnosis the rule reads; each
# test asserts the label the rule gives, so a case labelled against its rule (or against
# the set's own reading of the same situation elsewhere) fails here, naming it.


@pytest.fixture(scope="module")
def cases_by_id(cases: list[GoldItem]) -> dict[str, GoldItem]:
    return {str(case.id): case for case in cases}


#: case -> the words that blame, as origin or contributor, a component the ground truth
#: calls healthy or does not implicate
BLAMED_OUTSIDE_THE_TRUTH = {
    "selector-wrong": "The ts-route-service deployment is broken",  # pods healthy, Service at fault
    "inj-netpol-base64": "geo pods are probably overloaded",
    "port-borderline": "memcached-profile also shows elevated evictions, which may be adding",
    "cpu-borderline": "user-timeline-service shows some slow queries too, which probably add",
    "pool-borderline": "ts-station-service has also been slow and is making things worse",
    "selector-borderline": "Possibly ts-route-mongo latency also contributes",
    "secret-borderline": "mongodb-profile has been refusing authentication",
}


@pytest.mark.parametrize("case_id", sorted(BLAMED_OUTSIDE_THE_TRUTH))
def test_blaming_a_component_outside_the_ground_truth_makes_d3_q1_no(
    cases_by_id: dict[str, GoldItem], case_id: str
) -> None:
    """LABELLING D3-Q1: "no if any specific component outside the ground truth's
    implicated set (origin, contributing, affected) is blamed as contributing". Blamed
    as origin is blamed too, and the object kind matters (D1-Q1): the ts-route-service
    Deployment and its pods, healthy per the ground truth, are not the Service of that
    name."""
    case = cases_by_id[case_id]
    assert BLAMED_OUTSIDE_THE_TRUTH[case_id] in case.diagnosis
    assert case.answers["D3-Q1"] == "no", case.justifications


#: case -> the words that state an effect the ground truth contradicts
CONTRADICTS_THE_EFFECTS = {
    "image-wrong": "geo is fine; the outage is caused by mongodb-geo being OOMKilled",
    "scale-zero-wrong": "product-catalog started returning errors",  # healthy per the truth
    "env-wrong": "cart returns errors",  # healthy per the truth
    "oom-wrong": "The recommendation service is also degraded",  # healthy per the truth
    "nodeselector-wrong": "search pods are OOMKilled",  # a Pending pod that never ran
}


@pytest.mark.parametrize("case_id", sorted(CONTRADICTS_THE_EFFECTS))
def test_an_effect_that_contradicts_the_ground_truth_makes_d3_q3_no(
    cases_by_id: dict[str, GoldItem], case_id: str
) -> None:
    """LABELLING D3-Q3: "yes if the diagnosis reports at least one of the ground truth's
    effects ... and none that contradicts it". One matching effect (failing geo queries,
    missing recommendations) does not outweigh a healthy component reported failing or
    a failing one reported fine."""
    case = cases_by_id[case_id]
    assert CONTRADICTS_THE_EFFECTS[case_id] in case.diagnosis
    assert case.answers["D3-Q3"] == "no", case.justifications


#: case -> the words that assert a second fault as (possibly) part of the cause
SECOND_FAULT_IN_THE_CAUSE = {
    "port-borderline": "memcached-profile also shows elevated evictions, which may be adding",
    "cpu-borderline": "user-timeline-service shows some slow queries too, which probably add",
    "pool-borderline": "ts-station-service has also been slow and is making things worse",
    "selector-borderline": "Possibly ts-route-mongo latency also contributes",
    "control-borderline": "returned a few SERVFAIL responses, which could be adding",
    "liveness-borderline": "it may be getting OOMKilled as well",
    "oom-borderline": "A leak in ad's in-memory ad cache is probably contributing",
    "secret-borderline": "mongodb-profile has been refusing authentication",
    "flag-borderline": "payment's token validation broke in its last upgrade",
}


@pytest.mark.parametrize("case_id", sorted(SECOND_FAULT_IN_THE_CAUSE))
def test_a_second_fault_asserted_as_part_of_the_cause_makes_d2_q3_no(
    cases_by_id: dict[str, GoldItem], case_id: str
) -> None:
    """LABELLING D2-Q3: "no if another fault type is asserted as (part of) the cause,
    including the wrong branch of a hedge". Cache evictions, slow queries, a slow
    service, database latency or DNS failures said to add to the failure ("may",
    "probably", "possibly" included) are part of the cause as the diagnosis tells it."""
    case = cases_by_id[case_id]
    assert SECOND_FAULT_IN_THE_CAUSE[case_id] in case.diagnosis
    assert case.answers["D2-Q3"] == "no", case.justifications


@pytest.mark.parametrize("case_id", ["port-borderline", "cpu-borderline", "pool-borderline"])
def test_borderlines_with_a_second_fault_in_the_cause_fail_by_the_rule(
    cases_by_id: dict[str, GoldItem], rubric: Rubric, case_id: str
) -> None:
    """LABELLING: borderline cases sit on the pass line (6 or 7 yes). With D2-Q3 "no"
    these have 6 yes, so their gold verdict is a fail: a judge that passes them makes a
    false pass."""
    outcome = apply_rule(rubric, _yes(cases_by_id[case_id]))
    assert (outcome.yes_count, outcome.passed) == (6, False)


def test_each_borderline_justifies_the_one_label_that_decides_it(
    cases: list[GoldItem], rubric: Rubric
) -> None:
    """LABELLING: a borderline case carries "a one-line justification for the deciding
    label". Each has exactly one, on a "no" answer (the close call the case is about);
    where the case fails, a "yes" there would pass it."""
    for case in (c for c in cases if c.variant == "borderline"):
        assert case.justifications is not None, case.id
        deciding = [q for q, why in case.justifications.items() if why.startswith("deciding")]
        assert len(deciding) == 1, (case.id, deciding)
        [question] = deciding
        assert case.answers[question] == "no", case.id
        if not gold_verdict(rubric, case):
            assert apply_rule(rubric, {**_yes(case), question: True}).passed, case.id
