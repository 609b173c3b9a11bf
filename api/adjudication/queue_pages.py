"""The review queue page, "next", skipping and finishing a review, assigning items; the
home page."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, FromQuery
from litestar.response import Redirect, Template

from api.adjudication.grading_view import verdict_label
from api.adjudication.review_queries import QueueCounts, QueueFilter, ReviewItem
from api.adjudication.use_cases import (
    assign_review,
    assignees,
    finish_review,
    presented_review_items,
    queue_filter,
    release_review,
    reviewed_today,
    skip_review,
    walk_step,
)
from api.http.same_origin import foreign_page
from api.service.errors import InvalidRequest
from api.service.schemas import GradingPublic
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from judge.review_reasons import ReviewReason

__all__ = [
    "assign_from_page",
    "carried_walk",
    "claim_withheld",
    "finish_from_page",
    "home",
    "next_item",
    "queue_page",
    "skip_from_page",
    "walk_query",
]

#: the queue page lists this many items at most (its counts are of the whole queue)
QUEUE_WINDOW = 500


async def _items(
    services: Services, who: SignedIn, filters: dict[str, Any]
) -> tuple[list[tuple[GradingPublic, ReviewItem]], QueueCounts]:
    """The first ``QUEUE_WINDOW`` items of the queue under ``filters`` (every one applied
    before the window), each with its grading object, and the counts of the whole
    filtered queue, in one snapshot."""
    queue = await presented_review_items(
        services, who.principal, _queue_filter(who, filters), limit=QUEUE_WINDOW
    )
    rows = [(g, item) for g, item in queue.items if isinstance(g, GradingPublic)]
    return rows, queue.counts


#: the queue's filters, as the queue page takes them and as a walk carries them (``q.``)
_FILTERS = ("agent", "model", "scenario_id", "reason", "judge", "provisional", "assigned")
#: how long the first line of a diagnosis may be on the queue page
_SNIPPET = 140


def _filters(params: Mapping[str, str], prefix: str = "") -> dict[str, Any]:
    """The queue's filters from query parameters (``prefix``: ``q.`` on a walk);
    InvalidRequest naming ``provisional`` for a value other than ``true`` or ``false``
    (never read as another filter)."""
    values: dict[str, Any] = {name: params.get(prefix + name) or None for name in _FILTERS}
    provisional = values["provisional"]
    if provisional not in (None, "true", "false"):
        field = prefix + "provisional"
        raise InvalidRequest(f"{field} must be true or false", field=field)
    values["provisional"] = None if provisional is None else provisional == "true"
    values["assigned"] = "me" if values["assigned"] == "me" else None  # the one choice
    return values


def _queue_filter(who: SignedIn, filters: Mapping[str, Any]) -> QueueFilter:
    """The queue's filter of the page's filters (see :func:`_filters`)."""
    return queue_filter(
        who.principal,
        agent=filters["agent"],
        scenario_id=filters["scenario_id"],
        reason=filters["reason"],
        assigned_to_me=filters["assigned"] == "me",
        model=filters["model"],
        judge=filters["judge"],
        provisional=filters["provisional"],
    )


def walk_query(
    filters: Mapping[str, Any],
    key: str | None = None,
    seen: int = 0,
    left: int | None = None,
) -> str:
    """The query string a walk through the queue carries from item to item: the filters
    (``q.agent``...), the item's place in the queue's order (``q.key``, signed; none
    before the first item), how many items this pass has opened (``q.seen``) and how many
    were queued behind this one when it was opened (``q.left``)."""
    params = {f"q.{k}": str(v).lower() if isinstance(v, bool) else v for k, v in filters.items()}
    walk: dict[str, Any] = {}
    if key is not None:
        walk["q.key"] = key
    if seen:
        walk["q.seen"] = seen
    if left is not None:
        walk["q.left"] = left
    return urlencode({**{k: v for k, v in params.items() if v is not None}, **walk})


def carried_walk(params: Mapping[str, str]) -> dict[str, str]:
    """The walk (the ``q.`` parameters of :func:`walk_query`) that a page's address or a
    form sent from it carried, to carry on to the page that comes next."""
    return {k: v for k, v in params.items() if k.startswith("q.")}


def claim_withheld(request: Request[Any, Any, Any]) -> str:
    """Why opening a page neither claims nor gives back an item: it was opened from a page
    of another origin, as the browser says (:func:`api.http.same_origin.foreign_page`,
    the judgment the workbench's forms pass), which must not claim items in the
    signed-in adjudicator's name. Empty when this origin's page or the user opened it."""
    sender = foreign_page(request)
    if sender is None:
        return ""
    return f"Opened from {sender}: not claimed. Open it from the queue to claim it."


def _snippet(diagnosis: str) -> str:
    """The first non-empty line of a diagnosis, cut to ``_SNIPPET`` characters."""
    first = next((line.strip() for line in diagnosis.splitlines() if line.strip()), "")
    return first if len(first) <= _SNIPPET else first[: _SNIPPET - 1] + "…"


def _age(since: datetime, now: datetime) -> str:
    """How long ago ``since`` was, in the largest whole unit: 40 s, 12 min, 3 h, 5 d."""
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


@get("/queue", guards=[web_require("adjudicator")], include_in_schema=False)
async def queue_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    end: FromQuery[bool] = False,
) -> Template:
    """Gradings that need a human, most urgent first, with how many the filtered queue
    holds in all and per reason (every item, also past the ``QUEUE_WINDOW`` rows listed,
    which the page then says); each row with its agent, model, scenario, age (since the
    item was first listed: a promoted regrade keeps it), the
    diagnosis' first line, its reasons and who holds it; how many were reviewed today.
    ``end``: a walk reached the queue's end."""
    params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
    filters = _filters(params)
    rows, counts = await _items(services, who, filters)
    people = await assignees(services)
    now = services.store.db.clock()
    done = await reviewed_today(
        services, agent=filters["agent"], scenario_id=filters["scenario_id"]
    )
    return page(
        "queue.html",
        who,
        rows=[
            (
                g,
                item,
                verdict_label(g),
                _snippet(g.submission.diagnosis),
                _age(item.grading.listed_at, now),
                walk_query(filters, item.key, 1, counts.total - position - 1),
            )
            for position, (g, item) in enumerate(rows)
        ],
        total=counts.total,
        # each reason's count narrows this view: its link keeps the other filters
        counts=[
            (
                r.value,
                counts.by_reason.get(r.value, 0),
                urlencode({**_shown(filters), "reason": r.value}),
            )
            for r in ReviewReason
        ],
        reasons=[r.value for r in ReviewReason],
        filters=filters,
        reviewed_today=done,
        start=walk_query(filters),
        end=end,
        assignees=people,
        now=now,
    )


@get("/queue/next", guards=[web_require("adjudicator")], include_in_schema=False)
async def next_item(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    after: FromQuery[str | None] = None,
) -> Redirect:
    """The next item of a walk through the filtered queue (``q.`` parameters), claimed on
    opening. A walk moves forward from the item it left (``after``, whose place in the
    queue's order ``q.key`` carries) to the first item queued behind that place, however
    far down the queue and however the items before it moved meanwhile: a skipped item
    is not visited again in the same pass, and when the item has left the queue
    (finished) the one behind it comes next. An item walked past is given back (its
    claim released), so others may take it at once, wherever it is queued now (also
    where a promoted regrade moved it to another tier or verdict, or out of the walk's
    filter, while it was open); not when a page of another origin sent the request
    (:func:`claim_withheld`). At the end: the queue, saying so."""
    params = {k: v for k, v in request.query_params.items() if isinstance(v, str)}
    filters = _filters(params, "q.")
    try:
        seen = max(int(params.get("q.seen", "0")), 0)
    except ValueError:
        seen = 0
    step, passed = await walk_step(
        services, who.principal, _queue_filter(who, filters), key=params.get("q.key"), after=after
    )
    # walked past, not finished: give it back (unless another origin's page sent us here)
    if passed is not None and not claim_withheld(request):
        await release_review(services, who.principal, passed)
    if step is not None:
        query = walk_query(filters, step.key, seen + 1, step.left)
        return Redirect(f"/gradings/{step.grading_id}?claim=true&{query}", status_code=303)
    return Redirect("/queue?" + urlencode({**_shown(filters), "end": "true"}), status_code=303)


def _shown(filters: Mapping[str, Any]) -> dict[str, str]:
    """The filters that are set, as the queue page's query parameters."""
    kept = {k: v for k, v in filters.items() if v is not None}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in kept.items()}


