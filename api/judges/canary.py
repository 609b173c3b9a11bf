"""The drift canary: regrade a labelled canary set within a call budget, store the run,
demote a judge that drifted.

A run grades the canary set (``SRE_JUDGE_CANARY_SET``, default a stratified part of the
shipped calibration set: ``judge.canary.canary_items``) with one judge and the service's
sampling settings, bypassing the judge cache, and never makes more than
``SRE_JUDGE_CANARY_BUDGET`` judge calls: the set is cut to what the budget can pay for
and every call past it is refused (the item ends unscored and is not counted). The run
is compared with the judge's latest calibration run: its figures, and its answers on the
same items (or, when it graded another set, the first canary run's after it)
(``judge.canary.check``); a drifted judge is demoted: provisional until a new
calibration run, audited as ``judge.demoted`` (the webhook event), counted in
``sre_judge_judge_demotions_total`` and logged, once: later runs that find the drift
still are stored as demoting runs without another event. A run that scored no item (the
judge could not be asked, or the budget pays for no item) is ``unmeasured``
(:func:`canary_outcome`) and logged as a warning. Runs come on demand (``POST
/v1/judges/canary``, ``sre-judge judges canary``) and every
``SRE_JUDGE_CANARY_INTERVAL`` seconds from :class:`CanaryLoop`, one run for each judge
the service grades with: every member of ``SRE_JUDGE_PANEL`` when set (each against its
own calibration, as a panel qualifies while each member does), else ``SRE_JUDGE_JUDGE``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from api.judges.canary_queries import CanaryQueries
from api.service.background import BackgroundTask, cancel_and_wait
from api.service.errors import InvalidRequest, invalid_judge
from api.service.grader_factory import calls_per_item, grader_for, sampled
from api.service.metrics import Metrics
from api.service.qualification import identity_of
from api.service.services import Services
from api.service.settings import Settings
from judge.backends.base import JudgeBackend, StandIn
from judge.calibration import (
    DEFAULT_GOLD,
    GoldError,
    calibration_figures,
    grade_gold,
    load_gold,
)
from judge.calls import Completion, JudgeRequest
from judge.canary import (
    CanaryCheck,
    CanaryOutcome,
    answers_of,
    canary_items,
    check,
    outcome,
    within_budget,
)
from judge.errors import JudgeCallError, JudgeSpecError
from judge.spec import judge_identity
from judge.statistics import Proportion
from judge.verdict import GradingResult
from storage.calibration import holds
from storage.quality_tables import CalibrationRunRecord, CanaryRunRecord

__all__ = [
    "BudgetSpent",
    "CallBudget",
    "CanaryLoop",
    "canary_answer",
    "canary_history",
    "canary_judges",
    "canary_outcome",
    "canary_public",
    "measured_digest",
    "nothing_measured",
    "run_canaries",
    "run_canary",
]

log = logging.getLogger("sre_judge.judges")

_T = TypeVar("_T")


class BudgetSpent(JudgeCallError):
    """The canary's judge call budget is spent: the call is not made."""

    code = "canary_budget_spent"
    retryable = False


class CallBudget(StandIn):
    """The real judge, asked at most ``budget`` times; every call past it is refused
    (probing and the context window are not calls)."""

    def __init__(self, backend: JudgeBackend, budget: int) -> None:
        """Ask ``backend`` at most ``budget`` times."""
        super().__init__(backend)
        self.budget = budget
        self.calls = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        """Make the call if the budget allows (counted before it is sent)."""
        if self.calls >= self.budget:
            raise BudgetSpent(f"the canary's budget of {self.budget} judge calls is spent")
        self.calls += 1
        return await self._real.complete(request)


async def measured_digest(
    services: Services, spec: str, results: Sequence[GradingResult]
) -> str | None:
    """The digest of the model behind ``spec`` once the judge calls of a grading made
    without the judge cache (a calibration or canary run's ``results``) were handed on to
    the digest tracker, as the grading workers hand theirs (``BackendPool.follow_digests``):
    a judge known by its completions' fingerprint only is known by the one they carried,
    and a model replaced behind the name is seen. None: the judge reports none.

    A look-up that fails leaves the digest known before (or none): the run's paid judge
    calls are never thrown away for it (``BackendPool.follow_digests``)."""
    calls = [call for result in results for call in result.calls]
    await services.backends.follow_digests(spec, calls)
    return services.backends.digests.known(services.backends.get(spec))


