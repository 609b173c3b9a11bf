"""Failure tags: the vocabulary and tags on gradings."""

from __future__ import annotations

from typing import Any

from litestar import Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.adjudication import use_cases
from api.adjudication.use_cases import tag_grading, tag_vocabulary, untag_grading
from api.http.auth import require
from api.service.principal import Principal
from api.service.schemas import TagPublic
from api.service.services import Services

__all__ = ["add_tag", "define_tag", "list_vocabulary", "remove_tag"]


class TagDefinition(BaseModel):
    """A new failure tag for the vocabulary."""

    model_config = ConfigDict(extra="forbid")

    tag: StrictStr = Field(min_length=2, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: StrictStr = Field(min_length=3, max_length=500)


class TagCreate(BaseModel):
    """A failure tag on a grading."""

    model_config = ConfigDict(extra="forbid")

    tag: StrictStr = Field(min_length=1, max_length=64)
    note: StrictStr = Field(default="", max_length=2000)


@get("/v1/failure-tags", guards=[require("adjudicator")], operation_id="listFailureTags")
async def list_vocabulary(services: NamedDependency[Services]) -> list[dict[str, Any]]:
    """The vocabulary adjudicators tag with."""
    return [
        {"tag": v.tag, "description": v.description, "source": v.source}
        for v in await tag_vocabulary(services)
    ]


@post(
    "/v1/failure-tags",
    guards=[require("admin")],
    operation_id="defineFailureTag",
    status_code=201,
)
async def define_tag(
    data: JSONBody[TagDefinition],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, str]:
    """Extend the vocabulary (admins); 409 naming ``tag`` when it is defined already."""
    record = await use_cases.define_tag(services, principal, data.tag, description=data.description)
    return {"tag": record.tag, "description": record.description, "source": record.source}


@post(
    "/v1/gradings/{grading_id:str}/tags",
    guards=[require("adjudicator")],
    operation_id="tagGrading",
    status_code=201,
)
async def add_tag(
    grading_id: FromPath[str],
    data: JSONBody[TagCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> Response[TagPublic]:
    """Tag what the agent got wrong; 422 for a tag outside the vocabulary, 409 on a
    grading a promoted regrade superseded (tag the one that replaced it), 409 naming
    ``tag`` when you have this tag with this note on the grading already. ``Location``
    is the grading, whose object lists the tag."""
    record = await tag_grading(services, principal, grading_id, tag=data.tag, note=data.note)
    tag = TagPublic(
        id=record.id or 0,
        tag=record.tag,
        note=record.note,
        author=record.author_name,
        created_at=record.created_at,
    )
    return Response(tag, status_code=201, headers={"Location": f"/v1/gradings/{record.grading_id}"})


@delete(
    "/v1/gradings/{grading_id:str}/tags/{tag_id:int}",
    guards=[require("adjudicator")],
    operation_id="untagGrading",
    status_code=204,
)
async def remove_tag(
    grading_id: FromPath[str],
    tag_id: FromPath[int],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> None:
    """Remove a tag (kept in the audit log); 409 on a grading a promoted regrade
    superseded (remove the tag's copy on the one that replaced it)."""
    await untag_grading(services, principal, grading_id, tag_id)
