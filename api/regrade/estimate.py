"""What a regrade will cost, before anything is spent.

Counts and text sizes come from SQL. Prompt tokens are estimated at four characters a
token: each call's fixed prompt (its messages and reply schema on empty texts, as the
grader builds them: every question in one call, or one question a call with
per-question and extraction asking, beside extraction's claims call) plus the
diagnosis and ground truth it carries. Completion tokens are the judge's measured
average so far, or ``max_tokens`` as an upper bound.

As long as the number of submissions keeps that fast, each submission is counted one by
one (``_tally``): its prompt is the one the grader that will ask it builds
(``judge.grader.Grader.fit``: its diagnosis cut to fit the judge's context window where
the policy is ``truncate``), and a prompt that does not fit and is not cut asks nothing,
whatever the asking mode; with extraction its calls depend on its ground truth. Cache
hits are exact: where a grading is one call at temperature 0, its request is looked up
in the judge cache under the digest of the model behind the judge's name now and in the
namespace of its ground truth's source (as a regrade reads it). A panel's members are
each counted so, as each is asked, and summed; so are the rubrics of a job that names
none, whose items each keep their submission's (their prompts differ in size).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.regrade.job_queries import Candidate, RegradeJobQueries, RegradeTarget, RegradeTotals
from api.regrade.selection import RegradeFilter
from api.service.grader_factory import (
    calls_per_item,
    grader_for,
    profile_of_judge,
    sampling_for,
)
from api.service.services import Services
from judge.backends import JudgeBackend
from judge.cache import CACHE_GRANULARITY, CacheKeys, ground_truth_namespace, kept_key
from judge.calls import ChatMessage, SamplingParams
from judge.extraction import build_claims_schema, build_extraction_messages, questions_asked
from judge.grader import Grader
from judge.profiles import AskingMode
from judge.prompt import build_messages, build_question_messages
from judge.reply_format import build_answer_schema, build_reply_schema
from judge.rubric import Rubric
from judge.spec import member_specs
from judge.style import AskingStyle, style_of

__all__ = [
    "BATCH_PRICE_FACTOR",
    "CACHE_CHECK_LIMIT",
    "CHARS_PER_TOKEN",
    "estimate_regrade",
    "sampling_params",
]

CHARS_PER_TOKEN = 4
#: the OpenAI Batch API's price against the live one
BATCH_PRICE_FACTOR = 0.5
#: above this many submissions they are not counted one by one (cache, window, calls)
CACHE_CHECK_LIMIT = 50_000


def sampling_params(services: Services, backend: JudgeBackend) -> SamplingParams:
    """The sampling the workers send ``backend``'s model (``grader_for``'s)."""
    settings = services.settings
    profile = profile_of_judge(settings, backend.name, backend.model)
    return sampling_for(settings, profile, backend=backend.name)


def _style(grader: Grader, rubric: Rubric) -> AskingStyle:
    """The reply format and polarity the workers' ``grader`` asks ``rubric`` in (the
    settings', the judge's profile's or the rubric's), so prompts and keys are its own."""
    choice = grader.asking_choice(rubric)
    return style_of(rubric, reply_format=choice.reply_format, ask_as=grader.ask_as)


#: the text a fixed prompt is built with, each text one character (taken off again): an
#: empty ground truth would add the control scenario's note, which other prompts lack
_STAND_IN = "x"


def _fixed_chars(messages: Sequence[ChatMessage], schema: Mapping[str, Any], texts: int) -> int:
    """The characters of one request built on ``texts`` stand-in texts, those taken off:
    its messages and its reply schema on empty texts."""
    text = json.dumps(schema, separators=(",", ":"))
    return sum(len(m.content) for m in messages) + len(text) - texts * len(_STAND_IN)


@dataclass(frozen=True)
class _GradingPrompts:
    """What one grading sends the judge beside its texts, and how often it sends them."""

    #: the characters of its requests on empty texts (messages and reply schemas)
    fixed: int
    #: the calls that carry the diagnosis, and those that carry the ground truth
    diagnoses: int
    ground_truths: int

    def chars(self, diagnosis: int, ground_truth: int) -> int:
        """The characters it sends with texts of these lengths."""
        return self.fixed + diagnosis * self.diagnoses + ground_truth * self.ground_truths


@dataclass(frozen=True)
class _PromptSizes:
    """A judge's requests for one rubric on empty texts, by call, as its grader builds
    them (``judge.prompt``, ``judge.extraction``), and the samples it takes a grading."""

    rubric: Rubric
    asking: AskingMode
    samples: int
    #: the single call asking every question
    single: int
    #: each question's call (per-question and extraction asking), by question id
    questions: dict[str, int]
    #: extraction's claims call
    claims: int

    @classmethod
    def of(
        cls, rubric: Rubric, style: AskingStyle, asking: AskingMode, samples: int
    ) -> _PromptSizes:
        """The sizes of ``rubric``'s requests asked in ``asking`` and ``style``."""
        form = style.reply_format
        questions = {
            q.id: _fixed_chars(
                build_question_messages(rubric, _STAND_IN, _STAND_IN, q.id, style=style),
                build_answer_schema(form, q),
                2,
            )
            for q in rubric.questions
        }
        return cls(
            rubric=rubric,
            asking=asking,
            samples=samples,
            single=_fixed_chars(
                build_messages(rubric, _STAND_IN, _STAND_IN, style=style),
                build_reply_schema(rubric, form),
                2,
            ),
            questions=questions,
            claims=_fixed_chars(build_extraction_messages(_STAND_IN), build_claims_schema(), 1),
        )

    def grading(self, ground_truth: str | None = None) -> _GradingPrompts:
        """One grading's prompts (with extraction, of ``ground_truth``; None: one with a
        ``[fault_spec]`` header), its samples included."""
        if self.asking == "single":
            fixed, diagnoses, truths = self.single, 1, 1
        else:
            asked = (
                self.rubric.questions
                if self.asking == "per_question"
                else questions_asked(self.rubric, ground_truth)
            )
            fixed = sum(self.questions[q.id] for q in asked)
            diagnoses = truths = len(asked)
            if len(asked) < len(self.rubric.questions):  # the claims: the diagnosis alone
                fixed, diagnoses = fixed + self.claims, diagnoses + 1
        n = self.samples
        return _GradingPrompts(fixed * n, diagnoses * n, truths * n)


