"""The review queue page, "next", and finishing a review; the home page."""

from __future__ import annotations

from collections import Counter
from typing import Any

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from api.adjudication.grading_view import verdict_label
from api.adjudication.use_cases import finish_review, review_items
from api.service.presenters import render_gradings
from api.service.schemas import GradingPublic
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from judge.review_reasons import ReviewReason
from storage import GradingView, ReviewItem

__all__ = ["finish_from_page", "home", "next_item", "queue_page"]

#: the queue page reads this many items at most (the counts are over them)
QUEUE_WINDOW = 500


def _keeps(
    g: GradingPublic, *, model: str | None, judge: str | None, provisional: bool | None
) -> bool:
    if model and g.submission.model != model:
        return False
    if judge and judge not in f"{g.judge.get('backend', '')}:{g.judge.get('model', '')}":
        return False
    return provisional is None or g.provisional == provisional


async def _items(
    services: Services, who: SignedIn, filters: dict[str, Any]
) -> list[tuple[GradingPublic, ReviewItem]]:
    items = await review_items(
        services,
        who.principal,
        agent=filters["agent"],
        scenario_id=filters["scenario_id"],
        reason=filters["reason"],
        limit=QUEUE_WINDOW,
    )
    views = [
        GradingView(grading=i.grading, answers=i.answers, submission=i.submission) for i in items
    ]
    gradings = await render_gradings(services, views, who.principal)
    return [
        (g, item)
        for g, item in zip(gradings, items, strict=True)
        if _keeps(
            g, model=filters["model"], judge=filters["judge"], provisional=filters["provisional"]
        )
    ]


@get("/queue", guards=[web_require("adjudicator")], include_in_schema=False)
async def queue_page(
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    agent: FromQuery[str | None] = None,
    model: FromQuery[str | None] = None,
    scenario_id: FromQuery[str | None] = None,
    reason: FromQuery[str | None] = None,
    judge: FromQuery[str | None] = None,
    provisional: FromQuery[bool | None] = None,
) -> Template:
    """Gradings that need a human, most urgent first, with counts per reason."""
    filters = {
        "agent": agent or None,
        "model": model or None,
        "scenario_id": scenario_id or None,
        "reason": reason or None,
        "judge": judge or None,
        "provisional": provisional,
    }
    rows = await _items(services, who, filters)
    counts = Counter(r for _, item in rows for r in item.reasons)
    return page(
        "queue.html",
        who,
        rows=[(g, item, verdict_label(g)) for g, item in rows],
        counts=[(r.value, counts.get(r.value, 0)) for r in ReviewReason],
        reasons=[r.value for r in ReviewReason],
        filters=filters,
    )


@get("/queue/next", guards=[web_require("adjudicator")], include_in_schema=False)
async def next_item(
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    after: FromQuery[str | None] = None,
) -> Redirect:
    """The most urgent item nobody else holds (other than ``after``), claimed on opening."""
    items = await review_items(services, who.principal, limit=QUEUE_WINDOW)
    for item in items:
        if item.grading.id != after:
            return Redirect(f"/gradings/{item.grading.id}?claim=true", status_code=303)
    return Redirect("/queue", status_code=303)


@post(
    "/gradings/{grading_id:str}/done",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def finish_from_page(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
) -> Redirect:
    """The item leaves the queue; on to the next one."""
    await finish_review(services, who.principal, grading_id)
    return Redirect(f"/queue/next?after={grading_id}", status_code=303)


@get("/", guards=[web_require("submitter")], include_in_schema=False)
async def home(who: NamedDependency[SignedIn]) -> Redirect:
    """Adjudicators start at the queue, submitters at their gradings."""
    target = "/queue" if who.principal.at_least("adjudicator") else "/gradings"
    return Redirect(target, status_code=303)