def _canary_set(services: Services) -> tuple[str, bytes]:
    """The canary set's name and bytes (``SRE_JUDGE_CANARY_SET``, else the shipped set)."""
    path = services.settings.canary_set or DEFAULT_GOLD
    try:
        return path.name, path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read the canary set {path}: {exc.strerror}") from None


async def _baseline(
    services: Services, judge_spec: str, sha: str, calibration: CalibrationRunRecord | None
) -> dict[str, Any] | None:
    """The answers a canary run's are compared with: the qualifying calibration run's
    own, when it graded the same set (the canary's items are a part of it), else the
    first canary run's after it."""
    same = calibration is not None and calibration.gold_sha256 == sha
    kept = calibration.results.get("answers") if same and calibration is not None else None
    if kept:
        return dict(kept)
    calibrated = calibration.id if calibration is not None else None
    first = await CanaryQueries(services.store.db).baseline(
        judge_spec, sha, calibration_run_id=calibrated
    )
    return dict(first.answers) if first is not None else None


def canary_judges(settings: Settings, judge: str | None = None) -> list[str]:
    """The judges a canary measures: ``judge`` when named, else those the service grades
    with: each member of ``SRE_JUDGE_PANEL`` when set (a panel is qualified while every
    member is, each on its own calibration), else ``SRE_JUDGE_JUDGE``."""
    if judge is not None:
        return [judge]
    return settings.grading_members


async def run_canaries(
    services: Services,
    *,
    judge: str | None = None,
    actor: str = "canary",
    metrics: Metrics | None = None,
) -> list[CanaryRunRecord]:
    """Run the canary for ``judge``, or for each judge the service grades with
    (:func:`canary_judges`), one run each, in turn; the stored runs."""
    return [
        await run_canary(services, judge=spec, actor=actor, metrics=metrics)
        for spec in canary_judges(services.settings, judge)
    ]


async def run_canary(
    services: Services,
    *,
    judge: str | None = None,
    actor: str = "canary",
    metrics: Metrics | None = None,
) -> CanaryRunRecord:
    """Run and store the canary of ``judge`` (else ``SRE_JUDGE_JUDGE``; :func:`run_canaries`)."""
    run, found = await _measure(services, judge or services.settings.judge, actor=actor)
    return await _store(services, run, found, metrics=metrics)


async def _measure(
    services: Services, spec: str, *, actor: str
) -> tuple[CanaryRunRecord, CanaryCheck]:
    """Grade the canary set with ``spec`` within the budget and compare it with the
    judge's calibration: the run, not stored yet, and what it found (every judge call
    of a run is made here)."""
    settings = services.settings
    rubric = services.rubrics.current[settings.rubric]
    set_name, raw = _canary_set(services)
    try:
        gold = load_gold(raw.decode("utf-8"), rubric, max_text_bytes=settings.max_text_bytes)
        # the endpoint's slots are shared with the grading workers' calls
        backend = CallBudget(services.backends.limited(spec), settings.canary_budget)
    except (GoldError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"{set_name}: {exc}", title="Invalid canary set") from None
    except JudgeSpecError as exc:
        raise invalid_judge(exc) from None
    chosen = within_budget(
        canary_items(gold, len(gold)),
        settings.canary_budget,
        lambda item: calls_per_item(settings, spec, rubric, item.ground_truth),
    )
    keys, items = [k for k, _ in chosen], [i for _, i in chosen]
    grader = sampled(settings, grader_for(settings, backend), spec)  # no cache: asked anew
    results = await grade_gold(grader, rubric, items, concurrency=settings.judge_concurrency)
    figures = await asyncio.to_thread(calibration_figures, rubric, items, results)
    answers = answers_of(keys, results)
    identity = identity_of(settings, spec, rubric)
    digest = await measured_digest(services, spec, results)
    sha = hashlib.sha256(raw).hexdigest()
    runs = await services.store.calibration.runs(**identity)
    calibration = runs[0] if runs else None
    found = check(
        figures,
        answers,
        qualified=calibration.results if calibration is not None else None,
        baseline=await _baseline(services, identity["judge_spec"], sha, calibration),
        noise=calibration.results.get("noise") if calibration is not None else None,
        max_changed=settings.canary_max_changed,
    )
    verdicts = [r for r in figures.results["rows"] if r["level"] == "verdict"]
    run = CanaryRunRecord(
        judge_spec=identity["judge_spec"], judge_digest=digest,
        rubric_version=rubric.version, asking_mode=identity["asking_mode"],
        set_name=set_name, set_sha256=sha,
        calibration_run_id=calibration.id if calibration is not None else None,
        n=figures.n, scored=figures.scored, judge_calls=backend.calls,
        budget=settings.canary_budget,
        verdict_accuracy=verdicts[0]["agreement"]["accuracy"] if verdicts else None,
        verdict_kappa=figures.verdict_kappa, changed_share=found.changed_share,
        # only a judge qualified now (its run, on the model behind the name now) can be
        # demoted: a demotion pinned on another model's run would outlive its return
        demoted=found.demoted and holds(calibration, digest),
        reasons=found.reasons, answers=answers, created_by=actor,
        # the run-to-run noise the changed share was held against (None: the allowance)
        figures={**figures.results, "noise": _json(found.noise)},
    )  # fmt: skip
    return run, found


