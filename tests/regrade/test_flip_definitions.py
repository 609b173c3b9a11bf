"""The flip report and the agreement report count the same things the same way, and say so."""

from __future__ import annotations

import csv
import io

import pytest

from api.regrade.flip_reads import FlipItem, GradingSide
from api.regrade.flips import flip_report, flip_tables, flips_csv
from api.regrade.job_queries import RegradeJobQueries
from api.reports.agreement import agreement_table, build_agreement_report
from api.reports.filters import ReportFilter
from judge.agreement import agreement
from storage import Store
from tests.storage.helpers import override, sregym_rubric
from tests.support.gradings import add_many, shadow_regrade
from tests.support.submissions import IDS

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def _seed(store: Store) -> str:
    """2 passes and 2 fails by the judge, one fail made a pass by a human; a new judge
    then passes all four in a shadow regrade. Returns the job's id."""
    await add_many(store, {"pass": 2})
    failing = await add_many(store, {"fail": 2})
    view = await store.gradings.get(failing[0])
    assert view is not None
    await override(
        store,
        failing[0],
        rubric=sregym_rubric(),
        expected_revision=view.grading.revision,
        reason="the judge missed the scope",
        author_id="adj-1",
        author_name="Ada",
        kind="verdict",
        verdict="pass",
    )
    return await shadow_regrade(store, passing=4)


async def test_flips_and_agreement_use_one_stated_definition(store: Store) -> None:
    job_id = await _seed(store)
    items = await RegradeJobQueries(store.db).pairs(job_id)

    effective = flip_report({}, items)
    assert effective["verdicts"] == "effective"
    assert effective["definitions"].startswith("effective verdicts and answers")
    assert effective["fail_to_pass"]["count"] == 1  # the human's pass already counted

    judge = flip_report({}, items, verdicts="judge")
    assert judge["definitions"].startswith("the judges' own verdicts")
    assert judge["fail_to_pass"]["count"] == 2

    report = await build_agreement_report(store, ReportFilter(), kinds=["judge_judge"])
    [part] = report.kinds
    assert "judges' own" in part.definition
    [verdict_row] = [row for row in part.rows if row.level == "verdict"]
    confusion = verdict_row.agreement.confusion
    assert confusion["no->yes"] == judge["fail_to_pass"]["count"]
    assert confusion["yes->no"] == judge["pass_to_fail"]["count"] == 0

    csv_rows = flips_csv(items, verdicts="judge").splitlines()[1:]
    assert sum(",fail->pass," in row for row in csv_rows) == 2


async def test_an_undefined_kappa_says_why_and_is_never_zero(store: Store) -> None:
    job_id = await _seed(store)
    report = flip_report({}, await RegradeJobQueries(store.db).pairs(job_id), verdicts="judge")
    verdicts = report["agreement"]["verdicts"]
    assert verdicts["n"] == 4 and verdicts["kappa"] is None
    assert (verdicts["ci_low"], verdicts["ci_high"]) == (None, None)
    assert verdicts["undefined"] == "one category only: rater b always said yes"

    agreement = await build_agreement_report(store, ReportFilter(), kinds=["judge_judge"])
    table = agreement_table(agreement)
    verdict_row = next(row for row in table.rows if row[table.columns.index("level")] == "verdict")
    assert verdict_row[table.columns.index("kappa")] is None
    assert verdict_row[table.columns.index("kappa_ci_low")] is None
    assert verdict_row[table.columns.index("kappa_undefined")] == (
        "one category only: rater b always said yes"
    )
    assert any(note.startswith("judge_judge: the judges' own") for note in table.notes)


async def test_agreement_splits_provisional_gradings(store: Store) -> None:
    await add_many(store, {"pass": 2, "fail": 2}, provisional=True)
    await shadow_regrade(store, passing=3)
    report = await build_agreement_report(
        store, ReportFilter(), kinds=["judge_judge"], group_by=["provisional"]
    )
    groups = {row.group["provisional"] for row in report.kinds[0].rows}
    assert groups == {"qualified"}  # the shadow judge's gradings label the pair
    excluded = await build_agreement_report(
        store, ReportFilter(provisional="exclude"), kinds=["judge_judge"]
    )
    assert excluded.kinds[0].rows == []  # the provisional side is left out: no pairs


