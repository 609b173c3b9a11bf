"""Grading one submission: prompt, judge call, strict parse, evidence check, rule.

A judge that could not answer yields an ``unscored`` result with a reason and every
call kept; it is never turned into nine "No" nor into a pass. A fault of the grader's
own once the judge was asked (in the checks of its reply, say) is raised as
:class:`GradingFailed`, which brings every call made with the error it wraps. The judge
is asked in one call for the whole rubric (here) or one call per question
(``judge.per_question``); both ask through a :class:`~judge.caller.JudgeCaller` with
the one repair loop of ``judge.asking``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from judge.asking import ask_with_repair
from judge.backends.base import JudgeBackend
from judge.cache import JudgeCache
from judge.caller import JudgeCaller
from judge.calls import JudgeCall, SamplingParams
from judge.confidence import with_logprob_confidence
from judge.context import Fit, OverflowPolicy, fit_diagnosis, ground_truth_stand_in
from judge.errors import InputError
from judge.extraction import ask_extraction
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, check_text
from judge.per_question import ask_per_question
from judge.profiles import AskingChoice, AskingMode, JudgeProfile, choose_asking
from judge.prompt import build_messages, build_repair_message, build_reply_schema
from judge.reply import parse_reply
from judge.results import empty_diagnosis_result, graded_result, unscored_result
from judge.retry import RetryPolicy
from judge.rubric import Rubric
from judge.screening import Screening, screen
from judge.style import AskAs, AskingStyle, ReplyFormat, style_of
from judge.verdict import GradingResult

__all__ = ["Grader", "GradingFailed", "ask_single", "screened"]


class GradingFailed(Exception):
    """An unexpected error (``error``) while grading, not the judge's: ``calls`` are the
    judge calls made before it (prompts sent, replies received), for the failed try to
    keep. The message names only the error's type (its own may quote a ground truth)."""

    def __init__(self, error: Exception, calls: tuple[JudgeCall, ...]) -> None:
        super().__init__(f"grading failed after {len(calls)} judge calls: {type(error).__name__}")
        self.error = error
        self.calls = calls


