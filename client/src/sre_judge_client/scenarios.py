"""``client.scenarios``: list, load in bulk, read with their versions, update.

The same methods on :class:`Scenarios` (``Client``) and :class:`AsyncScenarios`
(``AsyncClient``, awaited; its listings are async iterators). Reading ground truths and
versions needs an adjudicator's token, writing an admin's; errors raise the client's
:class:`~sre_judge_client.ApiError` kinds (a stale version
:class:`~sre_judge_client.PreconditionFailed`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sre_judge_client import _calls
from sre_judge_client._core import AsyncSendFor, SendFor
from sre_judge_client._uploads import load_body
from sre_judge_client.models import (
    Scenario,
    ScenarioLoadItem,
    ScenarioLoadReport,
    ScenarioPage,
    ScenarioVersion,
    ScenarioVersions,
)

__all__ = ["AsyncScenarios", "Scenarios"]

#: what a bulk load takes: a file, its text or bytes, or the scenarios themselves
LoadData = Path | str | bytes | list[dict[str, Any]]


def _filters(
    scenario_set: str | None,
    id_prefix: str | None,
    created_after: datetime | None,
    created_before: datetime | None,
) -> dict[str, Any]:
    return {
        "set": scenario_set,
        "id_prefix": id_prefix,
        "created_after": created_after,
        "created_before": created_before,
    }


def _update_body(
    current: Scenario | None, ground_truth: str | None, **fields: Any
) -> dict[str, Any]:
    """The body of an update: the ground truth given, else the current one kept."""
    if ground_truth is None and current is not None:
        ground_truth = current.ground_truth
    if fields.get("tags") is not None:
        fields["tags"] = list(fields["tags"])
    return {"ground_truth": ground_truth, **fields}


class Scenarios:
    """The scenario calls of a :class:`~sre_judge_client.Client` (``client.scenarios``)."""

    def __init__(self, send_for: SendFor) -> None:
        """Send through ``send_for`` (the client's, with its retries and its reading of
        each answer as the model asked for)."""
        self._send_for = send_for

    def pages(
        self,
        *,
        scenario_set: str | None = None,
        id_prefix: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        cursor: str | None = None,
        page_size: int = 100,
    ) -> Iterator[ScenarioPage]:
        """Pages of scenarios in id order, each fetched as you iterate, from ``cursor``
        (a page's ``next_cursor``) or the first; ``scenario_set`` is the ``set`` filter."""
        filters = _filters(scenario_set, id_prefix, created_after, created_before)
        while True:
            page = self._send_for(ScenarioPage, _calls.list_scenarios(filters, cursor, page_size))
            yield page
            cursor = page.next_cursor
            if not cursor:
                return

    def list(self, **filters: Any) -> Iterator[Scenario]:
        """Every scenario of :meth:`pages` (same filters), one at a time."""
        for page in self.pages(**filters):
            yield from page.items

    def load(self, data: LoadData, *, format: str | None = None) -> ScenarioLoadReport:
        """Create or update many scenarios at once (admin; loading again changes nothing).

        ``data``: a JSONL, YAML or JSON file (format from its suffix), text or bytes with
        ``format`` (``jsonl``, ``yaml`` or ``json``), or a list of scenario dicts."""
        content, fmt = load_body(data, format)
        return self._send_for(ScenarioLoadReport, _calls.load_scenarios(content, fmt))

    def get(self, scenario_id: str) -> Scenario:
        """One scenario; ``revision`` is the ``If-Match`` of its updates."""
        return self._send_for(Scenario, _calls.get_scenario(scenario_id))

    def versions(self, scenario_id: str) -> ScenarioVersions:
        """Every version of its ground truth, oldest first."""
        return self._send_for(ScenarioVersions, _calls.get_scenario(scenario_id, "/versions"))

    def version(self, scenario_id: str, version: int) -> ScenarioVersion:
        """One version of its ground truth."""
        call = _calls.get_scenario(scenario_id, f"/versions/{int(version)}")
        return self._send_for(ScenarioVersion, call)

    def update(
        self,
        scenario_id: str,
        *,
        ground_truth: str | None = None,
        revision: int | None = None,
        title: str | None = None,
        tags: Sequence[str] | None = None,
        scenario_set: str | None = None,
        note: str | None = None,
        version: int | None = None,
    ) -> ScenarioLoadItem:
        """A new ground truth (a new version; ``note`` says why) or new metadata (admin).

        ``revision`` is the one you read (sent as ``If-Match``; every change of the
        scenario moves it); without it, or without ``ground_truth``, the scenario is read
        first. A stale revision raises :class:`~sre_judge_client.PreconditionFailed`.
        ``version`` is taken where no ``revision`` is given, as older clients sent it:
        the same number until a title, tag list or set is changed in place."""
        need = (revision is None and version is None) or ground_truth is None
        current = self.get(scenario_id) if need else None
        expected = _calls.expected_revision(revision, version, current)
        body = _update_body(current, ground_truth, title=title, tags=tags, set=scenario_set,
                            note=note)  # fmt: skip
        call = _calls.update_scenario(scenario_id, expected, body)
        return self._send_for(ScenarioLoadItem, call)


class AsyncScenarios:
    """The scenario calls of an :class:`~sre_judge_client.AsyncClient`, awaited."""

    def __init__(self, send_for: AsyncSendFor) -> None:
        """Send through ``send_for`` (the client's, as :class:`Scenarios` does)."""
        self._send_for = send_for

    async def pages(
        self,
        *,
        scenario_set: str | None = None,
        id_prefix: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        cursor: str | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[ScenarioPage]:
        """Pages of scenarios in id order (see :meth:`Scenarios.pages`)."""
        filters = _filters(scenario_set, id_prefix, created_after, created_before)
        while True:
            call = _calls.list_scenarios(filters, cursor, page_size)
            page = await self._send_for(ScenarioPage, call)
            yield page
            cursor = page.next_cursor
            if not cursor:
                return

    async def list(self, **filters: Any) -> AsyncIterator[Scenario]:
        """Every scenario of :meth:`pages` (same filters), one at a time."""
        async for page in self.pages(**filters):
            for item in page.items:
                yield item

    async def load(self, data: LoadData, *, format: str | None = None) -> ScenarioLoadReport:
        """Create or update many scenarios at once (see :meth:`Scenarios.load`)."""
        content, fmt = load_body(data, format)
        return await self._send_for(ScenarioLoadReport, _calls.load_scenarios(content, fmt))

    async def get(self, scenario_id: str) -> Scenario:
        """One scenario; ``revision`` is the ``If-Match`` of its updates."""
        return await self._send_for(Scenario, _calls.get_scenario(scenario_id))

    async def versions(self, scenario_id: str) -> ScenarioVersions:
        """Every version of its ground truth, oldest first."""
        call = _calls.get_scenario(scenario_id, "/versions")
        return await self._send_for(ScenarioVersions, call)

    async def version(self, scenario_id: str, version: int) -> ScenarioVersion:
        """One version of its ground truth."""
        call = _calls.get_scenario(scenario_id, f"/versions/{int(version)}")
        return await self._send_for(ScenarioVersion, call)

    async def update(
        self,
        scenario_id: str,
        *,
        ground_truth: str | None = None,
        revision: int | None = None,
        title: str | None = None,
        tags: Sequence[str] | None = None,
        scenario_set: str | None = None,
        note: str | None = None,
        version: int | None = None,
    ) -> ScenarioLoadItem:
        """A new ground truth or new metadata (see :meth:`Scenarios.update`)."""
        need = (revision is None and version is None) or ground_truth is None
        current = await self.get(scenario_id) if need else None
        expected = _calls.expected_revision(revision, version, current)
        body = _update_body(current, ground_truth, title=title, tags=tags, set=scenario_set,
                            note=note)  # fmt: skip
        call = _calls.update_scenario(scenario_id, expected, body)
        return await self._send_for(ScenarioLoadItem, call)
