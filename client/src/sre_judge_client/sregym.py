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
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sre_judge_client.client import Client
from sre_judge_client.errors import ApiError, Forbidden
from sre_judge_client.models import Grading

__all__ = ["LLMAsAJudgeOracle", "oracle_result"]

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


def _reasoning(verdict: str, composite: float, grading: Grading, checklist: list[Any]) -> str:
    scores = [(d, round(d.yes / d.total, 2) if d.total else 0.0) for d in grading.dimensions]
    parts = [f"Verdict: {verdict} (composite={composite:.2f})."]
    parts.append(" | ".join(f"{d.id} {d.name}: {s:.2f}" for d, s in scores) + ".")
    if scores:
        weakest, score = min(scores, key=lambda pair: pair[1])
        parts.append(f"Weakest dimension: {weakest.name} ({score:.2f}).")
    parts.append("Checklist details: " + json.dumps(checklist, ensure_ascii=True))
    parts.append(f"Graded by sre-judge: grading {grading.id}.")
    return " ".join(parts)


def oracle_result(grading: Grading) -> dict[str, Any]:
    """SREGym's result dictionary for a grading.

    Graded: ``judgment`` "True"/"False" as SREGym's rule would say. Held (a pass of a
    diagnosis flagged for injection, waiting for a human): not a success, ``judgment``
    "False", the reason first in ``reasoning``. Unscored, pending or cancelled: the
    error shape.
    """
    if grading.status != "graded" or grading.composite is None:
        reason = grading.unscored_reason or grading.pending_reason or grading.status
        return _error(f"sre-judge grading {grading.id} is {grading.status} ({reason})")
    composite = round(grading.composite, 2)
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
            "Held for human review: the checklist passed but the diagnosis carries "
            "injection markers, so it is not a success until an adjudicator's verdict "
            f"override. {reasoning}"
        )
    return {
        "judgment": "True" if success else "False",
        "reasoning": reasoning,
        "success": success,
        "accuracy": round(composite * 100.0, 2),
        "composite_score": composite,
        "dimensions": {
            d.id: {"name": d.name, "score": round(d.yes / d.total, 2) if d.total else 0.0}
            for d in grading.dimensions
        },
        "checklist": checklist,
    }


def _problem_id(problem: Any) -> str | None:
    if isinstance(problem, str):
        return problem or None
    for name in ("problem_id", "id", "name"):
        value = getattr(problem, name, None)
        if isinstance(value, str) and value:
            return value
    return None


class LLMAsAJudgeOracle:
    """SREGym's oracle, constructed the same way, graded by an sre-judge server.

    ``provider``, ``model_name``, ``url``, ``api_key``, ``temperature`` and
    ``max_tokens`` are accepted for compatibility and ignored: the server chooses its
    judge. Keywords beyond SREGym's: ``client`` (else one from ``SRE_JUDGE_URL`` and
    ``SRE_JUDGE_TOKEN``), ``problem_id`` (else the problem's ``problem_id``/``id``),
    ``agent``, ``model``, ``run_id`` (makes resubmissions idempotent), ``wait``.
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
    ) -> None:
        self.problem = problem
        self.expected = expected if expected else ""
        self.client = client or Client()
        self.problem_id = problem_id or _problem_id(problem)
        self.agent, self.model, self.run_id, self.wait = agent, model, run_id, wait
        self.attempts = 0
        self._registered: bool | None = None  # None: not tried; False: send inline

    def _scenario(self) -> dict[str, str]:
        """Where the ground truth comes from: the registered scenario, or inline."""
        if self.problem_id is not None and self._registered is None:
            try:
                self.client.register_scenario(self.problem_id, self.expected, exist_ok=True)
                self._registered = True
            except Forbidden:
                _log.info("token may not register scenarios: sending the root cause inline")
                self._registered = False
        if self._registered:
            return {"scenario_id": str(self.problem_id)}
        return {"ground_truth": self.expected}

    def evaluate(self, solution: Any, trace: Any = None, duration: Any = None) -> dict[str, Any]:
        """Grade ``solution`` (the agent's diagnosis) and return SREGym's result dict.

        ``trace`` and ``duration`` are accepted as SREGym's are; each call is the next
        attempt (1, 2, ...), carried as metadata with the agent and model.
        """
        self.attempts += 1
        text = solution if isinstance(solution, str) else str(solution)
        try:
            grading = self.client.submit(
                text,
                agent=self.agent,
                model=self.model,
                run_id=self.run_id,
                attempt=self.attempts,
                metadata={"source": "sregym", "problem_id": self.problem_id},
                wait=min(self.wait, 300.0),
                **self._scenario(),
            )
            if not grading.done and self.wait > 300.0:
                grading = self.client.wait(grading.id, timeout=self.wait - 300.0)
        except (ApiError, OSError, TimeoutError) as error:
            return _error(str(error))
        except Exception as error:  # httpx errors and the like: SREGym's oracle catches all
            return _error(f"{type(error).__name__}: {error}")
        return oracle_result(grading)
