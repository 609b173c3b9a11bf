"""Each API operation as a :class:`Call`, so both clients build requests the same way."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sre_judge_client._core import Call

__all__ = [
    "get_grading",
    "get_regrade_job",
    "label",
    "list_gradings",
    "override",
    "register_scenario",
    "start_regrade",
]


def _id(value: str) -> str:
    return quote(value, safe="")


def get_grading(grading_id: str) -> Call:
    """``GET /v1/gradings/{id}``."""
    return Call("GET", f"/v1/gradings/{_id(grading_id)}", idempotent=True)


def list_gradings(filters: dict[str, Any], cursor: str | None, page_size: int) -> Call:
    """One page of ``GET /v1/gradings``; booleans as the server spells them."""
    params: dict[str, Any] = {"limit": page_size}
    for name, value in filters.items():
        if value is None:
            continue
        params[name] = str(value).lower() if isinstance(value, bool) else value
    if cursor:
        params["cursor"] = cursor
    return Call("GET", "/v1/gradings", params=params, idempotent=True)


def override(grading_id: str, revision: int, body: dict[str, Any]) -> Call:
    """``POST /v1/gradings/{id}/overrides`` against ``revision`` (``If-Match``)."""
    return Call(
        "POST",
        f"/v1/gradings/{_id(grading_id)}/overrides",
        body={k: v for k, v in body.items() if v is not None},
        headers={"If-Match": f'"{revision}"'},
    )


def label(grading_id: str, answers: dict[str, str], verdict: str | None) -> Call:
    """``POST /v1/gradings/{id}/labels``: an adjudicator's own nine answers."""
    body: dict[str, Any] = {"answers": answers}
    if verdict is not None:
        body["verdict"] = verdict
    return Call("POST", f"/v1/gradings/{_id(grading_id)}/labels", body=body)


def register_scenario(
    scenario_id: str, ground_truth: str, *, title: str | None, tags: list[str] | None
) -> Call:
    """``POST /v1/scenarios`` (admin)."""
    body: dict[str, Any] = {"id": scenario_id, "ground_truth": ground_truth}
    if title is not None:
        body["title"] = title
    if tags:
        body["tags"] = tags
    return Call("POST", "/v1/scenarios", body=body)


def start_regrade(body: dict[str, Any]) -> Call:
    """``POST /v1/regrade-jobs`` (admin)."""
    return Call("POST", "/v1/regrade-jobs", body=body)


def get_regrade_job(job_id: str) -> Call:
    """``GET /v1/regrade-jobs/{id}``."""
    return Call("GET", f"/v1/regrade-jobs/{_id(job_id)}", idempotent=True)
