"""Each API operation as a :class:`Call`, so both clients build requests the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from sre_judge_client._core import Call

__all__ = [
    "create_import",
    "get_grading",
    "get_import",
    "get_regrade_job",
    "get_scenario",
    "label",
    "list_gradings",
    "list_scenarios",
    "load_scenarios",
    "override",
    "register_scenario",
    "start_regrade",
    "update_scenario",
]

#: the media type of each bulk-load format, as ``POST /v1/scenarios:bulk`` reads them
LOAD_MEDIA_TYPES = {
    "jsonl": "application/jsonl",
    "yaml": "application/yaml",
    "json": "application/json",
}


def _id(value: str) -> str:
    return quote(value, safe="")


def _scenario(scenario_id: str) -> str:
    """A scenario's path: ids may hold slashes (``hotel/user-port``), kept as they are."""
    return "/v1/scenarios/" + quote(scenario_id, safe="/")


def _time(value: Any) -> Any:
    """A time as the server reads it (ISO 8601), any other value as it is."""
    return value.isoformat() if isinstance(value, datetime) else value


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """Query parameters: the given ones, booleans and times as the server spells them."""
    params = {}
    for name, value in values.items():
        if value is None:
            continue
        params[name] = str(value).lower() if isinstance(value, bool) else _time(value)
    return params


def get_grading(grading_id: str) -> Call:
    """``GET /v1/gradings/{id}``."""
    return Call("GET", f"/v1/gradings/{_id(grading_id)}", idempotent=True)


def list_gradings(filters: dict[str, Any], cursor: str | None, page_size: int) -> Call:
    """One page of ``GET /v1/gradings``; booleans and times as the server spells them."""
    params: dict[str, Any] = {"limit": page_size, **_given(filters)}
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
    """``POST /v1/regrade-jobs`` (admin); the filter's times as :func:`list_gradings`
    sends them."""
    filters = body.get("filter")
    if isinstance(filters, dict):
        body = {**body, "filter": {name: _time(value) for name, value in filters.items()}}
    return Call("POST", "/v1/regrade-jobs", body=body)


def get_regrade_job(job_id: str) -> Call:
    """``GET /v1/regrade-jobs/{id}``."""
    return Call("GET", f"/v1/regrade-jobs/{_id(job_id)}", idempotent=True)


def list_scenarios(filters: dict[str, Any], cursor: str | None, page_size: int) -> Call:
    """One page of ``GET /v1/scenarios`` (``set``, ``id_prefix``, ``created_after``, ...)."""
    params = _given({**filters, "limit": page_size, "cursor": cursor})
    return Call("GET", "/v1/scenarios", params=params, idempotent=True)


def load_scenarios(content: bytes, fmt: str) -> Call:
    """``POST /v1/scenarios:bulk`` of a JSONL, YAML or JSON file (idempotent on the server)."""
    headers = {"Content-Type": LOAD_MEDIA_TYPES[fmt]}
    return Call("POST", "/v1/scenarios:bulk", content=content, headers=headers, idempotent=True)


def get_scenario(scenario_id: str, suffix: str = "") -> Call:
    """``GET /v1/scenarios/{id}``, or with ``suffix`` its ``/versions`` or ``/versions/{n}``."""
    return Call("GET", _scenario(scenario_id) + suffix, idempotent=True)


def update_scenario(scenario_id: str, revision: int, body: dict[str, Any]) -> Call:
    """``PUT /v1/scenarios/{id}`` against ``revision`` (``If-Match``: its ETag)."""
    return Call(
        "PUT",
        _scenario(scenario_id),
        body={k: v for k, v in body.items() if v is not None},
        headers={"If-Match": f'"{revision}"'},
    )


def expected_revision(revision: int | None, version: int | None, current: Any) -> int:
    """The revision an update names: the one given, else ``version`` (what older
    clients sent: the revision of a scenario never changed in place), else the
    scenario just read's."""
    if revision is not None:
        return revision
    if version is not None:
        return version
    return int(current.revision if current.revision is not None else current.version or 0)


def create_import(content: bytes, media_type: str, *, rubric: str | None, strict: bool) -> Call:
    """``POST /v1/imports``: the archive or JSON lines as the body itself."""
    params = _given({"rubric": rubric, "strict": strict or None})
    return Call(
        "POST", "/v1/imports", params=params, content=content, headers={"Content-Type": media_type}
    )


def get_import(job_id: str) -> Call:
    """``GET /v1/imports/{id}``."""
    return Call("GET", f"/v1/imports/{_id(job_id)}", idempotent=True)