@dataclass
class Grader:
    """Applies rubrics with one judge backend."""

    backend: JudgeBackend
    params: SamplingParams = field(default_factory=SamplingParams)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    #: reuse completions of identical requests at temperature 0 (see ``judge.cache``)
    cache: JudgeCache | None = None
    #: the judge's context window in tokens; None: ``params.num_ctx``, else what the
    #: backend reports (``ContextWindowAware``), else no check (see ``judge.context``)
    context_tokens: int | None = None
    #: a prompt that would not fit: ``unscored`` (context_overflow) or ``truncate``
    context_overflow: OverflowPolicy = "unscored"
    #: characters the ground truth is counted as when fitting the context window (a
    #: longer one: whole multiples), so the fit depends on the diagnosis alone; None:
    #: its own length (``judge.context.ground_truth_stand_in``)
    ground_truth_budget: int | None = None
    #: ``single``, ``per_question`` or ``extraction``; None: the rubric's or the profile's
    #: (``judge.profiles.choose_asking``)
    asking: AskingMode | None = None
    #: ``full`` or ``compact`` replies (``judge.reply_format``); None: as for ``asking``
    reply_format: ReplyFormat | None = None
    #: the judge model's measured default asking (``judge.profiles``), if it has one
    profile: JudgeProfile | None = None
    #: ``positive`` or ``as_written`` for every question with a positive wording
    #: (``judge.style``); None: each question's own ``ask_as``
    ask_as: AskAs | None = None

    @property
    def caller(self) -> JudgeCaller:
        """The judge caller of this grader's backend, settings, retries and cache."""
        return JudgeCaller(
            self.backend,
            params=self.params,
            retry=self.retry,
            cache=self.cache,
            context_tokens=self.context_tokens,
        )

    def asking_choice(self, rubric: Rubric) -> AskingChoice:
        """The asking mode and reply format this grader uses for ``rubric``."""
        return choose_asking(
            rubric, asking=self.asking, reply_format=self.reply_format, profile=self.profile
        )

    def fit(
        self,
        rubric: Rubric,
        ground_truth: str,
        diagnosis: str,
        *,
        style: AskingStyle,
        window: int | None,
    ) -> Fit:
        """The prompt this grader asks ``diagnosis`` (screened) with in ``style``, fitted
        to the judge's context window of ``window`` tokens (``JudgeCaller.context_window``)
        by its overflow policy: cut, or an overflow that asks nothing. A regrade's dry run
        keys its cache look-ups with it, so they are the grader's own requests."""
        stand_in = ground_truth_stand_in(ground_truth, self.ground_truth_budget)
        return fit_diagnosis(
            lambda text: build_messages(rubric, ground_truth, text, style=style),
            diagnosis,
            window=window,
            max_tokens=self.params.max_tokens,
            policy=self.context_overflow,
            measure=(
                None
                if stand_in is None
                else lambda text: build_messages(rubric, stand_in, text, style=style)
            ),
        )

    async def grade(
        self,
        rubric: Rubric,
        ground_truth: str,
        diagnosis: str,
        *,
        screening: Screening | None = None,
    ) -> GradingResult:
        """Grade ``diagnosis`` against ``ground_truth``; raises InputError on bad input,
        and GradingFailed, with the judge calls made, on an unexpected error while the
        judge is asked or its replies checked.

        The diagnosis is screened first (credentials redacted, injection markers flagged:
        ``judge.screening``) and must fit the judge's context window with the reply.
        ``screening``: the diagnosis' screening made when it was accepted (its texts were
        checked then); it is used as it is, neither texts checked nor screened again.
        """
        if screening is None:
            check_text(ground_truth, field="ground_truth", max_bytes=self.max_text_bytes)
            check_text(diagnosis, field="diagnosis", max_bytes=self.max_text_bytes)
        if not diagnosis.strip():
            return empty_diagnosis_result(rubric, self.backend)
        choice = self.asking_choice(rubric)
        style = style_of(rubric, reply_format=choice.reply_format, ask_as=self.ask_as)
        if screening is None:
            screening = await screened(diagnosis)
        return await self._asked(rubric, ground_truth, screening, choice, style)

    async def _asked(
        self,
        rubric: Rubric,
        ground_truth: str,
        screening: Screening,
        choice: AskingChoice,
        style: AskingStyle,
    ) -> GradingResult:
        """The screened diagnosis fitted to the judge's window and graded in ``choice``;
        an unexpected error raised as GradingFailed with every call ``caller`` made."""
        caller = self.caller
        try:
            return await self._fitted(caller, rubric, ground_truth, screening, choice, style)
        except InputError:
            raise
        except Exception as exc:
            raise GradingFailed(exc, tuple(caller.made)) from exc

    async def _fitted(
        self,
        caller: JudgeCaller,
        rubric: Rubric,
        ground_truth: str,
        screening: Screening,
        choice: AskingChoice,
        style: AskingStyle,
    ) -> GradingResult:
        """``_asked`` with ``caller``, which keeps the calls made."""
        window = await caller.context_window()
        fit = self.fit(rubric, ground_truth, screening.text, style=style, window=window)
        caller.padding_chars = fit.padding_chars
        if fit.overflow is not None:
            result = unscored_result(rubric, self.backend, [], "context_overflow", fit.overflow)
        elif choice.asking == "extraction":
            result = await ask_extraction(
                caller, rubric, ground_truth, fit, injected=screening.injected, style=style
            )
        elif choice.asking == "per_question":
            result = await ask_per_question(
                caller, rubric, ground_truth, fit, injected=screening.injected, style=style
            )
        else:
            result = await ask_single(
                caller, rubric, ground_truth, fit, injected=screening.injected, style=style
            )
        return screening.apply(result, fit.cut)


#: diagnoses up to this long are screened on the event loop (about 1.5 ms per 400
#: characters); a thread hop costs more than that on a busy machine, and the regexes
#: hold the GIL either way
SCREEN_INLINE_CHARS = 4096


async def screened(diagnosis: str) -> Screening:
    """``screen(diagnosis)``; a long text off the event loop."""
    if len(diagnosis) <= SCREEN_INLINE_CHARS:
        return screen(diagnosis)
    return await asyncio.to_thread(screen, diagnosis)


async def ask_single(
    caller: JudgeCaller,
    rubric: Rubric,
    ground_truth: str,
    fit: Fit,
    *,
    injected: Sequence[tuple[int, int]] = (),
    style: AskingStyle | None = None,
) -> GradingResult:
    """Ask every question of ``rubric`` in one call (one repair if needed), then check.

    ``injected``: spans of the diagnosis screening marked as injected (not evidence);
    ``style``: the reply format and polarity ``fit.messages`` were built with."""
    style = style or style_of(rubric)
    form = style.reply_format
    asked = await ask_with_repair(
        caller,
        fit.messages,
        build_reply_schema(rubric, form),
        parse=partial(parse_reply, rubric=rubric, reply_format=form),
        repair_message=partial(build_repair_message, rubric, reply_format=form),
    )
    if asked.parsed is None or asked.reason is not None:
        reason = asked.reason or "judge_error"
        return unscored_result(rubric, caller.backend, asked.calls, reason, asked.detail)
    parsed = with_logprob_confidence(asked.parsed, asked.completion)
    return graded_result(
        rubric,
        caller.backend,
        parsed,
        asked.calls,
        ground_truth=ground_truth,
        diagnosis=fit.diagnosis,
        injected=injected,
        style=style,
    )
