"""A drop-in replacement for SREGym's ``LLMAsAJudgeOracle``, graded by sre-judge.

Switch by changing one import in SREGym::

    from sre_judge_client.sregym import LLMAsAJudgeOracle

``evaluate(solution)`` returns SREGym's dictionary (``judgment``, ``reasoning``,
``success``, ``accuracy``, ``composite_score``, ``dimensions``, ``checklist``), so the
results CSV fills as before, while the service keeps the audit trail, the review queue
and the reports. Where SREGym would turn a judge that could not answer into nine silent
"No", an unscored grading becomes SREGym's own error shape (``judgment: "Error"``).

The problem's id becomes a scenario registered on first use with the expected root
cause; that needs a token allowed to register scenarios (admin). With a submitter token
the oracle sends the root cause inline instead, which the server allows unless
``SRE_JUDGE_INLINE_GROUND_TRUTH`` says otherwise.

A scenario id means one ground truth at a time. When the id is registered with another
ground truth than ``expected``, an admin's oracle makes ``expected`` the scenario's new
version (``PUT`` with ``If-Match``); any other token's (or one built with
``update_scenario=False``) raises :class:`~sre_judge_client.GroundTruthConflict` naming
both SHA-256 hashes, and grades nothing. Every result built from a grading carries the
``scenario_version`` and ``ground_truth_sha256`` it was judged against; a grading judged
against another ground truth than ``expected`` raises the same error.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
import threading
from contextlib import nullcontext
from typing import Any

from sre_judge_client._core import (
    ground_truth_conflict,
    ground_truth_sha256,
    idempotency_key,
    resolve,
)
from sre_judge_client.client import Client, submit_and_wait
from sre_judge_client.errors import ApiError, Forbidden, GroundTruthConflict, NotFound
from sre_judge_client.models import Grading

__all__ = ["LLMAsAJudgeOracle", "oracle_result", "sregym_trace"]

_log = logging.getLogger(__name__)


def _confidence(value: float | None) -> str:
    """The service's confidence (0..1) in SREGym's words (its High/Medium/Low read 0.9/0.6/0.3)."""
    if value is None:
        return "Low"
    return "High" if value >= 0.75 else "Medium" if value >= 0.45 else "Low"


def _error(reason: str) -> dict[str, Any]:
    """SREGym's error shape, as its oracle returns it when judging raised."""
    return {
        "judgment": "Error",
        "reasoning": f"Error: {reason}",
        "success": False,
        "accuracy": 0.0,
        "checklist": [],
        "error": reason,
    }


def _reasoning(
    verdict: str, composite: float | None, grading: Grading, checklist: list[Any]
) -> str:
    scores = [(d, round(d.yes / d.total, 2) if d.total else 0.0) for d in grading.dimensions]
    figure = "no composite" if composite is None else f"composite={composite:.2f}"
    parts = [f"Verdict: {verdict} ({figure})."]
    parts.append(" | ".join(f"{d.id} {d.name}: {s:.2f}" for d, s in scores) + ".")
    if scores:
        weakest, score = min(scores, key=lambda pair: pair[1])
        parts.append(f"Weakest dimension: {weakest.name} ({score:.2f}).")
    parts.append("Checklist details: " + json.dumps(checklist, ensure_ascii=True))
    parts.append(f"Graded by sre-judge: grading {grading.id}.")
    return " ".join(parts)


#: why the service holds a pass for a human, by review reason, most telling first
_HELD_BECAUSE = {
    "injection_suspected": "the diagnosis carries injection markers",
    "evidence_unverified": "the judge quoted evidence the diagnosis does not hold",
    "judge_overruled": "a check in code overruled a yes of the judge",
    "grounding_failed": "the diagnosis is not grounded in the ground truth's facts",
    "reasoning_contradicts": "the judge's reasoning contradicts its answers",
    "judge_not_qualified": (
        "the judge is not qualified now (no calibration run qualified it, its model changed "
        "since the one that did, or the drift canary demoted it)"
    ),
}


def _held_because(grading: Grading) -> str:
    """Why a pass is held, from its review reasons (when the token sees them)."""
    for reason, why in _HELD_BECAUSE.items():
        if reason in grading.review_reasons:
            return why
    return "the service holds it for a human"


def _judged_against(grading: Grading) -> dict[str, Any]:
    """The ground truth a grading was judged against: the scenario's version (None when
    inline or not visible to the token) and the SHA-256 of its text."""
    version = grading.scenario_version
    if version is None:
        version = grading.submission.scenario_version
    return {
        "scenario_version": version,
        "ground_truth_sha256": grading.submission.ground_truth_sha256,
    }


