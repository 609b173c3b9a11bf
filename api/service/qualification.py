"""Which judges are qualified, and marking gradings of unqualified judges provisional.

The pass policy (``SRE_JUDGE_PASS_POLICY``) says whose passes stand without a human:
``qualified`` (the default) holds every pass of a judge no calibration run qualified
(review reason ``judge_not_qualified``); ``unflagged`` lets them stand. Either way a
pass with an injection signal is held (``judge.review_reasons.INJECTION_SIGNALS``).

A judge identity is its spec without the base URL, the service's sampling settings (its
context window among them, where one is set), the rubric version and the asking mode
(see ``storage.calibration``). Until a calibration run qualifies it, its gradings are
``provisional``; a deterministic share of them (``SRE_JUDGE_PROVISIONAL_REVIEW_RATE``,
by a hash of the grading id) goes to the review queue with the reason
``provisional_sample``. Lookups are cached for a minute per
process, so a new calibration run takes effect within that time; a new model digest
behind a judge's name (``judge.identity``) drops them at once, and the judge is
provisional until a calibration run measures that model (``storage.calibration.holds``):
the digest stored for the name and, in a process that follows the judge, the one its
tracker learned (stored or not yet) must both be the one measured.

On start, ``serve`` states whether its judge (each member of a panel) is qualified on
the calibration set that ships with the package, with the verdict kappa and false-pass
rate of its latest run there (:func:`qualification_on_start`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from api.service.grader_factory import (
    asking_choice,
    context_tokens_for,
    profile_of_spec,
    sampling_for,
)
from api.service.settings import Settings
from judge.calibration import DEFAULT_GOLD
from judge.identity import DigestTracker
from judge.profiles import AskingChoice
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric
from judge.spec import judge_identity, member_specs
from judge.verdict import GradingResult

if TYPE_CHECKING:
    from storage import Store
    from storage.quality_tables import CalibrationRunRecord

__all__ = [
    "Qualifications",
    "identity_of",
    "in_review_sample",
    "judge_settings",
    "qualification_on_start",
]

CACHE_SECONDS = 60.0


def judge_settings(
    settings: Settings, choice: AskingChoice | None = None, *, judge_spec: str | None = None
) -> dict[str, Any]:
    """The sampling settings that are part of a judge's identity: what ``judge_spec``'s
    model is sent (its profile's sampling where no setting is given).

    The reply format counts only when a setting or the judge's profile chose it
    (``choice``), the polarity override only when set, and the context window
    (``context_tokens``: sent to Ollama as ``num_ctx``, and what decides which diagnoses
    fit) only when a setting or the profile gives one, so the identity of a judge
    qualified before they existed, or without them, stays the same. A judge asked
    several samples is sent every call at the sample temperature: that temperature is
    part of it then."""
    profile = profile_of_spec(settings, judge_spec) if judge_spec is not None else None
    params = sampling_for(settings, profile)
    identity: dict[str, Any] = {
        "temperature": params.temperature,
        "seed": params.seed,
        "max_tokens": params.max_tokens,
        "samples": settings.judge_samples,
    }
    window = context_tokens_for(settings, profile)
    if window is not None:
        identity["context_tokens"] = window
    if settings.judge_samples > 1:
        identity["sample_temperature"] = settings.judge_sample_temperature
    if choice is not None and choice.reply_format_chosen:
        identity["reply_format"] = choice.reply_format
    if settings.judge_ask_as is not None:
        identity["ask_as"] = settings.judge_ask_as
    return identity


def identity_of(settings: Settings, spec_text: str, rubric: Rubric) -> dict[str, Any]:
    """The identity a calibration run is stored under: spec, settings, rubric, asking."""
    choice = asking_choice(settings, spec_text, rubric)
    return {
        "judge_spec": judge_identity(spec_text),
        "judge_settings": judge_settings(settings, choice, judge_spec=spec_text),
        "rubric_version": rubric.version,
        "asking_mode": choice.asking,
    }


def _figures(run: CalibrationRunRecord, settings: Settings) -> str:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    return (
        f"verdict kappa {number(run.verdict_kappa)} (bar {settings.qualify_min_kappa:.2f}), "
        f"false-pass rate {number(run.false_pass_rate)} "
        f"(bar {settings.qualify_max_false_pass:.2f}), n {run.n}, "
        f"run {run.created_at:%Y-%m-%d %H:%M} UTC"
    )


async def qualification_on_start(store: Store, settings: Settings, rubric: Rubric) -> str:
    """One line: is the service's judge qualified on the shipped calibration set, and how well
    (with ``SRE_JUDGE_PANEL``, each member, as each is qualified on its own).

    Also says whether its gradings are provisional, which follows the latest run of any
    gold set (a panel's while any member's are).
    """
    if not settings.panel:
        text, provisional = await _judge_on_start(store, settings, rubric, settings.judge)
        return f"{text}; {_provisional(provisional)}"
    members = [
        await _judge_on_start(store, settings, rubric, spec) for spec in settings.panel_specs
    ]
    texts = "; ".join(text for text, _ in members)
    provisional = any(member for _, member in members)
    return f"panel of {len(members)} judges, each qualified on its own: {texts}; " + (
        _provisional(provisional)
    )


def _provisional(provisional: bool) -> str:
    return "its gradings are provisional" if provisional else "its gradings are not provisional"


async def _judge_on_start(
    store: Store, settings: Settings, rubric: Rubric, spec: str
) -> tuple[str, bool]:
    """What :func:`qualification_on_start` says of one judge, and whether it is provisional."""
    identity = identity_of(settings, spec, rubric)
    choice = asking_choice(settings, spec, rubric)
    profile = f", profile {choice.profile}" if choice.profile else ""
    who = (
        f"judge {identity['judge_spec']} (rubric {rubric.id}@{rubric.version}, "
        f"asking {identity['asking_mode']}, replies {choice.reply_format}{profile})"
    )
    gold = DEFAULT_GOLD.name
    sha = hashlib.sha256(DEFAULT_GOLD.read_bytes()).hexdigest()
    on_set = await store.calibration.runs(**identity, gold_sha256=sha)
    digest = await store.judge_digests.current(identity["judge_spec"])
    current = digest.digest if digest is not None else None
    provisional = not await store.calibration.is_qualified(**identity, current_digest=current)
    if not on_set:
        return f"{who}: not calibrated on {gold} (run `sre-judge calibrate`)", provisional
    run = on_set[0]
    state = "qualified" if run.qualified else "NOT qualified"
    return f"{who}: {state} on {gold}: {_figures(run, settings)}", provisional


def in_review_sample(grading_id: str, rate: float) -> bool:
    """Deterministically whether a grading falls in a sample of ``rate`` (by its id's hash)."""
    digest = int(hashlib.sha256(grading_id.encode()).hexdigest()[:8], 16)
    return digest / 0x1_0000_0000 < rate


class Qualifications:
    """Cached qualification lookups of one process."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        digests: DigestTracker | None = None,
        changes: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        #: the digests this process learned (a judge is qualified only for the one
        #: measured); a new digest learned there, or a change of ``changes()`` (a
        #: demotion), drops every cached lookup
        self._digests = digests
        self._changes = changes
        self._generation = self._now()
        self._cache: dict[tuple[str, str, AskingChoice], tuple[float, bool]] = {}

    def _now(self) -> tuple[int, int]:
        digests = self._digests.generation if self._digests is not None else 0
        return digests, self._changes() if self._changes is not None else 0

    async def qualified(self, judge_spec: str, rubric_version: str, choice: AskingChoice) -> bool:
        """Whether the judge's latest calibration run qualifies it now (cached): it
        measured the digest stored for the name and the one this process learned."""
        generation = self._now()
        if generation != self._generation:
            self._generation = generation
            self._cache.clear()
        key = (judge_identity(judge_spec), rubric_version, choice)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        identity: dict[str, Any] = {
            "judge_spec": key[0],
            "judge_settings": judge_settings(self.settings, choice, judge_spec=judge_spec),
            "rubric_version": rubric_version,
            "asking_mode": choice.asking,
        }
        learned = self._digests.learned(key[0]) if self._digests is not None else None
        row = await self.store.judge_digests.current(key[0])
        stored = row.digest if row is not None else None
        found = await self.store.calibration.is_qualified(**identity, current_digest=stored)
        if found and learned is not None and learned != stored:  # not stored (yet)
            found = await self.store.calibration.is_qualified(**identity, current_digest=learned)
        if self._now() == generation:  # else a digest learned meanwhile may not be in it
            self._cache[key] = (now, found)
        return found

    async def members_qualified(self, judge_spec: str, rubric: Rubric, rubric_version: str) -> bool:
        """Whether the judge qualifies now: a panel when every member does (no calibration
        run is ever of a panel: each member is calibrated, and measured, on its own)."""
        for member in member_specs(judge_spec):
            choice = asking_choice(self.settings, member, rubric)
            if not await self.qualified(member, rubric_version, choice):
                return False
        return True

    async def mark(
        self, grading_id: str, judge_spec: str, rubric: Rubric | None, result: GradingResult
    ) -> tuple[GradingResult, bool]:
        """The result (sampled for review if provisional), and whether it is provisional.

        Every grading of a judge no calibration run qualified is provisional, unscored
        ones too, so none is ever counted as a qualified judge's; without its rubric the
        judge's identity cannot be looked up, so it is provisional as well. Under the
        pass policy ``qualified`` (the default) a pass by a provisional judge is held
        for a human: it gets the review reason ``judge_not_qualified``. A fail gets
        none: a pass an adjudicator's answer overrides make of it is the adjudicator's
        (docs/adjudication.md), not held for its judge."""
        if rubric is None:
            return result, True
        provisional = not await self.members_qualified(judge_spec, rubric, result.rubric_version)
        if result.status != "graded":
            return result, provisional
        reasons = list(result.review_reasons)
        if provisional and in_review_sample(grading_id, self.settings.provisional_review_rate):
            reasons.append(ReviewReason.PROVISIONAL_SAMPLE)
        passed = result.outcome is not None and result.outcome.passed
        if provisional and passed and self.settings.pass_policy == "qualified":
            reasons.append(ReviewReason.JUDGE_NOT_QUALIFIED)
        if len(reasons) != len(result.review_reasons):
            result = result.model_copy(update={"review_reasons": tuple(reasons)})
        return result, provisional
