"""A scripted adjudicator's keyboard-only walk through a filtered queue of 20 items in a
real browser (Debian's chromium through Playwright, as in ``test_browser``): each item is
visited exactly once; five are overridden with a canned reason (``↓`` in the reason
field), five skipped with a note, five skipped without one, five passed over with ``n``.

The walk writes its figures (keys per override, seconds per item) to ``queue-walk.json``
in the test's folder and prints them (``-s``); nothing asserts a time: speed figures are
not test verdicts.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.service_process import ServiceProcess
from tests.web.test_browser import (
    DIAGNOSIS,
    _browser_or_skip,
    _page,
    _sign_in,
    _submit,
    browser,
    served_workbench,
)

__all__ = ["browser"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: items of the filtered queue, and of another agent's outside the filter
WALKED, OUTSIDE = 20, 3
#: what the adjudicator does with each item, in turn
PLAN = ("override", "skip-note", "next", "skip") * 5
#: the keys of each action, from the item's page to the next item's
KEYS = {
    # the first question (the decisive "no"), its reason field, the first canned reason,
    # save; the page comes back saying so; then the next item
    "override": (["j", "o", "ArrowDown", "Enter"], ["n"]),
    "skip": (["s", "Enter"],),
    "next": (["n"],),
}


def _note(index: int) -> str:
    return f"needs a Kafka person {index}"


@pytest.fixture
def queue_of_twenty(database_url: str, tmp_path: Path) -> Iterator[tuple[ServiceProcess, Any]]:
    """A service whose queue holds 20 of agent "beta"'s failing gradings (decisive: one
    answer flips them) and three of "alpha"'s; Ada's token."""
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"))
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, _, tokens):
        made: dict[str, list[str]] = defaultdict(list)
        for n in range(WALKED + OUTSIDE):
            agent = "beta" if n < WALKED else "alpha"
            text = f"{DIAGNOSIS} Attempt {n}."
            made[agent].append(_submit(service.url, tokens["agent"], text, agent))
        yield service, (tokens, made)


def _press(page: Any, keys: list[str]) -> int:
    """Press ``keys``; the last one navigates (the page waits for it). Returns the count."""
    for key in keys[:-1]:
        page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press(keys[-1])
    return len(keys)


def _opened(page: Any) -> str:
    return str(page.url.split("/gradings/", 1)[1].split("?", 1)[0])


def test_a_keyboard_walk_through_twenty_items_visits_each_once(
    queue_of_twenty: tuple[ServiceProcess, Any], browser: Any, tmp_path: Path
) -> None:
    service, (tokens, made) = queue_of_twenty
    outside: list[str] = []
    page = _page(browser, service.url, outside)
    _sign_in(page, tokens["Ada"])
    page.goto("/queue?agent=beta")
    assert page.text_content("[data-testid=progress] strong") == str(WALKED)

    visited: list[str] = []
    seconds: dict[str, list[float]] = defaultdict(list)
    keys: dict[str, list[int]] = defaultdict(list)
    started = time.perf_counter()
    _press(page, ["n"])  # the first item of the filtered queue
    for index, action in enumerate(PLAN):
        grading = _opened(page)
        assert grading not in visited, f"{grading} visited twice: {visited}"
        visited.append(grading)
        # the pass counts the items it opened (overridden ones left the queue, the skipped
        # ones stay behind the walk): what is after this one is what is left to visit
        where = f"item {index + 1} of this pass · {WALKED - index - 1} more in the queue after it"
        assert where in page.text_content("[data-testid=walk-position]")
        arrived = time.perf_counter()
        if action == "override":
            pressed = _press(page, KEYS["override"][0])
            assert "Saved." in page.text_content("[data-testid=saved]")
            assert "overridden (judge: no)" in page.text_content("#q-D1-Q1")
            assert page.text_content("[data-testid=effective-verdict]") == "PASS"
            keys["override"].append(pressed)
            pressed += _press(page, KEYS["override"][1])
        elif action == "skip-note":
            pressed = _press(page, ["s", *_note(index), "Enter"])
        else:
            pressed = _press(page, list(KEYS[action][0]))
        seconds[action].append(time.perf_counter() - arrived)
        keys[f"{action} (item)"].append(pressed)
    walked = time.perf_counter() - started

    assert page.url.endswith("/queue?agent=beta&end=true")
    assert page.locator("[data-testid=walk-end]").is_visible()
    assert sorted(visited) == sorted(made["beta"]) and len(set(visited)) == WALKED
    # the overridden items left the queue; the skipped ones stay, with their notes
    rows = page.locator("[data-testid=queue] tbody tr[data-grading]")
    assert rows.count() == WALKED - PLAN.count("override")
    for index, action in enumerate(PLAN):
        if action == "skip-note":
            note = page.text_content(f"tr[data-grading='{visited[index]}'] [data-testid=skip-note]")
            assert note is not None and _note(index) in note and "Skipped by Ada" in note
    page.screenshot(path=str(tmp_path / "queue-after-walk.png"), full_page=True)

    figures = {
        "items": WALKED,
        "keys_per_override": sorted(set(keys["override"])),
        "keys_per_overridden_item_with_next": sorted(set(keys["override (item)"])),
        "keys_per_skip_with_note": sorted(set(keys["skip-note (item)"])),
        "seconds_per_item": round(walked / WALKED, 2),
        "seconds_per_item_by_action": {
            action: round(sum(times) / len(times), 2) for action, times in seconds.items()
        },
        "walk_seconds": round(walked, 1),
    }
    (tmp_path / "queue-walk.json").write_text(json.dumps(figures, indent=1))
    print("queue walk:", json.dumps(figures))
    assert figures["keys_per_override"] == [4] and outside == []
