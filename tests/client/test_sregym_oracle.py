"""The SREGym drop-in returns SREGym's result dictionary, graded by a real server.

The contract is SREGym's ``LLMAsAJudgeOracle.evaluate``: ``judgment`` ("True"/"False"),
``reasoning``, ``success``, ``accuracy`` (composite x 100, 2 decimals),
``composite_score``, ``dimensions`` ``{id: {name, score}}`` and ``checklist`` of
``{id, answer: Yes|No, evidence, confidence: High|Medium|Low}``; on error
``judgment: "Error"``, ``success: False``, ``accuracy: 0.0``, ``checklist: []`` and
``error``. Every result built from a grading also carries ``scenario_version`` and
``ground_truth_sha256``: the ground truth it was judged against.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import gc
import hashlib
import json
import uuid
import warnings
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx
from sre_judge_client import Client, Grading, GroundTruthConflict, idempotency_key
from sre_judge_client.sregym import LLMAsAJudgeOracle, oracle_result, sregym_trace

from tests.client.conftest import Served

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
KEYS = {
    "judgment",
    "reasoning",
    "success",
    "accuracy",
    "composite_score",
    "dimensions",
    "checklist",
    "scenario_version",
    "ground_truth_sha256",
}
ERROR_KEYS = {"judgment", "reasoning", "success", "accuracy", "checklist", "error"}
JUDGED_AGAINST = {"scenario_version", "ground_truth_sha256"}
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


class Problem:
    """What SREGym hands its oracle: a problem object with an id."""

    def __init__(self, problem_id: str) -> None:
        self.problem_id = problem_id


def _grading(**changes: Any) -> Grading:
    answers = [
        {"question_id": q, "dimension_id": q[:2], "answer": "yes" if q != "D3-Q2" else "no",
         "judge_answer": "yes", "reasoning": "", "evidence": "USER_PORT=9999",
         "evidence_verified": True, "confidence": c, "overridden": False}
        for q, c in zip(IDS, [0.9, 0.6, 0.3, None, 0.9, 0.9, 0.9, 0.9, 0.9], strict=True)
    ]  # fmt: skip
    names = {"D1": "Fault localization", "D2": "Fault characterization", "D3": "Failure scope"}
    body = {
        "id": "g1", "submission_id": "s1", "status": "graded", "unscored_reason": None,
        "detail": None, "rubric": {"id": "sregym-rca"}, "judge": {"backend": "scripted"},
        "answers": answers,
        "dimensions": [{"id": d, "name": n, "yes": 3 if d != "D3" else 2, "total": 3}
                       for d, n in names.items()],
        "yes_count": 8, "composite": 0.8866, "passed": True, "judge_passed": True,
        "decisive": True, "needs_review": False, "review_reasons": [], "revision": 1,
        "created_at": "2026-12-01T00:00:00Z", "graded_at": None,
        "submission": {"id": "s1", "agent": None, "model": None, "scenario_id": "sc",
                       "run_id": None, "attempt": 1, "metadata": {}, "diagnosis": "d",
                       "ground_truth": None, "created_at": "2026-12-01T00:00:00Z"},
        **changes,
    }  # fmt: skip
    return Grading.model_validate(body)


def test_a_pass_fills_sregyms_dictionary_as_its_oracle_does() -> None:
    result = oracle_result(_grading())
    assert set(result) == KEYS
    assert result["judgment"] == "True" and result["success"] is True
    assert result["composite_score"] == 0.89 and result["accuracy"] == 89.0
    assert result["dimensions"]["D3"] == {"name": "Failure scope", "score": 0.67}
    assert [c["id"] for c in result["checklist"]] == IDS
    assert result["checklist"][7]["answer"] == "No"
    assert [c["confidence"] for c in result["checklist"][:4]] == ["High", "Medium", "Low", "Low"]
    assert result["reasoning"].startswith("Verdict: True (composite=0.89).")


def test_a_fail_is_false_and_an_override_wins() -> None:
    result = oracle_result(_grading(passed=False, verdict_override="fail"))
    assert result["judgment"] == "False" and result["success"] is False
    assert result["accuracy"] == 89.0  # the judge's score stays what it was


@pytest.mark.parametrize(
    ("reasons", "why"),
    [
        (["judge_not_qualified"], "the judge is not qualified now"),
        (["injection_suspected", "judge_not_qualified"], "carries injection markers"),
        (["evidence_unverified"], "quoted evidence the diagnosis does not hold"),
        ([], "the service holds it for a human"),  # reasons withheld from this token
    ],
)
def test_a_held_pass_is_not_a_success_and_says_why(reasons: list[str], why: str) -> None:
    """The reason is the grading's own: an uncalibrated judge's passes are held too, and
    they are not blamed on injection."""
    result = oracle_result(_grading(passed=None, held=True, review_reasons=reasons))
    assert set(result) == KEYS
    assert result["success"] is False and result["judgment"] == "False"
    assert result["reasoning"].startswith("Held for human review")
    assert why in result["reasoning"].split(".")[0]
    if "injection_suspected" not in reasons:
        assert "injection" not in result["reasoning"]


@respx.mock
def test_inline_attempts_of_two_problems_with_one_root_cause_have_two_keys() -> None:
    """SREGym's healthy-cluster controls all expect "": with a token that may not
    register scenarios the root cause goes inline, and two problems' attempt 1 in one
    run shared an Idempotency-Key (the server's 409 made the second an Error)."""
    url = "http://judge.test"
    respx.post(f"{url}/v1/scenarios").mock(
        return_value=httpx.Response(403, json={"title": "Forbidden", "detail": "admin only"})
    )
    respx.get(url__regex=rf"{url}/v1/scenarios/.*").mock(
        return_value=httpx.Response(403, json={"title": "Forbidden", "detail": "no"})
    )
    submission = {**_grading().submission.model_dump(mode="json"), "ground_truth_sha256": _sha("")}
    body = _grading(submission=submission).model_dump(mode="json")
    route = respx.post(f"{url}/v1/submissions").mock(return_value=httpx.Response(201, json=body))
    client = Client(url, "t0ken", max_retry_wait=1)
    for problem in ("healthy_a", "healthy_b"):
        oracle = LLMAsAJudgeOracle(Problem(problem), "", client=client, run_id="run-1")
        assert oracle.evaluate(f"nothing is wrong in {problem}")["judgment"] == "True"
    sent = [json.loads(call.request.content) for call in route.calls]
    assert [b["metadata"]["problem_id"] for b in sent] == ["healthy_a", "healthy_b"]
    assert all("scenario_id" not in b and b["ground_truth"] == "" for b in sent)
    keys = {call.request.headers["Idempotency-Key"] for call in route.calls}
    assert len(keys) == 2


@pytest.mark.parametrize("status", ["unscored", "pending", "cancelled"])
def test_no_score_is_sregyms_error_shape_never_nine_silent_no(status: str) -> None:
    reason = "unparseable_reply" if status == "unscored" else None
    result = oracle_result(_grading(status=status, unscored_reason=reason, composite=None))
    assert set(result) == ERROR_KEYS | JUDGED_AGAINST
    assert result["judgment"] == "Error" and result["success"] is False
    assert result["accuracy"] == 0.0 and result["checklist"] == []
    assert status in result["reasoning"] and result["reasoning"].startswith("Error: ")


def test_a_graded_verdict_without_a_composite_keeps_its_verdict() -> None:
    """A graded pass with no composite (SREGym's success kept beside a checklist that
    leaves questions out) is SREGym's dictionary with that verdict, ``accuracy`` and
    ``composite_score`` None and the answers it has, never the error shape."""
    partial = _grading().model_dump(mode="json")
    partial.update(answers=partial["answers"][:6], composite=None, yes_count=6, decisive=None)
    result = oracle_result(Grading.model_validate(partial))
    assert set(result) == KEYS, result
    assert (result["judgment"], result["success"]) == ("True", True), result
    assert (result["accuracy"], result["composite_score"]) == (None, None)
    assert [c["id"] for c in result["checklist"]] == IDS[:6]
    assert result["reasoning"].startswith("Verdict: True (no composite).")


@pytest.mark.parametrize("view", [None, "verdict"])
def test_a_graded_grading_without_a_verdict_is_the_error_shape_never_a_fail(
    view: str | None,
) -> None:
    """A graded grading without a verdict (as earlier imports stored a partial checklist
    with no success) is SREGym's error shape saying so, never a judgment of "False",
    also as a token shown verdicts only reads it."""
    changes: dict[str, Any] = {"passed": None, "judge_passed": None, "composite": None}
    if view is not None:
        changes.update(view=view, held=False)
    result = oracle_result(_grading(**changes))
    assert set(result) == ERROR_KEYS | JUDGED_AGAINST
    assert result["judgment"] == "Error" and result["success"] is False
    assert result["error"] == "sre-judge grading g1 is graded without a verdict"


def test_an_unreachable_server_is_an_error_result() -> None:
    oracle = LLMAsAJudgeOracle(
        Problem("p"), TRUTH, client=Client("http://127.0.0.1:9", "t", retries=1)
    )
    result = oracle.evaluate(DIAGNOSIS)
    assert result["judgment"] == "Error" and result["success"] is False


@respx.mock
def test_a_202_before_the_wait_is_over_is_waited_out() -> None:
    """A server draining for a restart answers 202 at once and grades a moment later:
    the oracle spends the rest of its ``wait`` polling, so SREGym records the verdict, not
    an error for an attempt that was graded."""
    url = "http://judge.test"
    submission = {
        **_grading().submission.model_dump(mode="json"),
        "ground_truth_sha256": _sha(TRUTH),
    }
    graded = _grading(submission=submission).model_dump(mode="json")
    pending = {**graded, "status": "pending", "composite": None, "passed": None}
    respx.post(f"{url}/v1/submissions").mock(return_value=httpx.Response(202, json=pending))
    polled = respx.get(f"{url}/v1/gradings/g1").mock(
        side_effect=[httpx.Response(200, json=pending)] + [httpx.Response(200, json=graded)] * 50
    )
    oracle = LLMAsAJudgeOracle(object(), TRUTH, client=Client(url, "t0ken"), wait=30)
    result = oracle.evaluate(DIAGNOSIS)
    assert result["judgment"] == "True", result
    assert polled.call_count == 2


@pytest.mark.slow
def test_the_oracle_registers_the_problem_and_grades_on_the_server(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    problem_id = f"hotel_user_port-{uuid.uuid4().hex[:6]}"
    admin = Client(served.url, served.admin)
    oracle = LLMAsAJudgeOracle(
        Problem(problem_id), TRUTH, client=admin, agent="stratus", model="gpt-x"
    )
    first, second = oracle.evaluate(DIAGNOSIS), oracle.evaluate(DIAGNOSIS, trace="t", duration=3)
    assert set(first) == KEYS and first["judgment"] == "True" and first["success"] is True
    assert first["accuracy"] == 100.0 and len(first["checklist"]) == 9
    assert {c["answer"] for c in first["checklist"]} == {"Yes"}
    assert set(first["dimensions"]) == {"D1", "D2", "D3"}
    stored = list(admin.list(scenario_id=problem_id))
    assert sorted(g.submission.attempt or 0 for g in stored) == [1, 2]
    assert {(g.submission.agent, g.submission.model) for g in stored} == {("stratus", "gpt-x")}
    assert second["success"] is True
    traces = {g.submission.attempt: g.submission.trace for g in stored}
    assert traces == {1: None, 2: "t"}  # the trace SREGym passed, stored with its attempt


@pytest.mark.slow
def test_a_submitter_token_sends_the_root_cause_inline(serve: Callable[[str], Served]) -> None:
    served = serve("pass")
    oracle = LLMAsAJudgeOracle(
        Problem("p-inline"), TRUTH, client=Client(served.url, served.submitter)
    )
    assert oracle.evaluate(DIAGNOSIS)["success"] is True


@pytest.mark.slow
def test_an_unscored_grading_becomes_error(serve: Callable[[str], Served]) -> None:
    served = serve("garbage")
    oracle = LLMAsAJudgeOracle(Problem("p-garbage"), TRUTH, client=Client(served.url, served.admin))
    result = oracle.evaluate(DIAGNOSIS)
    assert set(result) == ERROR_KEYS | JUDGED_AGAINST and result["judgment"] == "Error"
    assert "unscored" in result["error"]


# Two root causes for one problem id: the user-service's port (A), then the geo service's
# (B). The code's grounding check vetoes a diagnosis that does not name the ground
# truth's component, so even a yes-saying judge passes the geo diagnosis only against B.
TRUTH_B = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT=7777"
DIAGNOSIS_B = "The geo deployment in hotel sets GEO_PORT=7777, so nearby search fails."


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.slow
def test_an_admin_oracle_with_a_changed_root_cause_grades_against_the_new_version(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    problem_id = f"hotel/changed-{uuid.uuid4().hex[:6]}"
    admin = Client(served.url, served.admin)
    first = LLMAsAJudgeOracle(Problem(problem_id), TRUTH, client=admin).evaluate(DIAGNOSIS)
    assert first["success"] is True
    assert (first["scenario_version"], first["ground_truth_sha256"]) == (1, _sha(TRUTH))

    second = LLMAsAJudgeOracle(Problem(problem_id), TRUTH_B, client=admin).evaluate(DIAGNOSIS_B)
    assert (second["scenario_version"], second["ground_truth_sha256"]) == (2, _sha(TRUTH_B))
    assert second["success"] is True, second["reasoning"]  # against A its component is unnamed
    assert admin.scenarios.get(problem_id).ground_truth == TRUTH_B
    assert [v.ground_truth for v in admin.scenarios.versions(problem_id).items] == [TRUTH, TRUTH_B]
    graded = {
        g.submission.diagnosis: g.submission.ground_truth
        for g in admin.list(scenario_id=problem_id)
    }
    assert graded == {DIAGNOSIS: TRUTH, DIAGNOSIS_B: TRUTH_B}


@pytest.mark.slow
def test_an_admin_oracle_gives_a_new_version_to_a_scenario_edited_in_place(
    serve: Callable[[str], Served],
) -> None:
    """A scenario whose tags were edited in place has a revision past its version: the
    oracle's new version names the revision, and the evaluation is graded against it."""
    served = serve("pass")
    problem_id = f"hotel/edited-{uuid.uuid4().hex[:6]}"
    admin = Client(served.url, served.admin)
    admin.register_scenario(problem_id, TRUTH)
    edited = admin.scenarios.update(problem_id, tags=["sregym", "hotel"])
    assert (edited.version, edited.revision) == (1, 2)

    result = LLMAsAJudgeOracle(Problem(problem_id), TRUTH_B, client=admin).evaluate(DIAGNOSIS_B)
    assert result["judgment"] != "Error", result.get("error")
    assert (result["scenario_version"], result["ground_truth_sha256"]) == (2, _sha(TRUTH_B))
    assert admin.scenarios.get(problem_id).ground_truth == TRUTH_B


@pytest.mark.slow
@pytest.mark.parametrize("who", ["adjudicator token", "admin token, update_scenario=False"])
def test_an_oracle_that_may_not_make_a_new_version_refuses_naming_both_hashes(
    serve: Callable[[str], Served], who: str
) -> None:
    served = serve("pass")
    problem_id = f"hotel/refused-{uuid.uuid4().hex[:6]}"
    admin = Client(served.url, served.admin)
    admin.register_scenario(problem_id, TRUTH)
    if who == "adjudicator token":
        oracle = LLMAsAJudgeOracle(
            Problem(problem_id), TRUTH_B, client=Client(served.url, served.adjudicator)
        )
    else:
        oracle = LLMAsAJudgeOracle(
            Problem(problem_id), TRUTH_B, client=admin, update_scenario=False
        )
    with pytest.raises(GroundTruthConflict) as refused:
        oracle.evaluate(DIAGNOSIS_B)
    assert _sha(TRUTH) in str(refused.value) and _sha(TRUTH_B) in str(refused.value)
    assert (refused.value.stored_sha256, refused.value.sent_sha256) == (_sha(TRUTH), _sha(TRUTH_B))
    assert list(admin.list(scenario_id=problem_id)) == []  # nothing graded against A
    assert admin.scenarios.get(problem_id).version == 1


@pytest.mark.slow
def test_a_token_that_may_read_scenarios_grades_a_matching_one_by_id(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    problem_id = f"hotel/same-{uuid.uuid4().hex[:6]}"
    Client(served.url, served.admin).register_scenario(problem_id, TRUTH)
    oracle = LLMAsAJudgeOracle(
        Problem(problem_id), TRUTH, client=Client(served.url, served.adjudicator)
    )
    result = oracle.evaluate(DIAGNOSIS)
    assert result["success"] is True
    assert (result["scenario_version"], result["ground_truth_sha256"]) == (1, _sha(TRUTH))


@pytest.mark.slow
def test_a_grading_judged_against_another_ground_truth_raises(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    problem_id = f"hotel/raced-{uuid.uuid4().hex[:6]}"
    admin = Client(served.url, served.admin)
    oracle = LLMAsAJudgeOracle(Problem(problem_id), TRUTH, client=admin, run_id="r1")
    assert oracle.evaluate(DIAGNOSIS)["ground_truth_sha256"] == _sha(TRUTH)
    # someone else gives the scenario a new ground truth while the oracle runs
    admin.scenarios.update(problem_id, ground_truth=TRUTH_B, version=1, note="changed")
    with pytest.raises(GroundTruthConflict) as mismatch:
        oracle.evaluate(DIAGNOSIS)
    assert _sha(TRUTH) in str(mismatch.value) and _sha(TRUTH_B) in str(mismatch.value)
    assert mismatch.value.version == 2
    # the next call settles again: the oracle's root cause becomes version 3
    again = oracle.evaluate(DIAGNOSIS)
    assert (again["scenario_version"], again["ground_truth_sha256"]) == (3, _sha(TRUTH))


@pytest.mark.slow
def test_an_inline_result_names_the_hash_it_was_judged_against(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    oracle = LLMAsAJudgeOracle(
        Problem(f"p-inline-{uuid.uuid4().hex[:6]}"),
        TRUTH,
        client=Client(served.url, served.submitter),
    )
    result = oracle.evaluate(DIAGNOSIS)
    assert (result["scenario_version"], result["ground_truth_sha256"]) == (None, _sha(TRUTH))


class _Recording:
    """A client that records what the oracle submits and answers with a pass."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def submit(self, diagnosis: str, **fields: Any) -> Grading:
        self.sent.append({"diagnosis": diagnosis, **fields})
        submission = {
            "id": "s1", "agent": None, "model": None, "scenario_id": None, "run_id": None,
            "attempt": 1, "metadata": {}, "diagnosis": diagnosis, "ground_truth": TRUTH,
            "ground_truth_source": "inline", "ground_truth_sha256": _sha(TRUTH),
            "created_at": "2026-12-01T00:00:00Z",
        }  # fmt: skip
        return _grading(submission=submission)


@dataclasses.dataclass
class _Step:
    tool: str
    output: str
    at: datetime.datetime


def test_the_oracle_passes_the_trace_it_is_given() -> None:
    """SREGym's trace goes to the server with the diagnosis: steps as JSON objects
    (dicts, dataclasses, anything else as its text), free text as it is, none as none."""
    client = _Recording()
    oracle = LLMAsAJudgeOracle(None, TRUTH, client=client)  # type: ignore[arg-type]
    when = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    steps = [{"tool": "kubectl", "input": "get pods", "output": "0/1"}, _Step("logs", "x", when)]
    assert oracle.evaluate(DIAGNOSIS, [*steps, "thinking..."], 3.0)["success"] is True
    oracle.evaluate(DIAGNOSIS, trace="$ kubectl get pods")
    oracle.evaluate(DIAGNOSIS)
    sent = [call["trace"] for call in client.sent]
    assert sent[0] == [
        steps[0],
        {"tool": "logs", "output": "x", "at": "2026-01-02 00:00:00+00:00"},
        {"content": "thinking..."},
    ]
    assert sent[1:] == ["$ kubectl get pods", None]
    assert sregym_trace([]) is None and sregym_trace(("a",)) == [{"content": "a"}]


@respx.mock
def test_a_trace_step_holding_a_nan_metric_is_still_graded() -> None:
    """An SRE agent's observation of a metric is often NaN (an empty PromQL ratio, 0/0)
    or infinite: JSON has no number for them, so they go as their text and the diagnosis
    is graded, never SREGym's Error shape."""
    url = "http://judge.test"
    submission = {
        **_grading().submission.model_dump(mode="json"),
        "ground_truth_sha256": _sha(TRUTH),
    }
    body = _grading(submission=submission).model_dump(mode="json")
    route = respx.post(f"{url}/v1/submissions").mock(return_value=httpx.Response(201, json=body))
    oracle = LLMAsAJudgeOracle(None, TRUTH, client=Client(url, "t0ken"), run_id="nan", wait=0)
    trace = [
        {"tool": "prometheus", "query": "rate(errors[5m]) / rate(requests[5m])",
         "value": float("nan")},
        {"tool": "prometheus", "query": "max(latency)", "value": float("inf"),
         "series": [1.5, float("-inf")]},
    ]  # fmt: skip
    result = oracle.evaluate(DIAGNOSIS, trace)
    assert result["judgment"] != "Error", result.get("error")
    assert route.call_count == 1
    sent = json.loads(route.calls[0].request.content)["trace"]
    assert [step["value"] for step in sent] == ["nan", "inf"]
    assert sent[1]["series"] == [1.5, "-inf"]


class _RecordingClient:
    """A client that records every submission and answers each with a pass."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def submit(self, diagnosis: str, **fields: Any) -> Grading:
        self.sent.append({"diagnosis": diagnosis, **fields})
        answers = [
            {"question_id": q, "dimension_id": q[:2], "answer": "yes", "judge_answer": "yes",
             "reasoning": "", "evidence": "USER_PORT=9999", "evidence_verified": True,
             "confidence": 0.9, "overridden": False}
            for q in IDS
        ]  # fmt: skip
        return Grading.model_validate({
            "id": f"g{len(self.sent)}", "submission_id": f"s{len(self.sent)}",
            "status": "graded", "unscored_reason": None, "graded_at": None,
            "rubric": {"id": "sregym-rca"}, "judge": {"backend": "x"},
            "answers": answers,
            "dimensions": [{"id": d, "name": d, "yes": 3, "total": 3} for d in ("D1", "D2", "D3")],
            "yes_count": 9, "composite": 1.0, "passed": True, "judge_passed": True,
            "needs_review": False, "review_reasons": [], "revision": 1,
            "created_at": "2026-12-01T00:00:00Z",
            "submission": {"id": f"s{len(self.sent)}", "attempt": fields.get("attempt"),
                           "agent": None, "model": None, "scenario_id": None,
                           "run_id": fields.get("run_id"),
                           "metadata": {}, "diagnosis": diagnosis, "ground_truth": TRUTH,
                           "ground_truth_source": "inline", "ground_truth_sha256": _sha(TRUTH),
                           "created_at": "2026-12-01T00:00:00Z"},
        })  # fmt: skip


def _problem_class(oracle: Any) -> type:
    class UserPortProblem:
        """As ``sregym.conductor.problems.base.Problem`` and a subclass set it up."""

        def __init__(self) -> None:
            self.app = None
            self.namespace = "hotel-reservation"
            self.fault_injected = False
            self.results: dict[str, Any] = {}
            self.root_cause = TRUTH
            self.diagnosis_oracle = oracle(problem=self, expected=self.root_cause)
            self.mitigation_oracle = None

    return UserPortProblem


def test_each_sregym_attempt_is_its_own_attempt_though_each_has_its_own_oracle() -> None:
    """SREGym builds a new problem, and so a new oracle, for every attempt (and its
    ``Problem`` has no ``problem_id``): one problem run twice in one run is attempt 1,
    then attempt 2, under two Idempotency-Keys, so the second diagnosis is graded itself."""
    client = _RecordingClient()
    oracle = functools.partial(LLMAsAJudgeOracle, client=client, run_id="run-0601_1200")
    problem_class = _problem_class(oracle)
    for text in ("USER_PORT=9999 on user-service", "the geo pod is down"):
        problem = problem_class()  # Conductor.start_problem: a new instance per attempt
        assert problem.diagnosis_oracle.evaluate(text)["judgment"] == "True"
    assert [call["attempt"] for call in client.sent] == [1, 2]
    keys = {call["idempotency_key"] for call in client.sent}
    assert len(keys) == 2, keys


def test_the_idempotency_key_names_the_oracles_agent_and_model() -> None:
    """Two agents (or models) run under one run id, in processes of their own, each make
    attempt 1 at a problem: the key names the agent and model, so both are graded."""
    client = _RecordingClient()
    who = {"agent": "react", "model": "m2", "run_id": "nightly"}
    oracle = LLMAsAJudgeOracle(object(), TRUTH, client=client, **who)  # type: ignore[arg-type]
    assert oracle.evaluate(DIAGNOSIS)["judgment"] == "True"
    expected = idempotency_key(
        scenario_id=None, ground_truth=TRUTH, run_id="nightly", attempt=oracle.attempts,
        agent="react", model="m2",
    )  # fmt: skip
    assert client.sent[0]["idempotency_key"] == expected


def test_oracles_built_from_the_environment_leave_no_connection_open(
    serve: Callable[[str], Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SREGym builds an oracle for every attempt and never closes it: an oracle without a
    ``client`` opens one from ``SRE_JUDGE_URL``/``SRE_JUDGE_TOKEN`` for each ``evaluate``
    and closes it, so attempts do not pile up open sockets."""
    served = serve("pass")
    monkeypatch.setenv("SRE_JUDGE_URL", served.url)
    monkeypatch.setenv("SRE_JUDGE_TOKEN", served.admin)
    gc.collect()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            oracle = LLMAsAJudgeOracle(Problem(f"p-env-{uuid.uuid4().hex[:8]}"), TRUTH, wait=30)
            assert oracle.evaluate(DIAGNOSIS)["judgment"] == "True"
            assert oracle.evaluate(DIAGNOSIS)["judgment"] == "True"  # a second call works too
            del oracle
        gc.collect()
    unclosed = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert unclosed == []


def test_an_oracle_refuses_a_bad_server_url_from_the_environment_when_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mistyped ``SRE_JUDGE_URL`` is a ``ValueError`` when the oracle is built, before
    any attempt, as the client's own."""
    monkeypatch.setenv("SRE_JUDGE_URL", "127.0.0.1:8000")
    with pytest.raises(ValueError, match="http://"):
        LLMAsAJudgeOracle(Problem("p"), TRUTH)
