"""What a regrade will cost, before anything is spent.

Counts and text sizes come from SQL. Prompt tokens are estimated at four characters a
token: the fixed prompt (the rubric's messages and reply schema on empty texts) plus
each submission's diagnosis and ground truth. Completion tokens are the judge's
measured average so far, or ``max_tokens`` as an upper bound. Cache hits are exact:
each submission's request is built by the grader that will ask it
(``judge.grader.Grader.fit``: its diagnosis cut to fit the judge's context window where
the policy is ``truncate``) and looked up in the judge cache under the digest of the
model behind the judge's name now and in the namespace of its ground truth's source (as
a regrade reads it), as long as the number of submissions keeps that fast; a prompt
that does not fit and is not cut asks nothing. A panel's members are each counted so,
as each is asked, and summed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from api.regrade.job_queries import RegradeJobQueries, RegradeTotals
from api.regrade.selection import RegradeFilter
from api.service.grader_factory import (
    asking_choice,
    calls_per_item,
    grader_for,
    profile_of_judge,
    sampling_for,
)
from api.service.services import Services
from judge.backends import JudgeBackend
from judge.cache import CACHE_GRANULARITY, CacheKeys, ground_truth_namespace, kept_key
from judge.calls import SamplingParams
from judge.grader import Grader
from judge.prompt import build_messages, build_reply_schema
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
#: above this many submissions the cache is not checked key by key
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


def _fixed_chars(rubric: Rubric, style: AskingStyle) -> int:
    messages = build_messages(rubric, "", "", style=style)
    schema = json.dumps(build_reply_schema(rubric, style.reply_format), separators=(",", ":"))
    return sum(len(m.content) for m in messages) + len(schema)


async def _cache_hits(
    services: Services,
    f: RegradeFilter,
    rubric: Rubric,
    grader: Grader,
    latest: bool,
    style: AskingStyle,
) -> tuple[int, int]:
    """The submissions whose one call the judge cache answers, and those that ask
    nothing (a prompt over the judge's context window, not cut): each prompt is the
    one ``grader`` asks (``Grader.fit``)."""
    backend = grader.backend
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
    digest = await services.backends.digests.of(backend).digest()
    keys = []
    unsent = 0
    for candidate in await RegradeJobQueries(services.store.db).candidates(f, latest=latest):
        if not candidate.diagnosis.strip():
            continue
        fit = grader.fit(
            rubric, candidate.ground_truth, candidate.diagnosis, style=style, window=window
        )
        if fit.overflow is not None:
            unsent += 1
            continue
        key = keyer.key(fit.messages)
        if key is not None:
            space = ground_truth_namespace(candidate.scenario_id, candidate.submitted_by)
            keys.append(kept_key(key, digest=digest, namespace=space))
    found = await services.store.cache.cached_keys(keys)
    return sum(1 for key in keys if key in found), unsent


async def _calls(
    services: Services,
    f: RegradeFilter,
    rubric: Rubric,
    spec: str,
    latest: bool,
    asked: int,
) -> int:
    """Judge calls the ``asked`` gradings take. With extraction that depends on each
    ground truth (one without a ``[fault_spec]`` header, a free text or a healthy
    control's empty one, has every question asked alone): counted one by one up to
    :data:`CACHE_CHECK_LIMIT` submissions, as if every one had a header beyond."""
    settings = services.settings
    with_header = calls_per_item(settings, spec, rubric)
    if asking_choice(settings, spec, rubric).asking != "extraction" or not asked:
        return asked * with_header
    if asked > CACHE_CHECK_LIMIT:
        return asked * with_header
    candidates = await RegradeJobQueries(services.store.db).candidates(f, latest=latest)
    return sum(
        calls_per_item(settings, spec, rubric, c.ground_truth)
        for c in candidates
        if c.diagnosis.strip()
    )


@dataclass(frozen=True)
class _JudgeEstimate:
    """What one judge (a panel's member, or the job's one judge) takes for the job."""

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
    rubric: Rubric,
    backend: JudgeBackend,
    *,
    spec: str,
    latest: bool,
    totals: RegradeTotals,
) -> _JudgeEstimate:
    """The calls, cache hits and tokens of one judge ``spec`` asked through ``backend``."""
    grader = grader_for(services.settings, backend)
    params = grader.params
    style = _style(grader, rubric)
    asked = totals.submissions - totals.empty_diagnoses
    calls = await _calls(services, f, rubric, spec, latest, asked)
    per_grading = calls / asked if asked else calls_per_item(services.settings, spec, rubric)
    cacheable = params.temperature == 0
    checked = cacheable and per_grading == 1 and totals.submissions <= CACHE_CHECK_LIMIT
    hits, unsent = (
        await _cache_hits(services, f, rubric, grader, latest, style)
        if checked and calls
        else (0, 0)
    )
    needed = calls - hits - unsent
    prompt_chars = int((_fixed_chars(rubric, style) * asked + totals.text_chars) * per_grading)
    average = await services.store.cache.average_completion_tokens(backend.name, backend.model)
    per_call = average if average is not None else params.max_tokens
    return _JudgeEstimate(
        calls=needed,
        hits=hits,
        checked=checked,
        cacheable=cacheable,
        per_grading=per_grading,
        prompt_tokens=prompt_chars // CHARS_PER_TOKEN * needed // calls if calls else 0,
        completion_tokens=round(per_call * needed),
        measured=average is not None,
    )


async def estimate_regrade(
    services: Services,
    f: RegradeFilter,
    rubric: Rubric,
    backends: Sequence[JudgeBackend],
    *,
    spec: str,
    latest: bool = False,
) -> dict[str, Any]:
    """Submissions, judge calls after the cache, and prompt and completion tokens
    (``latest``: graded against each scenario's newest ground truth). ``spec``: the
    judge as given, one judge or a panel (``panel:SPEC1,SPEC2``), and ``backends``
    its judges', in the order of its members: each member's calls, cache hits and
    tokens are counted as it is asked (its asking mode and samples say how many calls
    a grading takes; its cache is checked key by key when that is one call)."""
    totals = await RegradeJobQueries(services.store.db).totals(f, latest=latest)
    judges = [
        await _judge_estimate(
            services, f, rubric, backend, spec=member, latest=latest, totals=totals
        )
        for member, backend in zip(member_specs(spec), backends, strict=True)
    ]
    needed = sum(j.calls for j in judges)
    prompt_tokens = sum(j.prompt_tokens for j in judges)
    completion_tokens = sum(j.completion_tokens for j in judges)
    measured = all(j.measured for j in judges)
    return {
        "submissions": totals.submissions,
        "empty_diagnoses": totals.empty_diagnoses,
        "judge_calls": needed,
        "cache_hits": sum(j.hits for j in judges),
        "cache_checked": all(j.checked for j in judges),
        "cache_granularity": CACHE_GRANULARITY,
        "cache_note": _cache_note(
            all(j.cacheable for j in judges), max(j.per_grading for j in judges)
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
