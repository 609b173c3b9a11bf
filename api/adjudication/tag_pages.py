"""Failure tags (with a note) added to and removed from a grading on its page. A tag the
page refuses brings the grading's page back (422), the tag form as it was sent and why
beside it; on a grading a promoted regrade superseded, the page (409) says so and links
the grading that replaced it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from urllib.parse import urlencode

from litestar import post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from api.adjudication.grading_pages import render_grading_page
from api.adjudication.queue_pages import carried_walk
from api.adjudication.use_cases import tag_grading, untag_grading
from api.service.services import Services
from api.web.sessions import SignedIn, web_require
from storage.errors import Conflict, InvalidReview, Superseded

__all__ = ["tag_from_page", "untag_from_page"]

#: the longest note the API takes (``TagCreate.note``)
MAX_NOTE = 2000


def _back(grading_id: str, form: Mapping[str, str]) -> Redirect:
    """Back at the grading's tags, on the walk through the queue the form carried."""
    walk = carried_walk(form)
    query = f"?{urlencode(walk)}" if walk else ""
    return Redirect(f"/gradings/{grading_id}{query}#tags", status_code=303)


@post(
    "/gradings/{grading_id:str}/tags",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def tag_from_page(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect | Template:
    """Tag what the agent got wrong (a tag of the vocabulary, and an optional note); back
    at the tags, the walk the form carried (``q.``) going along. Refused (no tag, one
    not in the vocabulary, a note too long): the grading's page, 422, with the form as
    sent and the problem beside it. The same tag and note you have on it already (a
    form sent twice) is not stored again: back at the tags, which show it once."""
    tag = data.get("tag", "").strip()
    note = data.get("note", "").strip()
    if not tag:
        problem = ("tag", "choose a tag of the vocabulary")
    elif len(note) > MAX_NOTE:
        problem = ("note", f"a note holds at most {MAX_NOTE} characters")
    else:
        try:
            await tag_grading(services, who.principal, grading_id, tag=tag, note=note)
        except InvalidReview as exc:
            problem = (exc.field, str(exc))
        except Superseded as exc:
            return await _refused(services, who, grading_id, exc, sent=data)
        except Conflict:  # yours already, note and all (a form sent twice): it is there
            return _back(grading_id, data)
        else:
            return _back(grading_id, data)
    return await render_grading_page(
        services, who, grading_id, status_code=422, tag_sent=data, tag_error=problem
    )


@post(
    "/gradings/{grading_id:str}/tags/{tag_id:int}/remove",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def untag_from_page(
    grading_id: FromPath[str],
    tag_id: FromPath[int],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect | Template:
    """Remove a tag (the audit log keeps it); back at the tags, on the form's walk."""
    try:
        await untag_grading(services, who.principal, grading_id, tag_id)
    except Superseded as exc:
        return await _refused(services, who, grading_id, exc, sent=data)
    return _back(grading_id, data)


async def _refused(
    services: Services,
    who: SignedIn,
    grading_id: str,
    exc: Superseded,
    *,
    sent: Mapping[str, str],
) -> Template:
    """The grading's page (409) saying why a tag was neither added nor removed: a
    promoted regrade superseded the grading, which the page links."""
    return await render_grading_page(
        services, who, grading_id, status_code=409, tag_sent=dict(sent), error=f"Not saved: {exc}"
    )