def _verdict_only(grading: Grading) -> dict[str, Any]:
    """SREGym's dictionary as far as a verdict alone fills it."""
    success = grading.passed is True
    judgment = "True" if success else "False"
    reasoning = (
        f"Verdict: {judgment}. The server shows this token the verdict only, not the "
        f"checklist, dimensions or composite. Graded by sre-judge: grading {grading.id}."
    )
    if grading.held:
        reasoning = f"Held for human review: not a success until a human decides. {reasoning}"
    return {
        "judgment": judgment,
        "reasoning": reasoning,
        "success": success,
        "accuracy": None,
        "composite_score": None,
        "dimensions": {},
        "checklist": [],
        **_judged_against(grading),
    }


def oracle_result(grading: Grading) -> dict[str, Any]:
    """SREGym's result dictionary for a grading, with ``scenario_version`` and
    ``ground_truth_sha256``: what it was judged against.

    Graded: ``judgment`` "True"/"False" as SREGym's rule would say. Held (a pass of a
    diagnosis flagged for injection, waiting for a human): not a success, ``judgment``
    "False", the reason first in ``reasoning``. Unscored, pending or cancelled: the
    error shape. A verdict without answers (a submitter token under the server's
    ``SRE_JUDGE_SUBMITTER_VIEW=verdict``): ``judgment`` and ``success`` as above,
    ``accuracy`` and ``composite_score`` None, ``dimensions`` and ``checklist`` empty.
    A verdict without a composite (SREGym's success kept beside a checklist that leaves
    questions out): ``judgment`` and ``success`` as above, ``accuracy`` and
    ``composite_score`` None, the answers it has. A graded one without a verdict (stored
    by earlier imports): the error shape, never a fail.
    """
    if grading.status != "graded":
        reason = grading.unscored_reason or grading.pending_reason or grading.status
        error = _error(f"sre-judge grading {grading.id} is {grading.status} ({reason})")
        return {**error, **_judged_against(grading)}
    if grading.passed is None and not grading.held:
        error = _error(f"sre-judge grading {grading.id} is graded without a verdict")
        return {**error, **_judged_against(grading)}
    if grading.view == "verdict":
        return _verdict_only(grading)
    composite = None if grading.composite is None else round(grading.composite, 2)
    success = grading.passed is True
    checklist = [
        {
            "id": a.question_id,
            "answer": "Yes" if a.answer == "yes" else "No",
            "evidence": a.evidence,
            "confidence": _confidence(a.confidence),
        }
        for a in grading.answers
    ]
    reasoning = _reasoning("True" if success else "False", composite, grading, checklist)
    if grading.held:
        reasoning = (
            f"Held for human review: the checklist passed but {_held_because(grading)}, "
            f"so it is not a success until an adjudicator's verdict override. {reasoning}"
        )
    return {
        "judgment": "True" if success else "False",
        "reasoning": reasoning,
        "success": success,
        "accuracy": None if composite is None else round(composite * 100.0, 2),
        "composite_score": composite,
        "dimensions": {
            d.id: {"name": d.name, "score": round(d.yes / d.total, 2) if d.total else 0.0}
            for d in grading.dimensions
        },
        "checklist": checklist,
        **_judged_against(grading),
    }


def _finite(value: Any) -> Any:
    """``value`` (decoded JSON) with every NaN or infinity as its text (``"nan"``,
    ``"inf"``, ``"-inf"``): JSON has no number for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _step(item: Any) -> dict[str, Any]:
    """One step of SREGym's trace as a JSON object: a dict as it is, a pydantic model
    or dataclass by its fields, anything else as its text under ``content``."""
    if isinstance(item, dict):
        fields = item
    elif callable(getattr(item, "model_dump", None)):
        fields = item.model_dump()
    elif dataclasses.is_dataclass(item) and not isinstance(item, type):
        fields = dataclasses.asdict(item)
    else:
        return {"content": str(item)}
    # what JSON cannot hold (datetimes, enums, objects, NaN and infinities) as its text
    return dict(_finite(json.loads(json.dumps(fields, default=str))))


def sregym_trace(trace: Any) -> str | list[dict[str, Any]] | None:
    """SREGym's ``trace`` as the service takes it: free text as it is, a sequence of
    steps (dicts, pydantic models, dataclasses, messages) as a list of JSON objects
    (what JSON cannot hold, a NaN metric included, as its text), anything else as its
    text; None or an empty trace as none."""
    if trace is None:
        return None
    if isinstance(trace, str):
        return trace or None
    if isinstance(trace, list | tuple):
        return [_step(item) for item in trace] or None
    return str(trace)


def _problem_id(problem: Any) -> str | None:
    if isinstance(problem, str):
        return problem or None
    for name in ("problem_id", "id", "name"):
        value = getattr(problem, name, None)
        if isinstance(value, str) and value:
            return value
    return None


#: the attempts evaluated so far in this process, by problem, expected root cause and
#: run: SREGym builds a new problem, and so a new oracle, for every attempt
_ATTEMPTS: collections.Counter[tuple[str, str, str | None]] = collections.Counter()
_ATTEMPTS_LOCK = threading.Lock()


def _next_attempt(problem: str, expected_sha256: str, run_id: str | None) -> int:
    """The next attempt's number (1, 2, ...) at this problem in this process."""
    with _ATTEMPTS_LOCK:
        _ATTEMPTS[problem, expected_sha256, run_id] += 1
        return _ATTEMPTS[problem, expected_sha256, run_id]


