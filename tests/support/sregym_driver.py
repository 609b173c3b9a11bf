"""Results folders written as SREGym's driver writes them (SREGym/SREGym, ``main.py`` and
``sregym/run_artifacts.py``; its judge ``sregym/conductor/oracles/llm_as_a_judge``).

What SREGym does, reproduced here:

- the run folder is ``results/<%m%d_%H%M>/`` (``logger.get_current_datetime_formatted``);
- each attempt's row is the conductor's results flattened: ``problem_id``, ``attempt``,
  ``Diagnosis.<key>`` for every key of the oracle's dict (plus ``submission``), ``TTL``,
  ``Mitigation.<key>``, ``TTM``, ``timed_out``/``agent_timeout_seconds`` on a timeout,
  only ``problem_id``, ``attempt``, ``deploy_failed`` for a failed deploy;
- the header is ``sorted`` over the keys of every row written so far, by
  ``csv.DictWriter`` (CRLF, ``str()`` of bools, floats, dicts and lists, None empty);
- three kinds of files: ``<agent>/<pid>/run_<n>/<pid>_results.csv`` (that attempt alone,
  header over every row so far), ``<agent>/<pid>/<pid>_<agent>_results.csv`` (every row
  of the agent so far: also the rows of the problems run before it) and
  ``<agent>_ALL_results.csv`` at the run's top (every row);
- ``--resume CSV`` seeds the run's rows with the CSV's and reruns a problem with fewer
  rows than ``--n-attempts`` from attempt 1 (``driver_loop``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

__all__ = ["IDS", "RUN", "diagnosed", "oracle_result", "parse_failure_result", "write_run"]

IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
NAMES = {"D1": "Fault Localization", "D2": "Fault Characterization", "D3": "Scope Precision"}
WEIGHTS = {"D1": 0.33, "D2": 0.33, "D3": 0.34}
RUN = "0601_1200"


def oracle_result(
    yes: set[str],
    *,
    evidence: str = "names the component",
    none_evidence: str = "",
    confidence: str = "High",
) -> dict[str, Any]:
    """What SREGym's ``LLMAsAJudgeOracle.evaluate`` returns for these yes answers
    (``DiagnosisJudge.judge_detailed`` and ``_build_reasoning``, to the character)."""
    dims = []
    for dim in ("D1", "D2", "D3"):
        questions = [
            {"id": q, "answer": q in yes, "evidence": evidence if q in yes else none_evidence,
             "confidence": confidence}
            for q in IDS if q.startswith(dim)
        ]  # fmt: skip
        score = round(sum(bool(q["answer"]) for q in questions) / len(questions), 2)
        dims.append((dim, NAMES[dim], score, questions))
    composite = round(sum(WEIGHTS[d] * s for d, _, s, _ in dims), 2)
    verdict = "True" if composite >= 0.70 else "False"
    parts = [f"Verdict: {verdict} (composite={composite:.2f})."]
    parts.append(" | ".join(f"{d} {n}: {s:.2f}" for d, n, s, _ in dims) + ".")
    weakest = min(dims, key=lambda item: item[2])
    parts.append(f"Weakest dimension: {weakest[1]} ({weakest[2]:.2f}).")
    checklist = [
        {"id": q["id"], "answer": "Yes" if q["answer"] else "No", "evidence": q["evidence"],
         "confidence": q["confidence"]}
        for _, _, _, qs in dims for q in qs
    ]  # fmt: skip
    parts.append("Checklist details: " + json.dumps(checklist, ensure_ascii=True))
    return {
        "judgment": verdict,
        "reasoning": " ".join(parts),
        "success": verdict == "True",
        "accuracy": round(composite * 100.0, 2),
        "composite_score": composite,
        "dimensions": {d: {"name": n, "score": s} for d, n, s, _ in dims},
        "checklist": checklist,
    }


def parse_failure_result() -> dict[str, Any]:
    """SREGym's result when its judge's reply could not be parsed twice
    (``DiagnosisJudge._call_llm_with_retry``): nine "No", composite 0.0, "False"."""
    return oracle_result(
        set(), none_evidence="parse failure \u2014 defaulting to No", confidence="Low"
    )


def diagnosed(
    solution: str, yes: set[str], *, ttl: float = 41.377, mitigated: bool | None = True
) -> dict[str, Any]:
    """``conductor.results`` after a diagnosis (and, unless None, a mitigation)."""
    diagnosis = {**oracle_result(yes), "submission": solution}
    results: dict[str, Any] = {"Diagnosis": diagnosis, "TTL": ttl}
    if mitigated is not None:
        results["Mitigation"] = {"success": mitigated}
        results["TTM"] = ttl + 60.25
    return results


def _snapshot(pid: str, attempt: int, results: dict[str, Any]) -> dict[str, Any]:
    snapshot: dict[str, Any] = {"problem_id": pid, "attempt": attempt}
    for stage, outcome in results.items():
        if isinstance(outcome, dict):
            for key, value in outcome.items():
                snapshot[f"{stage}.{key}"] = value
        else:
            snapshot[stage] = outcome
    return snapshot


def _write(path: Path, fieldnames: list[str], rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as csvfile:
        writer = csv.DictWriter(csvfile, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(rows)


def write_run(
    results_root: Path,
    agent: str,
    attempts: dict[str, list[dict[str, Any] | None]],
    *,
    run: str = RUN,
    all_file: bool = True,
    resumed: dict[str, list[dict[str, Any]]] | None = None,
) -> Path:
    """SREGym's driver loop for one agent: ``attempts`` maps each problem id, in the
    order run, to its attempts' ``conductor.results`` (None: the deploy failed).
    ``resumed``: the attempts, by problem id, of the CSV the run resumes from (``--resume``),
    whose rows SREGym seeds the run's rows with before it reruns a problem cut short from
    attempt 1. Returns the run's folder (``results/<run>``)."""
    base = results_root / run
    every: list[dict[str, Any]] = [
        _snapshot(pid, number, results)
        for pid, runs in (resumed or {}).items()
        for number, results in enumerate(runs, start=1)
    ]
    for pid, runs in attempts.items():
        for number, results in enumerate(runs, start=1):
            if results is None:  # SREGym skips the problem's other attempts and its file
                every.append({"problem_id": pid, "attempt": number, "deploy_failed": True})
                break
            snapshot = _snapshot(pid, number, results)
            fieldnames = sorted({key for row in [*every, snapshot] for key in row})
            _write(
                base / agent / pid / f"run_{number}" / f"{pid}_results.csv", fieldnames, [snapshot]
            )
            every.append(snapshot)
            if number == len(runs):
                fieldnames = sorted({key for row in every for key in row})
                _write(base / agent / pid / f"{pid}_{agent}_results.csv", fieldnames, every)
    if all_file:
        fieldnames = sorted({key for row in every for key in row})
        _write(base / f"{agent}_ALL_results.csv", fieldnames, every)
    return base
