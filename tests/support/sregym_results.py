"""A realistic SREGym results folder, written for the tests: 3 agents x 5 problems x 3 attempts.

Layout as SREGym writes it: ``<datetime>/<agent>/<problem_id>/...csv``, one row per
attempt (one agent writes one CSV per attempt, the others one CSV per problem), with
``Diagnosis.dimensions`` and ``Diagnosis.checklist`` as Python reprs. Among the 45
attempts: one timed out, one failed to deploy and one submitted nothing.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENTS",
    "PROBLEMS",
    "TRACE_SECRET",
    "SregymFixture",
    "write_sregym_attempt",
    "write_sregym_results",
]

RUN = "2025-06-01_12-00-00"
AGENTS = ("stratus", "react-baseline", "claude-sre")
PROBLEMS = {
    "k8s_target_port-misconfig-detection-1": (
        "[fault_spec] component=service/user-service; namespace=social-network || "
        "The user-service Service targets port 9999 while its pods listen on 9090."
    ),
    "auth_miss_mongodb-mitigation-1": (
        "[fault_spec] component=deployment/url-shorten-mongodb; namespace=social-network || "
        "MongoDB authentication was enabled without credentials for its clients."
    ),
    "revoke_auth_mongodb-detection-2": (
        "[fault_spec] component=deployment/mongodb-rate; namespace=hotel-reservation || "
        "The admin user's readWrite role on the rate database was revoked."
    ),
    "misconfig_app_hotel_res-localization-1": (
        "[fault_spec] component=deployment/geo; namespace=hotel-reservation || "
        "The geo deployment runs a wrong image tag that crashes at start."
    ),
    "noop_detection_hotel_reservation-1": "",
}
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
COLUMNS = [
    "problem_id", "attempt", "TTL", "TTM", "timed_out", "deploy_failed",
    "Diagnosis.submission", "Diagnosis.success", "Diagnosis.judgment",
    "Diagnosis.reasoning", "Diagnosis.composite_score", "Diagnosis.accuracy",
    "Diagnosis.dimensions", "Diagnosis.checklist", "Mitigation.success", "Mitigation.attempts",
]  # fmt: skip
#: (agent, problem index, attempt) of attempts that produced no diagnosis
NOT_DIAGNOSED = {
    ("react-baseline", 1, 3): "timed_out",
    ("react-baseline", 3, 1): "deploy_failed",
    ("claude-sre", 4, 2): "no_submission",
}


@dataclass(frozen=True)
class SregymFixture:
    """Where the folder and the problems file are, and what SREGym said."""

    root: Path
    problems_file: Path
    #: (agent, problem_id, attempt) -> SREGym's success, for the diagnosed attempts
    verdicts: dict[tuple[str, str, int], bool]


def _yes_ids(agent: int, problem: int, attempt: int) -> set[str]:
    count = (agent * 3 + problem * 2 + attempt) % 10  # 0..9 yes answers
    return set(IDS[:count])


def _row(agent: str, a: int, problem_id: str, p: int, attempt: int) -> dict[str, str]:
    outcome = NOT_DIAGNOSED.get((agent, p, attempt))
    yes = _yes_ids(a, p, attempt)
    scores = {f"D{d}": round(sum(f"D{d}-Q{q}" in yes for q in (1, 2, 3)) / 3, 3) for d in (1, 2, 3)}
    names = {"D1": "Fault localization", "D2": "Fault characterization", "D3": "Failure scope"}
    dims = {d: {"name": names[d], "score": score} for d, score in scores.items()}
    composite = round(0.33 * scores["D1"] + 0.33 * scores["D2"] + 0.34 * scores["D3"], 2)
    success = composite >= 0.7
    component = PROBLEMS[problem_id].partition("component=")[2].partition(";")[0] or "nothing"
    checklist = [
        {"id": qid, "answer": "Yes" if qid in yes else "No",
         "evidence": f"mentions {component}" if qid in yes else "", "confidence": "High"}
        for qid in IDS
    ]  # fmt: skip
    text = (
        f"Attempt {attempt} by {agent}: the root cause is {component}; "
        f"{'pods restart and requests fail' if attempt % 2 else 'latency rises for callers'}."
    )
    row = {
        "problem_id": problem_id, "attempt": str(attempt), "TTL": f"{40 + a * 7 + p}.5",
        "TTM": "" if outcome else f"{90 + attempt * 11}.0", "timed_out": "False",
        "deploy_failed": "False", "Diagnosis.submission": text, "Diagnosis.success": str(success),
        "Diagnosis.judgment": "PASS" if success else "FAIL",
        "Diagnosis.reasoning": f"{len(yes)} \"yes\";\nD1 {scores['D1']}, composite {composite}",
        "Diagnosis.composite_score": str(composite), "Diagnosis.accuracy": str(composite),
        "Diagnosis.dimensions": repr(dims), "Diagnosis.checklist": repr(checklist),
        "Mitigation.success": str(attempt != 2), "Mitigation.attempts": str(attempt),
    }  # fmt: skip
    if outcome:
        row.update({"Diagnosis.submission": "", "Diagnosis.success": "", "Diagnosis.judgment": ""})
        row.update({"Diagnosis.checklist": "", "Diagnosis.composite_score": ""})
        row.update({"Diagnosis.reasoning": "", "Diagnosis.dimensions": ""})
        if outcome in ("timed_out", "deploy_failed"):
            row[outcome] = "True"
    return row


#: a credential one trace carries, to be redacted on import
TRACE_SECRET = "AKIAIOSFODNN7EXAMPLE"


def _trace(agent: str, problem_id: str, attempt: int) -> str:
    """The ``trace`` cell of one attempt: JSON steps (stratus), a Python repr of steps
    (react-baseline, as SREGym writes its other lists) or free text (claude-sre)."""
    component = PROBLEMS[problem_id].partition("component=")[2].partition(";")[0] or "nothing"
    steps = [
        {"tool": "kubectl_get", "input": {"args": ["pods", "-A"]}, "output": f"{component} 0/1"},
        {"tool": "env", "input": "", "output": f"AWS_ACCESS_KEY_ID={TRACE_SECRET}"},
    ]
    if agent == "stratus":
        return json.dumps(steps)
    if agent == "react-baseline":
        return repr(steps)
    return f"$ kubectl get pods -A\n{component} 0/1 (attempt {attempt})"


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        columns = [*COLUMNS, "trace"] if rows and "trace" in rows[0] else COLUMNS
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def write_sregym_results(base: Path, *, run: str = RUN, traces: bool = False) -> SregymFixture:
    """Write the results folder (one run) and a JSONL problems file under ``base``;
    ``traces``: with a ``trace`` column holding each attempt's trace."""
    root = base / "results"
    verdicts: dict[tuple[str, str, int], bool] = {}
    for a, agent in enumerate(AGENTS):
        for p, problem_id in enumerate(PROBLEMS):
            rows = [_row(agent, a, problem_id, p, attempt) for attempt in (1, 2, 3)]
            if traces:
                for row in rows:
                    row["trace"] = _trace(agent, problem_id, int(row["attempt"]))
            for row in rows:
                if row["Diagnosis.success"]:
                    verdicts[(agent, problem_id, int(row["attempt"]))] = (
                        row["Diagnosis.success"] == "True"
                    )
            folder = root / run / agent / problem_id
            if agent == "stratus":
                for row in rows:
                    _write(folder / f"attempt_{row['attempt']}" / "results.csv", [row])
            else:
                _write(folder / "results.csv", rows)
    problems_file = base / "problems.jsonl"
    problems_file.write_text(
        "".join(json.dumps({"problem_id": k, "root_cause": v}) + "\n" for k, v in PROBLEMS.items())
    )
    return SregymFixture(root=root, problems_file=problems_file, verdicts=verdicts)