async def _store(
    services: Services, run: CanaryRunRecord, found: CanaryCheck, *, metrics: Metrics | None
) -> CanaryRunRecord:
    """Store a measured run; a new demotion is counted and logged, as is a lasting one."""
    newly = await CanaryQueries(services.store.db).add_run(run)
    if newly:
        services.qualification_changes += 1  # this process's gradings see it at once
        if metrics is not None:
            reason = "agreement" if found.fallen else "answers"
            metrics.judge_demotions.labels(run.judge_spec, reason).inc()
        log.warning(
            "judge %s demoted by the drift canary (run %s): %s; its gradings are provisional "
            "until a new calibration run",
            run.judge_spec,
            run.id,
            "; ".join(run.reasons),
        )
    elif run.demoted:
        log.info(
            "judge %s still drifts (canary run %s); it stays demoted until a new calibration run",
            run.judge_spec,
            run.id,
        )
    elif canary_outcome(run) == "unmeasured":
        log.warning(
            "the drift canary run %s of judge %s measured nothing: %s",
            run.id,
            run.judge_spec,
            nothing_measured(n=run.n, budget=run.budget, judge_calls=run.judge_calls),
        )
    return run


def nothing_measured(*, n: int, budget: int, judge_calls: int) -> str:
    """Why a run of ``n`` items, ``judge_calls`` of its ``budget`` made, scored none."""
    if n == 0:
        return (
            f"its budget of {budget} judge calls (SRE_JUDGE_CANARY_BUDGET) pays for no item "
            "of the canary set"
        )
    return f"none of its {n} items was scored ({judge_calls} of {budget} judge calls made)"


def canary_outcome(run: CanaryRunRecord) -> CanaryOutcome:
    """What a stored run concluded (``judge.canary.outcome``): ``unmeasured``,
    ``demoted``, ``drifted`` or ``ok``."""
    return outcome(scored=run.scored, demoted=run.demoted, reasons=run.reasons)


def _json(noise: Proportion | None) -> dict[str, Any] | None:
    return noise.model_dump(mode="json") if noise is not None else None


