"""The page that sets two gradings of one attempt side by side, question by question."""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency
from litestar.params import FromPath
from litestar.response import Template

from api.adjudication.use_cases import grading_pair
from api.adjudication.versus import versus_context
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require

__all__ = ["versus_page"]


@get(
    "/gradings/{first:str}/versus/{second:str}",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
)
async def versus_page(
    first: FromPath[str],
    second: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
) -> Template:
    """Two gradings of the same submission (another judge, rubric version or a regrade):
    each question's answers side by side with the differences marked, each dimension's
    yes count and both verdicts."""
    pair = await grading_pair(services, who.principal, first, second)
    return page("versus.html", who, **versus_context(pair))