def _side(grading_id: str, passed: bool | None, judge_passed: bool) -> GradingSide:
    answers = dict.fromkeys(IDS, judge_passed)
    return GradingSide(grading_id, "graded", passed, judge_passed, 9 * judge_passed,
                       answers, answers, held=passed is None)  # fmt: skip


def test_a_held_verdict_on_either_side_is_listed_apart_never_as_the_same() -> None:
    """Effective verdicts: a held pass has none in force yet (``passed`` null). Under the
    qualified pass policy every pass of an uncalibrated new judge is held, so calling a
    fail -> held pass "same" hid every fail->pass of a first regrade; such items are
    listed as ``held`` and left out of ``compared``, the pass rates and kappa alike."""
    items = [
        FlipItem("s1", "a", None, "sc", _side("o1", False, False), _side("n1", None, True)),
        FlipItem("s2", "a", None, "sc", _side("o2", None, True), _side("n2", False, False)),
        FlipItem("s3", "a", None, "sc", _side("o3", True, True), _side("n3", False, False)),
    ]
    report = flip_report({}, items)
    assert report["compared"] == report["agreement"]["verdicts"]["n"] == 1
    assert report["pass_to_fail"]["count"] == 1 and report["fail_to_pass"]["count"] == 0
    held = report["held"]
    assert held["count"] == 2
    assert [(i["previous_passed"], i["passed"]) for i in held["items"]] == [
        (False, None),
        (None, False),
    ]
    flips = [row.split(",")[10] for row in flips_csv(items).splitlines()[1:]]
    assert flips == ["held", "held", "pass->fail"]
    [_, flipped, *_] = flip_tables({**report, "job": {"id": "j"}})
    assert [row[0] for row in flipped.rows] == ["pass->fail", "fail->held", "held->fail"]
    judge = flip_report({}, items, verdicts="judge")  # the judges' own: never held
    assert judge["held"]["count"] == 0 and judge["fail_to_pass"]["count"] == 1


def test_a_near_perfect_agreement_has_a_kappa_interval_within_kappas_range() -> None:
    """Kappa is at most 1, so its interval is too: 11 verdicts (5 pass->pass, 1
    fail->pass, 5 fail->fail) have kappa 50/61 = 0.820 with SE 0.169 by hand, and
    ``kappa + 1.96 SE`` = 1.151 is shown as 1.0. The flip report and the agreement report
    give the same interval for the same pairs."""
    pairs = [(True, True)] * 5 + [(False, True)] + [(False, False)] * 5
    items = [
        FlipItem(f"s{i}", None, None, None, _side(f"o{i}", old, old), _side(f"n{i}", new, new))
        for i, (old, new) in enumerate(pairs)
    ]
    figures = flip_report({}, items, verdicts="judge")["agreement"]["verdicts"]
    assert figures["n"] == 11 and abs(figures["kappa"] - 50 / 61) < 1e-4
    assert figures["ci_high"] == 1.0 and abs(figures["ci_low"] - 0.4882) < 1e-4
    interval = agreement(pairs).kappa_interval
    assert interval is not None
    assert (figures["ci_low"], figures["ci_high"]) == (round(interval.low, 4), interval.high)


def _pair(old: GradingSide, new: GradingSide, human_verdict: bool | None) -> FlipItem:
    return FlipItem(
        submission_id="s1", agent="a", model="m", scenario_id="hotel/port",
        old=old, new=new, human_verdict=human_verdict,
    )  # fmt: skip


# the judge could not score it; an adjudicator passed it by a verdict override
_UNSCORED_HUMAN_PASS = GradingSide(
    id="g-old", status="unscored", passed=True, judge_passed=None, yes_count=None
)
# a rule pass of a diagnosis flagged for injection: held for a human, no verdict in force
_HELD_PASS = GradingSide(
    id="g-new", status="graded", passed=None, judge_passed=True, yes_count=8, held=True
)


def test_a_human_decided_unscored_grading_beside_a_held_pass_is_listed_as_held() -> None:
    """A grading the judge could not score and a human passed has a verdict; beside a
    held pass it is listed apart as ``held`` (flip ``held`` in the CSV), not counted
    among those no human decided."""
    item = _pair(_UNSCORED_HUMAN_PASS, _HELD_PASS, human_verdict=True)
    report = flip_report({"id": "job"}, [item])
    assert report["held"]["count"] == 1, report["not_compared"]
    assert report["not_compared"] == {}
    [row] = list(csv.DictReader(io.StringIO(flips_csv([item]))))
    assert row["flip"] == "held", row
