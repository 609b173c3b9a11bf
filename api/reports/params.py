"""Query parameters of the report routes: filters, ``group_by`` and the arms of a comparison."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, cast

from litestar.params import FromQuery, QueryParameter
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.http.problems import ApiProblem
from api.reports.filter_scope import Include, Inline, Provisional
from api.reports.filters import GROUP_KEYS, GroundTruthSource, GroupKey, ReportFilter
from api.reports.models import ARM_FIELDS

__all__ = [
    "ARM_FIELDS",
    "ArmQuery",
    "GroupByParam",
    "arm_filters",
    "comma_list_param",
    "parse_comma_list",
    "parse_group_by",
    "report_filter",
]

_TEXT = Field(default=None, min_length=1, max_length=300)


class ArmQuery(BaseModel):
    """The filter of one arm of a comparison (``a.agent=...``, ``b.model=...``)."""

    model_config = ConfigDict(extra="forbid")

    agent: str | None = _TEXT
    model: str | None = _TEXT
    scenario_id: str | None = _TEXT
    run_id: str | None = _TEXT
    rubric: str | None = _TEXT
    judge: str | None = _TEXT
    created_after: datetime | None = None
    created_before: datetime | None = None
    ground_truth_source: GroundTruthSource | None = None
    scenario_set: str | None = Field(default=None, min_length=1, max_length=64)
    include: Include | None = None
    provisional: Provisional | None = None
    inline: Inline | None = None

    def to_filter(self) -> ReportFilter:
        """The store's filter."""
        return ReportFilter(**self.model_dump())


async def report_filter(
    agent: FromQuery[str | None] = None,
    model: FromQuery[str | None] = None,
    scenario_id: FromQuery[str | None] = None,
    run_id: FromQuery[str | None] = None,
    rubric: FromQuery[str | None] = None,
    judge: FromQuery[str | None] = None,
    created_after: FromQuery[datetime | None] = None,
    created_before: FromQuery[datetime | None] = None,
    ground_truth_source: FromQuery[GroundTruthSource | None] = None,
    scenario_set: FromQuery[str | None] = None,
    include: FromQuery[Include | None] = None,
    provisional: FromQuery[Provisional | None] = None,
    inline: FromQuery[Inline | None] = None,
) -> ReportFilter:
    """Dependency: the gradings a report covers (``rubric`` as id or id@version,
    ``judge`` as model or backend:model; ``created_after`` inclusive;
    ``ground_truth_source=scenario`` leaves out ground truths their submitters wrote;
    ``scenario_set`` keeps scenarios of one set, e.g. ``held-out``;
    ``include=shadow`` adds shadow-regrade gradings; ``provisional=exclude|only``;
    ``inline=include`` mixes gradings against their submitters' own ground truths into
    the figures, which reports count apart by default)."""
    return ReportFilter(
        agent=agent,
        model=model,
        scenario_id=scenario_id,
        run_id=run_id,
        rubric=rubric,
        judge=judge,
        created_after=created_after,
        created_before=created_before,
        ground_truth_source=ground_truth_source,
        scenario_set=scenario_set,
        include=include,
        provisional=provisional,
        inline=inline,
    )


def comma_list_param(names: Sequence[str], description: str) -> Any:
    """A query parameter holding a comma-separated list of ``names`` (repeats allowed),
    documented with the pattern :func:`parse_comma_list` applies."""
    word = f"(?:{'|'.join(re.escape(n) for n in names)})"
    pattern = f"^(?:{word}(?:,{word})*)?$"
    return QueryParameter(description=description, schema_extra={"pattern": pattern})


def parse_comma_list(value: str | None, names: Sequence[str], field: str) -> list[str]:
    """``"agent,model,agent"`` -> ``["agent", "model"]``; 422 naming ``field`` when a part
    is not one of ``names``."""
    parts = value.split(",") if value else []
    unknown = [part for part in parts if part not in names]
    if unknown:
        raise ApiProblem(
            422,
            "Invalid request",
            f"{field}: {unknown[0]!r} is not one of {', '.join(names)}",
            field=field,
        )
    return list(dict.fromkeys(parts))


GroupByParam = Annotated[
    str | None,
    comma_list_param(GROUP_KEYS, "comma-separated among " + ", ".join(GROUP_KEYS)),
]


def parse_group_by(value: str | None) -> list[GroupKey]:
    """``"agent,model"`` -> ``["agent", "model"]``; 422 naming ``group_by`` otherwise."""
    return [cast(GroupKey, n) for n in parse_comma_list(value, GROUP_KEYS, "group_by")]


def _arm(prefix: str, params: Mapping[str, Sequence[str]]) -> ReportFilter:
    values = {
        k.removeprefix(f"{prefix}."): v[-1] for k, v in params.items() if k.startswith(f"{prefix}.")
    }
    if not values:
        raise ApiProblem(
            422,
            "Invalid request",
            f"arm {prefix} needs at least one filter, e.g. {prefix}.agent=...",
            field=f"{prefix}.*",
        )
    try:
        return ArmQuery.model_validate(values).to_filter()
    except ValidationError as exc:
        error = exc.errors()[0]
        field = f"{prefix}.{'.'.join(str(p) for p in error['loc'])}"
        raise ApiProblem(422, "Invalid request", f"{field}: {error['msg']}", field=field) from None


def arm_filters(
    params: Mapping[str, Sequence[str]], *, allowed: Sequence[str] = ("verdicts",)
) -> tuple[ReportFilter, ReportFilter]:
    """The filters of arms ``a`` and ``b`` from query parameters ``a.<field>``, ``b.<field>``."""
    for name in params:
        if not name.startswith(("a.", "b.")) and name not in allowed:
            raise ApiProblem(
                422,
                "Invalid request",
                f"unknown parameter {name!r}: use a.<field> and b.<field>, "
                f"fields {', '.join(ARM_FIELDS)}",
                field=name,
            )
    return _arm("a", params), _arm("b", params)