@dataclass
class _Tally:
    """The covered submissions counted one by one: what their gradings take."""

    #: judge calls of the gradings asked, before the cache
    calls: int = 0
    #: gradings asked (a diagnosis not blank that fits the judge's window or is cut)
    gradings: int = 0
    #: their prompts' characters
    prompt_chars: int = 0
    #: the cache key of each grading of one call, with its prompt's characters
    keyed: list[tuple[str, int]] = field(default_factory=list)


async def _tally(
    services: Services,
    candidates: Sequence[Candidate],
    rubric: Rubric,
    grader: Grader,
    *,
    spec: str,
    style: AskingStyle,
    sizes: _PromptSizes,
    per_item: int,
    keyed: bool,
) -> _Tally:
    """Each candidate's grading as ``grader`` asks it (``Grader.fit``): none for a blank
    diagnosis or a prompt over the judge's context window, not cut; else its calls
    (``per_item``; with extraction, those of its ground truth) and prompt characters,
    and where ``keyed`` (one call at temperature 0) the cache key of its request."""
    backend = grader.backend
    settings = services.settings
    keyer = CacheKeys(
        build_reply_schema(rubric, style.reply_format),
        grader.params,
        backend=backend.name,
        model=backend.model,
        base_url=backend.base_url,
    )
    window = await grader.caller.context_window()
    # a regrade reads the entries of the model answering now (its digest; none for a
    # judge that reports none), of its submission's namespace: count what it will read
    digest = await services.backends.digests.of(backend).digest() if keyed else None
    extraction = sizes.asking == "extraction"
    prompts = sizes.grading()
    tally = _Tally()
    for candidate in candidates:
        if not candidate.diagnosis.strip():
            continue
        truth = candidate.ground_truth
        fit = grader.fit(rubric, truth, candidate.diagnosis, style=style, window=window)
        if fit.overflow is not None:  # asks nothing: unscored (context_overflow)
            continue
        if extraction:  # its calls depend on its ground truth
            chars = sizes.grading(truth).chars(len(fit.diagnosis), len(truth))
            tally.calls += calls_per_item(settings, spec, rubric, truth)
        else:
            chars = prompts.chars(len(fit.diagnosis), len(truth))
            tally.calls += per_item
        tally.gradings += 1
        tally.prompt_chars += chars
        key = keyer.key(fit.messages) if keyed else None
        if key is not None:
            space = ground_truth_namespace(candidate.scenario_id, candidate.submitted_by)
            tally.keyed.append((kept_key(key, digest=digest, namespace=space), chars))
    return tally


