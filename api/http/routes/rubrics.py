"""Rubrics and their versions."""

from __future__ import annotations

from typing import Any

from litestar import get
from litestar.di import NamedDependency
from litestar.params import FromPath

from api.http.auth import require
from api.http.problems import ApiProblem
from api.service.services import Services

__all__ = ["get_rubric", "list_rubrics"]


@get("/v1/rubrics", guards=[require("submitter")], operation_id="listRubrics")
async def list_rubrics(services: NamedDependency[Services]) -> list[dict[str, Any]]:
    """The rubrics in use, with their current versions."""
    return [
        {
            "id": r.id,
            "version": r.version,
            "title": r.title,
            "questions": len(r.questions),
            "default": r.id == services.settings.rubric,
        }
        for r in services.rubrics.current.values()
    ]


@get("/v1/rubrics/{rubric_id:str}", guards=[require("submitter")], operation_id="getRubric")
async def get_rubric(
    rubric_id: FromPath[str], services: NamedDependency[Services]
) -> dict[str, Any]:
    """A rubric's full content (``id`` or ``id@version``) and the versions stored."""
    rubric = await services.rubrics.find(rubric_id)
    if rubric is None:
        raise ApiProblem(404, "Not found", f"no rubric {rubric_id!r}")
    versions = await services.store.catalog.list_rubric_versions(rubric.id)
    return {
        **rubric.model_dump(mode="json"),
        "version": rubric.version,
        "versions": [v.version for v in versions],
    }