def write_sregym_attempt(
    base: Path,
    checklist: list[dict[str, str]],
    *,
    diagnosis: str,
    ground_truth: str,
    success: bool | None,
) -> SregymFixture:
    """Write a results folder of one diagnosed attempt (agent ``stratus``, problem ``p1``)
    whose ``Diagnosis.checklist`` is ``checklist`` (entries as SREGym writes them) and
    whose ``Diagnosis.success`` is ``success`` (empty for None), and its problems file."""
    row = dict.fromkeys(COLUMNS, "")
    row.update(
        {
            "problem_id": "p1",
            "attempt": "1",
            "timed_out": "False",
            "deploy_failed": "False",
            "Diagnosis.submission": diagnosis,
            "Diagnosis.success": "" if success is None else str(success),
            "Diagnosis.judgment": {None: "", True: "PASS", False: "FAIL"}[success],
            "Diagnosis.checklist": repr(checklist),
        }
    )
    root = base / "results"
    _write(root / RUN / "stratus" / "p1" / "attempt_1" / "results.csv", [row])
    problems_file = base / "problems.jsonl"
    problems_file.write_text(json.dumps({"problem_id": "p1", "root_cause": ground_truth}) + "\n")
    verdicts = {} if success is None else {("stratus", "p1", 1): success}
    return SregymFixture(root=root, problems_file=problems_file, verdicts=verdicts)