async def canary_history(
    services: Services, *, judge: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The newest canary runs, newest first, as the API shows them; ``judge``: of one
    judge only, named as calibration runs name it (an address given is left out)."""
    name = judge_identity(judge) if judge else None
    runs = await CanaryQueries(services.store.db).runs(judge_spec=name, limit=limit)
    return [canary_public(run) for run in runs]


def canary_answer(
    settings: Settings, runs: list[CanaryRunRecord], *, judge: str | None = None
) -> dict[str, Any]:
    """The answer of a canary on demand (:func:`run_canaries` with ``judge``): the run of
    its one judge, or, when it measured the panel the service grades with (however many
    members), ``{"demoted": any of them, "runs": [one run a member]}``."""
    if judge is not None or not settings.panel_specs:
        [run] = runs
        return canary_public(run)
    return {"demoted": any(run.demoted for run in runs), "runs": [canary_public(r) for r in runs]}


def canary_public(run: CanaryRunRecord) -> dict[str, Any]:
    """A canary run as the API shows it (figures per question and on the verdict)."""
    rows = [
        {
            "level": r["level"],
            "item": r["item"],
            "n": r["agreement"]["n"],
            "accuracy": r["agreement"]["accuracy"],
            "accuracy_interval": r["agreement"]["accuracy_interval"],
            "kappa": r["agreement"]["kappa"],
        }
        for r in run.figures.get("rows", [])
        if r["level"] in ("question", "verdict")
    ]
    return {
        "id": run.id,
        "judge": run.judge_spec,
        "judge_digest": run.judge_digest,
        "rubric_version": run.rubric_version,
        "asking_mode": run.asking_mode,
        "set": {"name": run.set_name, "sha256": run.set_sha256},
        "calibration_run_id": run.calibration_run_id,
        "n": run.n,
        "scored": run.scored,
        "judge_calls": run.judge_calls,
        "budget": run.budget,
        "verdict_accuracy": run.verdict_accuracy,
        "verdict_kappa": run.verdict_kappa,
        "changed_share": run.changed_share,
        "noise": run.figures.get("noise"),
        "demoted": run.demoted,
        "outcome": canary_outcome(run),
        "reasons": list(run.reasons),
        "agreement": rows,
        "created_by": run.created_by,
        "created_at": run.created_at.isoformat(),
    }


class CanaryLoop(BackgroundTask):
    """Runs the canary for the service's judges (each member of a panel) every
    ``SRE_JUDGE_CANARY_INTERVAL`` seconds (stopped, a run under way is cancelled: nothing
    of it is stored).

    Every process with workers runs this loop; the schedule is one for all of them: a
    process runs a judge's canary only once it claimed the run (:meth:`CanaryQueries.claim`),
    as no process stored a run of the judge within the interval (a tenth of it spared:
    loops wake a little late) and no claim is under way. A claim lives two intervals; the
    process renews it every ``renew_every`` seconds (half an interval) while its run goes
    on, so a run slower than that keeps it and no second run starts beside it. A claim
    that is not renewed (its process stopped or stalled, or the run failed) lapses, and
    the next process runs the canary; a run whose renewal finds that another process
    claimed it since stops there (its judge calls cancelled, nothing stored), so the
    budget is not spent twice over."""

    task_name = "drift-canary"

    def __init__(
        self,
        services: Services,
        metrics: Metrics | None = None,
        *,
        renew_every: float | None = None,
    ) -> None:
        """Run with ``services``; count demotions in ``metrics``; renew a claim every
        ``renew_every`` seconds while its run goes on (default half an interval, a
        quarter of a claim's life)."""
        super().__init__()
        self.services = services
        self.metrics = metrics
        self.renew_every = renew_every

    def start(self) -> None:
        """Start the loop (nothing when the interval is 0: the canary is off)."""
        if self.services.settings.canary_interval > 0:
            super().start()

    async def tick(self) -> None:
        """One turn of the schedule: each judge's canary this process claims, in turn
        (nothing when the canary is off)."""
        if self.services.settings.canary_interval <= 0:
            return
        for spec in canary_judges(self.services.settings):
            await self._run_claimed(spec)

    async def _run_claimed(self, spec: str) -> None:
        """Claim the scheduled run of ``spec`` and, when this process got it, run it while
        renewing the claim; store it unless the claim was lost meanwhile."""
        interval = self.services.settings.canary_interval
        queries = CanaryQueries(self.services.store.db)
        name = judge_identity(spec)
        claim = await queries.claim(name, within=0.9 * interval, hold=2 * interval)
        if claim is None:
            return
        every = self.renew_every if self.renew_every is not None else interval / 2
        measuring = _measure(self.services, spec, actor="canary")
        measured = await _while_claimed(queries, name, claim, measuring, every=every)
        if measured is not None:
            await _store(self.services, *measured, metrics=self.metrics)

    async def _loop(self) -> None:
        interval = self.services.settings.canary_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self.tick()
            except Exception:  # the next run tries again
                log.exception("the drift canary run failed")


async def _while_claimed(
    queries: CanaryQueries,
    judge_spec: str,
    claim: str,
    work: Coroutine[Any, Any, _T],
    *,
    every: float,
) -> _T | None:
    """Await ``work`` while renewing ``claim`` every ``every`` seconds; what it returns,
    or None once a renewal finds the claim taken by another process (``work`` is
    cancelled then, as it is when this is). A renewal the database fails is tried again
    at the next beat: the claim lapses only when none succeeds for its whole life."""
    task = asyncio.create_task(work, name=f"drift-canary {judge_spec}")
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            try:
                held = await queries.renew(judge_spec, claim)
            except Exception:
                log.warning(
                    "could not renew the drift canary's claim of %s", judge_spec, exc_info=True
                )
                continue
            if not held:
                log.warning(
                    "the drift canary run of %s stops: another process claimed it after "
                    "this one's claim lapsed; nothing of this run is stored",
                    judge_spec,
                )
                return None
    finally:
        if not task.done():
            await cancel_and_wait(task)