def _onward(grading_id: str, form: Mapping[str, str]) -> Redirect:
    """On to the item after ``grading_id`` in the walk the form carried (``q.``)."""
    query = urlencode({"after": grading_id, **carried_walk(form)})
    return Redirect(f"/queue/next?{query}", status_code=303)


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
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect:
    """The item leaves the queue; on to the next one of the walk the form carried. From a
    page opened before a promoted regrade superseded the grading: 409 naming the
    grading in force, which the queue holds instead."""
    await finish_review(services, who.principal, grading_id)
    return _onward(grading_id, data)


@post(
    "/gradings/{grading_id:str}/skip",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def skip_from_page(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect:
    """Skip the item (the form's ``note``, optional, is left for other adjudicators) and
    go on to the next one of the walk the form carried: the walk moves forward, so the
    skipped item is not visited again in this pass. On a grading a promoted regrade
    superseded: 409 naming the grading in force."""
    await skip_review(services, who.principal, grading_id, note=data.get("note"))
    return _onward(grading_id, data)


@post(
    "/gradings/{grading_id:str}/assign",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def assign_from_page(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect:
    """Assign the item to the form's ``assignee`` (a token id; empty unassigns), then
    back to the queue under the filters the form carried (``q.``), read first: filters
    sent wrong (a 422) assign nothing."""
    back = _shown(_filters(data, "q."))
    await assign_review(services, who.principal, grading_id, data.get("assignee") or None)
    return Redirect(f"/queue?{urlencode(back)}#row-{grading_id}", status_code=303)


@get("/", guards=[web_require("submitter")], include_in_schema=False)
async def home(who: NamedDependency[SignedIn]) -> Redirect:
    """Adjudicators start at the queue, submitters at their gradings."""
    target = "/queue" if who.principal.at_least("adjudicator") else "/gradings"
    return Redirect(target, status_code=303)