@dataclass(frozen=True)
class _RubricShare:
    """The covered submissions one rubric grades (a job that names none grades each with
    its own: ``RegradeTarget.item_rubric``)."""

    #: the items' rubric (id, version)
    key: tuple[str, str]
    #: None for a version known nowhere: its items are unscored (``rubric_unknown``)
    rubric: Rubric | None
    totals: RegradeTotals


async def _shares(
    services: Services, f: RegradeFilter, target: RegradeTarget, *, latest: bool
) -> list[_RubricShare]:
    """The rubrics the job's items are graded with, each with its submissions' totals, in
    (id, version) order; with nothing covered, the job's rubric (else the default one)
    with none, so the figures still say what a grading takes."""
    graded = await RegradeJobQueries(services.store.db).rubric_totals(f, latest=latest)
    totals: dict[tuple[str, str], RegradeTotals] = {}
    for (rubric_id, version), part in graded.items():
        key = target.item_rubric(rubric_id, version)
        totals[key] = totals[key].plus(part) if key in totals else part
    if not totals:
        shown = target.rubric
        if shown is None:
            shown = services.rubrics.current.get(services.settings.rubric)
        if shown is None:
            return []
        totals[(shown.id, shown.version)] = RegradeTotals(0, 0, 0)
    shares = []
    for key, part in sorted(totals.items()):
        rubric = target.rubric
        if rubric is None:
            rubric = await services.rubrics.resolve(*key)
        shares.append(_RubricShare(key, rubric, part))
    return shares


class _Candidates:
    """The covered submissions' texts, read once for all of a panel's members and all the
    job's rubrics."""

    def __init__(self, services: Services, target: RegradeTarget) -> None:
        """Read through ``services``' store; ``target`` says each item's rubric."""
        self._services = services
        self._target = target
        self._read: list[Candidate] | None = None

    async def read(self, f: RegradeFilter, share: _RubricShare, *, latest: bool) -> list[Candidate]:
        """The candidates of ``f`` graded with ``share``'s rubric (``latest``: with the
        newest ground truths)."""
        if self._read is None:
            queries = RegradeJobQueries(self._services.store.db)
            self._read = await queries.candidates(f, latest=latest)
        item_rubric = self._target.item_rubric
        return [c for c in self._read if item_rubric(c.rubric_id, c.rubric_version) == share.key]


@dataclass(frozen=True)
class _JudgeEstimate:
    """What one judge (a panel's member, or the job's one judge) takes for the items of
    one rubric."""

    calls: int
    hits: int
    checked: bool
    cacheable: bool
    #: calls a grading takes, on average where that depends on its ground truth
    per_grading: float
    prompt_tokens: int
    completion_tokens: int
    measured: bool


async def _judge_estimate(
    services: Services,
    f: RegradeFilter,
    share: _RubricShare,
    rubric: Rubric,
    backend: JudgeBackend,
    *,
    spec: str,
    latest: bool,
    one_by_one: bool,
    candidates: _Candidates,
) -> _JudgeEstimate:
    """The calls, cache hits and tokens of one judge ``spec`` asked through ``backend``
    for the submissions ``rubric`` (``share``'s) grades: counted one by one where
    ``one_by_one`` (the job covers at most :data:`CACHE_CHECK_LIMIT`), else from the
    totals, as if every ground truth had SREGym's usual ``[fault_spec]`` header (it names
    components, changes no value) and every prompt fitted the judge's window."""
    settings = services.settings
    totals = share.totals
    grader = grader_for(settings, backend)
    params = grader.params
    style = _style(grader, rubric)
    asking = grader.asking_choice(rubric).asking
    sizes = _PromptSizes.of(rubric, style, asking, settings.judge_samples)
    asked = totals.submissions - totals.empty_diagnoses
    per_item = calls_per_item(settings, spec, rubric)
    cacheable = params.temperature == 0
    one_call = asking == "single" and per_item == 1
    counted = asked > 0 and one_by_one
    checked = cacheable and one_call and one_by_one
    hits = 0
    if counted:
        tally = await _tally(
            services,
            await candidates.read(f, share, latest=latest),
            rubric,
            grader,
            spec=spec,
            style=style,
            sizes=sizes,
            per_item=per_item,
            keyed=checked,
        )
        found = await services.store.cache.cached_keys([key for key, _ in tally.keyed])
        hit_chars = sum(chars for key, chars in tally.keyed if key in found)
        hits = sum(1 for key, _ in tally.keyed if key in found)
        calls, gradings = tally.calls, tally.gradings
        prompt_chars = tally.prompt_chars - hit_chars
    else:
        grading = sizes.grading()
        calls, gradings = asked * per_item, asked
        texts = max(grading.diagnoses, grading.ground_truths)
        prompt_chars = grading.fixed * asked + totals.text_chars * texts
    per_grading = calls / gradings if gradings else per_item
    needed = calls - hits
    average = await services.store.cache.average_completion_tokens(backend.name, backend.model)
    per_call = average if average is not None else params.max_tokens
    return _JudgeEstimate(
        calls=needed,
        hits=hits,
        checked=checked,
        cacheable=cacheable,
        per_grading=per_grading,
        prompt_tokens=prompt_chars // CHARS_PER_TOKEN,
        completion_tokens=round(per_call * needed),
        measured=average is not None,
    )