def _problem_key(problem: Any, problem_id: str | None) -> str:
    """What names the problem for counting attempts: its id, else its class (SREGym's
    ``Problem`` base has no id; each problem is a class of its own)."""
    if problem_id:
        return problem_id
    kind = type(problem)
    return f"{kind.__module__}.{kind.__qualname__}"


class LLMAsAJudgeOracle:
    """SREGym's oracle, constructed the same way, graded by an sre-judge server.

    ``provider``, ``model_name``, ``url``, ``api_key``, ``temperature`` and
    ``max_tokens`` are accepted for compatibility and ignored: the server chooses its
    judge. Keywords beyond SREGym's: ``client`` (else each ``evaluate`` opens one from
    ``SRE_JUDGE_URL`` and ``SRE_JUDGE_TOKEN`` and closes it: SREGym builds an oracle per
    attempt and never closes it, so none keeps a connection open), ``problem_id`` (else
    the problem's ``problem_id``/``id``), ``agent``, ``model``, ``run_id`` (makes
    resubmissions idempotent), ``wait`` (seconds for each grading in all: a server that
    answers ``202`` early is polled for the rest), and
    ``update_scenario`` (False: a registered scenario whose ground truth differs from
    ``expected`` is refused even with an admin token, never given a new version).
    """

    def __init__(
        self,
        problem: Any,
        expected: str,
        provider: str | None = None,
        model_name: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 4096,
        *,
        client: Client | None = None,
        problem_id: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        run_id: str | None = None,
        wait: float = 300.0,
        update_scenario: bool = True,
    ) -> None:
        self.problem = problem
        self.expected = expected if expected else ""
        #: SHA-256 of ``expected``: every grading must have been judged against it
        self.expected_sha256 = ground_truth_sha256(self.expected)
        #: the client given, else None (each ``evaluate`` opens its own and closes it)
        self.client = client
        if client is None:
            resolve(None, None)  # a bad SRE_JUDGE_URL or token is refused here, not later
        self.problem_id = problem_id or _problem_id(problem)
        self.agent, self.model, self.run_id, self.wait = agent, model, run_id, wait
        self.update_scenario = update_scenario
        #: the attempt number of this oracle's last ``evaluate`` (0: none yet)
        self.attempts = 0
        self._source: dict[str, str] | None = None  # None: not settled yet

    def _ground_truth_source(self, client: Client) -> dict[str, str]:
        """Where the ground truth comes from: the registered scenario, or inline.

        Settled once: registered (admin), or found with the same ground truth (a token
        that may read scenarios), else inline. A scenario registered with another ground
        truth gets ``expected`` as its new version, or raises GroundTruthConflict.
        """
        if self._source is None:
            self._source = self._settle_source(client)
        return self._source

    def _settle_source(self, client: Client) -> dict[str, str]:
        if self.problem_id is None:
            return {"ground_truth": self.expected}
        scenario = {"scenario_id": self.problem_id}
        try:
            client.register_scenario(self.problem_id, self.expected, exist_ok=True)
            return scenario
        except GroundTruthConflict as conflict:
            self._new_version(client, conflict)
            return scenario
        except Forbidden:
            pass
        try:
            stored = client.scenarios.get(self.problem_id)
        except (Forbidden, NotFound):
            _log.info("token may not register scenarios: sending the root cause inline")
            return {"ground_truth": self.expected}
        found = ground_truth_conflict(
            self.problem_id, stored.ground_truth or "", stored.version, self.expected
        )
        if found is not None:
            self._new_version(client, found, revision=stored.revision)
        return scenario

    def _new_version(
        self, client: Client, conflict: GroundTruthConflict, *, revision: int | None = None
    ) -> None:
        """Make ``expected`` the scenario's new version, or refuse (raise) naming both hashes.

        ``revision`` is the scenario's as read (its ETag: a title or tag edited in place
        moves it past the version); without it the update reads the scenario first."""
        if not self.update_scenario:
            raise GroundTruthConflict(
                conflict.scenario_id,
                stored_sha256=conflict.stored_sha256,
                sent_sha256=conflict.sent_sha256,
                version=conflict.version,
                detail=f"{conflict.detail}; update_scenario=False, so nothing was graded",
            )
        try:
            done = client.scenarios.update(
                conflict.scenario_id,
                ground_truth=self.expected,
                revision=revision,
                note="SREGym oracle: expected root cause changed",
            )
        except Forbidden:
            raise GroundTruthConflict(
                conflict.scenario_id,
                stored_sha256=conflict.stored_sha256,
                sent_sha256=conflict.sent_sha256,
                version=conflict.version,
                detail=f"{conflict.detail}; this token may not give the scenario a new "
                "version (an admin's may), so nothing was graded",
            ) from None
        _log.warning(
            "scenario %r: ground truth sha256 %s replaced by %s as version %s",
            conflict.scenario_id,
            conflict.stored_sha256,
            conflict.sent_sha256,
            done.version,
        )

    def _check_judged_against(self, grading: Grading) -> None:
        """Raise GroundTruthConflict unless ``grading`` was judged against ``expected``."""
        against = _judged_against(grading)
        if against["ground_truth_sha256"] == self.expected_sha256:
            return
        self._source = None  # settle again on the next call
        version = against["scenario_version"]
        at = f" (version {version})" if version is not None else ""
        raise GroundTruthConflict(
            self.problem_id or "",
            stored_sha256=against["ground_truth_sha256"],
            sent_sha256=self.expected_sha256,
            version=version,
            detail=f"grading {grading.id} of {self.problem_id!r} was judged against ground "
            f"truth sha256 {against['ground_truth_sha256'] or 'unknown'}{at}, not the one "
            f"sent (sha256 {self.expected_sha256})",
        )

    def evaluate(self, solution: Any, trace: Any = None, duration: Any = None) -> dict[str, Any]:
        """Grade ``solution`` (the agent's diagnosis) and return SREGym's result dict.

        ``trace`` (the agent's tool calls and observations, as SREGym passes it) is sent
        with the diagnosis (:func:`sregym_trace`), so an adjudicator can check that the
        evidence the diagnosis cites was seen by the agent; ``duration`` is accepted as
        SREGym's is. Each call is the next attempt (1, 2, ...) at this problem in this
        process, whichever oracle makes it (SREGym builds one per attempt), carried with
        the agent and model. Raises
        :class:`~sre_judge_client.GroundTruthConflict` rather than grade against another
        ground truth than ``expected``; other failures are SREGym's error shape.
        """
        self.attempts = _next_attempt(
            _problem_key(self.problem, self.problem_id), self.expected_sha256, self.run_id
        )
        text = solution if isinstance(solution, str) else str(solution)
        try:
            with nullcontext(self.client) if self.client is not None else Client() as client:
                grading = self._submit(client, text, trace)
        except GroundTruthConflict:
            raise
        except (ApiError, OSError, TimeoutError) as error:
            return _error(str(error))
        except Exception as error:  # httpx errors and the like: SREGym's oracle catches all
            return _error(f"{type(error).__name__}: {error}")
        self._check_judged_against(grading)
        return oracle_result(grading)

    def _submit(self, client: Client, text: str, trace: Any) -> Grading:
        """Submit ``text`` (with ``trace``) as this oracle's current attempt through
        ``client`` and wait for its grading."""
        source = self._ground_truth_source(client)
        key = idempotency_key(
            # the problem, even when its ground truth goes inline: two problems with
            # one expected text (SREGym's healthy-cluster controls: "") are two
            scenario_id=self.problem_id,
            ground_truth=self.expected,  # another ground truth is another submission
            run_id=self.run_id,
            attempt=self.attempts,
            agent=self.agent,  # another agent's or model's attempt is another
            model=self.model,
        )
        return submit_and_wait(
            client,
            text,
            wait=self.wait,
            agent=self.agent,
            model=self.model,
            run_id=self.run_id,
            attempt=self.attempts,
            metadata={"source": "sregym", "problem_id": self.problem_id},
            idempotency_key=key,
            trace=sregym_trace(trace),
            **source,
        )
