"""Qualifying a judge: grade a labelled gold set, store the agreement, compare with the last run.

The judge is graded with the service's sampling settings, at most
``SRE_JUDGE_JUDGE_CONCURRENCY`` diagnoses at a time. The run is stored with the judge's
identity (spec without base URL, settings, rubric version, asking mode), so gradings by
that judge stop being provisional once it qualifies; it records the model digest it
measured (``judge.identity``), so a model replaced behind the name is provisional again
until a new run measures it. The part of the set the drift canary grades is graded a
second time to measure the judge's run-to-run noise, which the canary holds the answers
it sees change against (``SRE_JUDGE_CANARY_BUDGET`` more judge calls at most). The
previous run of the same gold
file and judge is returned beside the new one, so a caller can report drift (a drop of
verdict kappa, e.g. a silently updated model tag).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from api.judges.canary import CallBudget, measured_digest
from api.judges.canary_queries import CanaryQueries
from api.service.errors import InvalidRequest, invalid_judge
from api.service.grader_factory import calls_per_item, grader_for, sampled
from api.service.qualification import identity_of
from api.service.services import Services
from judge.calibration import (
    CalibrationFigures,
    GoldError,
    GoldItem,
    calibration_figures,
    grade_gold,
    load_gold,
    more_than,
    qualifies,
)
from judge.canary import answers_of, canary_items, item_key, measure_noise, within_budget
from judge.errors import JudgeSpecError
from judge.grader import Grader
from judge.panel import PanelGrader
from judge.rubric import Rubric
from judge.statistics import Proportion
from storage.calibration import holds
from storage.judge_digests import JudgeDigestRecord
from storage.quality_tables import CalibrationRunRecord

__all__ = [
    "Calibration",
    "JudgeRuns",
    "calibrate",
    "configured_identities",
    "drifted",
    "identity_key",
    "judge_runs",
]


@dataclass(frozen=True, slots=True)
class Calibration:
    """A stored calibration run, its figures, and the previous run of the same gold and judge."""

    figures: CalibrationFigures
    run: CalibrationRunRecord
    previous: CalibrationRunRecord | None


def drifted(previous: Any, run: Any, threshold: float) -> bool:
    """Whether verdict kappa dropped by more than ``threshold`` since ``previous`` (a
    drop of exactly the threshold is none: :func:`judge.calibration.more_than`)."""
    if previous is None or previous.verdict_kappa is None:
        return False
    now = -1.0 if run.verdict_kappa is None else run.verdict_kappa
    return more_than(previous.verdict_kappa - now, threshold)


def _gold_items(
    raw: bytes, gold_name: str, rubric: Rubric, *, max_text_bytes: int
) -> list[GoldItem]:
    try:
        return load_gold(raw.decode("utf-8"), rubric, max_text_bytes=max_text_bytes)
    except (GoldError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"{gold_name}: {exc}", title="Invalid gold set") from None


def _grader(services: Services, spec_text: str) -> Grader | PanelGrader:
    try:
        grader = grader_for(services.settings, services.backends.get(spec_text))
        return sampled(services.settings, grader, spec_text)
    except JudgeSpecError as exc:
        raise invalid_judge(exc) from None


async def _noise(
    services: Services,
    spec_text: str,
    rubric: Rubric,
    items: list[GoldItem],
    answers: dict[str, dict[str, bool]],
) -> Proportion:
    """The judge's run-to-run noise: the part of the set the drift canary grades (as
    many items as its budget pays for), graded a second time within that budget, as
    the canary grades it, and compared answer by answer with the first grading."""
    settings, budget = services.settings, services.settings.canary_budget
    chosen = within_budget(
        canary_items(items, len(items)),
        budget,
        lambda item: calls_per_item(settings, spec_text, rubric, item.ground_truth),
    )
    keys = [key for key, _ in chosen]
    backend = CallBudget(services.backends.get(spec_text), budget)
    grader = sampled(services.settings, grader_for(services.settings, backend), spec_text)
    concurrency = services.settings.judge_concurrency
    again = await grade_gold(grader, rubric, [item for _, item in chosen], concurrency=concurrency)
    await measured_digest(services, spec_text, again)  # a model changed since is seen
    first = {key: answers[key] for key in keys if key in answers}
    return measure_noise(first, answers_of(keys, again))


async def calibrate(
    services: Services,
    raw_gold: bytes,
    *,
    gold_name: str,
    judge: str | None = None,
    rubric: str | None = None,
) -> Calibration:
    """Grade the gold set (JSONL bytes) with ``judge`` (default: the service's), store the run."""
    settings = services.settings
    target = await services.rubrics.require(rubric, default=settings.rubric)
    items = _gold_items(raw_gold, gold_name, target, max_text_bytes=settings.max_text_bytes)
    spec_text = judge or settings.judge
    grader = _grader(services, spec_text)
    results = await grade_gold(grader, target, items, concurrency=settings.judge_concurrency)
    # the model the figures measured (a judge known by its completions' fingerprint too)
    digest = await measured_digest(services, spec_text, results)
    answers = answers_of([item_key(item, i) for i, item in enumerate(items)], results)
    noise = await _noise(services, spec_text, target, items, answers)
    figures = await asyncio.to_thread(calibration_figures, target, items, results)
    identity = identity_of(settings, spec_text, target)
    sha = hashlib.sha256(raw_gold).hexdigest()
    earlier = await services.store.calibration.runs(**identity, gold_sha256=sha)
    run = CalibrationRunRecord(
        **identity, rubric_id=target.id, gold_name=gold_name, gold_sha256=sha,
        judge_digest=digest,
        n=figures.n, verdict_kappa=figures.verdict_kappa,
        false_pass_rate=figures.false_pass_rate,
        # the judge's answers item by item and their run-to-run noise: the drift canary
        # compares its own answers with them and the share that changed with the noise
        results={**figures.model_dump(mode="json"), "answers": answers,
                 "noise": noise.model_dump(mode="json")},
        qualified=qualifies(
            figures, min_kappa=settings.qualify_min_kappa,
            max_false_pass=settings.qualify_max_false_pass,
        ),
    )  # fmt: skip
    run = await services.store.calibration.add_run(run)
    return Calibration(figures=figures, run=run, previous=earlier[0] if earlier else None)


@dataclass
class JudgeRuns:
    """One judge identity (spec, settings, rubric version, asking mode) and its runs."""

    judge: str
    rubric: str
    asking_mode: str
    settings: str
    runs: list[CalibrationRunRecord] = field(default_factory=list)
    #: the model digest behind the judge's name now, and whether it ever changed
    digest: JudgeDigestRecord | None = None
    #: whether a drift canary run demoted the judge after its latest calibration run
    demoted: bool = False

    @property
    def qualified(self) -> bool:
        """The latest run decides, as it does for gradings, if it measured the model
        behind the name now (``storage.calibration.holds``) and no canary run demoted
        the judge since."""
        latest = self.runs[0] if self.runs else None
        return holds(latest, self.current_digest) and not self.demoted

    @property
    def current_digest(self) -> str | None:
        """The digest behind the name now, if known."""
        return self.digest.digest if self.digest is not None else None

    @property
    def changed_since_run(self) -> bool:
        """Whether the latest run qualified another model than the one behind the name."""
        latest = self.runs[0] if self.runs else None
        return bool(latest and latest.qualified and not holds(latest, self.current_digest))


def identity_key(
    judge_spec: str, rubric_id: str, rubric_version: str, asking_mode: str, settings: Any
) -> tuple[str, str, str, str]:
    """A judge identity as :class:`JudgeRuns` names it: spec, ``rubric@version``, asking
    mode and settings (canonical JSON)."""
    text = json.dumps(settings, sort_keys=True)
    return (judge_spec, f"{rubric_id}@{rubric_version}", asking_mode, text)


def configured_identities(services: Services) -> list[tuple[str, str, str, str]]:
    """The identities the configured judge grades under now (spec, the default rubric's
    version, asking mode and settings): the ones whose runs qualify its gradings; one
    for each member of ``SRE_JUDGE_PANEL`` when set (a member qualifies on its own)."""
    settings = services.settings
    rubric = services.rubrics.current[settings.rubric]
    keys = []
    for spec in settings.grading_members:
        identity = identity_of(settings, spec, rubric)
        keys.append(
            identity_key(
                identity["judge_spec"],
                rubric.id,
                identity["rubric_version"],
                identity["asking_mode"],
                identity["judge_settings"],
            )
        )
    return keys


def _grouped(runs: list[CalibrationRunRecord]) -> list[JudgeRuns]:
    groups: dict[tuple[str, ...], JudgeRuns] = {}
    for run in runs:  # newest first, so each group's first run is its latest
        key = identity_key(
            run.judge_spec, run.rubric_id, run.rubric_version, run.asking_mode, run.judge_settings
        )
        groups.setdefault(key, JudgeRuns(*key)).runs.append(run)
    return list(groups.values())


async def judge_runs(services: Services, *, limit: int = 500) -> list[JudgeRuns]:
    """The newest ``limit`` calibration runs grouped by judge identity, newest first,
    each with the digest behind its name now."""
    groups = _grouped(await services.store.calibration.recent(limit=limit))
    digests: dict[str, JudgeDigestRecord | None] = {}
    for group in groups:
        if group.judge not in digests:
            digests[group.judge] = await services.store.judge_digests.current(group.judge)
        group.digest = digests[group.judge]
        if group.runs:
            group.demoted = await CanaryQueries(services.store.db).demoted(group.runs[0].id)
    return groups
