"""Building the grader of a claimed grading: one judge, a sampled judge, or a panel.

A grading's judge spec is ``BACKEND:MODEL[@BASE_URL]`` for one judge or
``panel:SPEC1,SPEC2`` for a panel (``Settings.grading_judge``). With
``SRE_JUDGE_JUDGE_SAMPLES`` > 1 each judge is asked that many times
(``judge.panel.PanelGrader``); the asking mode comes from ``SRE_JUDGE_JUDGE_ASKING``,
else the rubric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from api.service.grader_factory import grader_for
from api.service.services import Services
from judge.backends.base import JudgeBackend
from judge.batch import BatchAnswers
from judge.cache import DigestKeyedCache
from judge.calls import Completion
from judge.errors import RETRY_LATER, JudgeSpecError
from judge.grader import Grader
from judge.panel import PanelGrader, PanelMember
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric
from judge.screening import Screening, screen
from judge.spec import member_specs, recorded_judge, split_spec
from judge.verdict import GradingResult
from storage import Claim
from storage.judge_cache import DbJudgeCache

__all__ = [
    "RETRY_LATER",
    "AnyGrader",
    "build_grader",
    "pending_reason",
    "unscored_result",
    "waiting_code",
]

#: codes that say more than the failure's own: a refused credential is fixed by rotating
#: the key, and the gradings wait for it
_WAITING_CODES = {"judge_auth": "judge_auth_failed"}
#: what each waiting code means, in words (``pending_reason``)
_WAITING_WORDS = {
    "judge_unavailable": "judge unreachable",
    "judge_rate_limited": "judge rate limited",
    "judge_timeout": "judge timed out",
    "judge_auth_failed": "judge refused the service's key",
}


class AnyGrader(Protocol):
    """A Grader or a PanelGrader."""

    async def grade(
        self,
        rubric: Rubric,
        ground_truth: str,
        diagnosis: str,
        *,
        screening: Screening | None = None,
    ) -> GradingResult:
        """Grade one diagnosis (``screening``: the one stored at intake, reused)."""
        ...


def _grader(
    services: Services,
    spec_text: str,
    answers: Mapping[str, Sequence[Completion]] | None = None,
    *,
    namespace: str,
    regrade: bool = False,
    reads_cache: bool = True,
) -> Grader:
    """One judge's grader with the service's settings (raises JudgeSpecError).

    Its cache entries are keyed on the judge's model digest (``judge.identity``), in
    ``namespace``; a judge reporting none has its entries reused by regrades, and by live
    gradings only with ``SRE_JUDGE_CACHE_UNVERIFIED_JUDGE``; with ``reads_cache`` False
    none is reused, its replies only kept."""
    settings = services.settings
    # each request waits for a slot of its endpoint's limit, nothing else does
    limited = services.backends.limited(spec_text)
    backend: JudgeBackend = limited
    if answers is not None:  # a batch engine's replies first, the live judge for the rest
        backend = BatchAnswers(backend, answers)
    cache = DigestKeyedCache(
        DbJudgeCache(services.store.cache),
        services.backends.digests.of(limited),
        unverified=regrade or settings.cache_unverified_judge,
        namespace=namespace,
        reads=reads_cache,
    )
    return grader_for(settings, backend, cache=cache)


def build_grader(
    services: Services,
    judge_spec: str,
    *,
    answers: Mapping[str, Sequence[Completion]] | None = None,
    namespace: str,
    regrade: bool = False,
    reads_cache: bool = True,
) -> AnyGrader:
    """The grader of a grading's judge spec; raises JudgeSpecError for a bad spec.

    The calls whose replies the judge cache keeps carry their key
    (``JudgeCall.cache_key``): storing them with the grading keeps the entries.
    ``namespace``: the grading's ``Claim.cache_namespace``: it reads and keeps entries
    of its ground truth's source only (``judge.cache.ground_truth_namespace``), and
    every grading of one submission, regrades too, shares them.
    ``answers``: a batch engine's
    replies by request hash (``judge.batch.BatchAnswers``; one judge only).
    ``regrade``: an item of a regrade job (reuses the cached replies of a judge that
    reports no model digest).
    ``reads_cache``: the claim's ``Claim.reads_cache``; False: the cache is not read, the
    replies are kept in it all the same.
    """
    specs = member_specs(judge_spec)
    samples = services.settings.judge_samples
    if len(specs) == 1 and samples == 1:
        return _grader(
            services,
            specs[0],
            answers,
            namespace=namespace,
            regrade=regrade,
            reads_cache=reads_cache,
        )
    return PanelGrader(
        [
            PanelMember(
                spec,
                _grader(
                    services, spec, namespace=namespace, regrade=regrade, reads_cache=reads_cache
                ),
            )
            for spec in specs
        ],
        samples=samples,
        sample_temperature=services.settings.judge_sample_temperature,
    )


def unscored_result(claim: Claim, reason: str, detail: str) -> GradingResult:
    """The unscored result of a claim graded by nobody (bad rubric, spec or input, the
    service's own fault), naming the judge as the grading records it (a panel as
    ``panel`` and its members), with what screening found in its diagnosis (a leaked
    credential, injection markers): their review reasons hold whatever the grading
    became, as they do for a grading a judge failed."""
    try:
        _, backend, model = recorded_judge(claim.judge_spec)
    except JudgeSpecError:  # a recorded spec that no longer parses: as it was written
        backend, model, _ = split_spec(claim.judge_spec)
    result = GradingResult(
        status="unscored",
        unscored_reason=reason,
        detail=detail,
        rubric_id=claim.rubric_id,
        rubric_version=claim.rubric_version,
        judge_backend=backend,
        judge_model=model,
        review_reasons=(ReviewReason.UNSCORED,),
    )
    screening = claim.screened()
    return (screening if screening is not None else screen(claim.diagnosis)).apply(result)


def waiting_code(failure: str | None) -> str:
    """The code a grading waits under (and ``/readyz`` shows) for a judge failure."""
    code = failure or "judge_error"
    return _WAITING_CODES.get(code, code)


def pending_reason(result: GradingResult) -> str:
    """Why a grading waits for its judge: a code, in words, and how the call failed.

    ``judge_unavailable: judge unreachable (HTTP 503)``, ``... (connection error)``:
    the HTTP status of the last failed attempt, or a connection error when none came
    back. Never what the judge's reply said (it may quote the prompt or echo a
    credential): that stays with the judge call, for adjudicators and admins.
    """
    code = waiting_code(result.unscored_reason)
    words = f"{code}: {_WAITING_WORDS.get(code, 'judge failed')}"
    if code == "judge_timeout":
        return words
    failed = [a for call in result.calls for a in call.attempts if a.outcome != "ok"]
    status = failed[-1].status_code if failed else None
    return f"{words} ({f'HTTP {status}' if status else 'connection error'})"