async def estimate_regrade(
    services: Services,
    f: RegradeFilter,
    target: RegradeTarget,
    backends: Sequence[JudgeBackend],
) -> dict[str, Any]:
    """Submissions, judge calls after the cache, and prompt and completion tokens, for
    the job ``target`` describes (with ``ground_truth: latest``, graded against each
    scenario's newest ground truth). Its judge, one or a panel (``panel:SPEC1,SPEC2``),
    asks through ``backends``, in the order of its members: each member's calls, cache
    hits and tokens are counted as it is asked (its asking mode and samples say how many
    calls a grading takes; its cache is checked key by key when that is one call), for
    the items of each rubric the job grades with (``rubrics``: each with its
    submissions), and summed."""
    latest = target.ground_truth == "latest"
    shares = await _shares(services, f, target, latest=latest)
    totals = RegradeTotals(0, 0, 0)
    for share in shares:
        totals = totals.plus(share.totals)
    candidates = _Candidates(services, target)
    judges = [
        await _judge_estimate(
            services,
            f,
            share,
            share.rubric,
            backend,
            spec=member,
            latest=latest,
            one_by_one=totals.submissions <= CACHE_CHECK_LIMIT,
            candidates=candidates,
        )
        for share in shares
        if share.rubric is not None  # its items are unscored: nothing is asked
        for member, backend in zip(member_specs(target.judge_spec), backends, strict=True)
    ]
    needed = sum(j.calls for j in judges)
    prompt_tokens = sum(j.prompt_tokens for j in judges)
    completion_tokens = sum(j.completion_tokens for j in judges)
    measured = all(j.measured for j in judges)
    return {
        "submissions": totals.submissions,
        "empty_diagnoses": totals.empty_diagnoses,
        "rubrics": [
            {"id": s.key[0], "version": s.key[1], "submissions": s.totals.submissions}
            for s in shares
            if s.totals.submissions
        ],
        "judge_calls": needed,
        "cache_hits": sum(j.hits for j in judges),
        "cache_checked": all(j.checked for j in judges),
        "cache_granularity": CACHE_GRANULARITY,
        "cache_note": _cache_note(
            all(j.cacheable for j in judges), max((j.per_grading for j in judges), default=1)
        ),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "completion_tokens_basis": "measured" if measured else "max_tokens",
        "cost_usd": _cost(services, prompt_tokens, completion_tokens),
    }


def _cache_note(cacheable: bool, per_grading: float) -> str:
    """What the cache figures mean for this judge (``per_grading``: calls a grading
    takes of a judge, a panel's member that takes most, on average where that depends
    on its ground truth)."""
    if not cacheable:
        return "the judge samples (temperature > 0): nothing is reused"
    if per_grading > 1:
        return (
            f"a grading takes {per_grading:g} judge calls (asking mode, samples): the cache "
            "is not checked, the calls are counted before it"
        )
    return "the rubric asks every question in one call: a changed question re-asks the whole call"


def _cost(services: Services, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The judge calls' price live and through the Batch API (half the live price), from
    ``SRE_JUDGE_JUDGE_PRICE_PROMPT`` / ``_COMPLETION`` (USD per million tokens); None
    where no price is configured."""
    settings = services.settings
    prompt, completion = settings.judge_price_prompt, settings.judge_price_completion
    if prompt is None and completion is None:
        return {"live": None, "batch": None, "batch_factor": BATCH_PRICE_FACTOR}
    live = (prompt_tokens * (prompt or 0.0) + completion_tokens * (completion or 0.0)) / 1e6
    return {
        "live": round(live, 4),
        "batch": round(live * BATCH_PRICE_FACTOR, 4),
        "batch_factor": BATCH_PRICE_FACTOR,
    }
