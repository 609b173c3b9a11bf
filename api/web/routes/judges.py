"""Judges and their calibration runs: which judge identities are qualified, which are
provisional (never calibrated, or their latest run did not qualify them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from litestar import get
from litestar.di import NamedDependency
from litestar.response import Template

from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from judge.spec import judge_identity
from storage.quality_tables import CalibrationRunRecord

__all__ = ["JudgeRuns", "judges_page"]


@dataclass
class JudgeRuns:
    """One judge identity (spec, settings, rubric version, asking mode) and its runs."""

    judge: str
    rubric: str
    asking_mode: str
    settings: str
    runs: list[CalibrationRunRecord] = field(default_factory=list)

    @property
    def qualified(self) -> bool:
        """The latest run decides, as it does for gradings."""
        return bool(self.runs) and self.runs[0].qualified


def _grouped(runs: list[CalibrationRunRecord]) -> list[JudgeRuns]:
    groups: dict[tuple[str, ...], JudgeRuns] = {}
    for run in runs:  # newest first, so each group's first run is its latest
        settings = json.dumps(run.judge_settings, sort_keys=True)
        key = (run.judge_spec, f"{run.rubric_id}@{run.rubric_version}", run.asking_mode, settings)
        groups.setdefault(key, JudgeRuns(*key)).runs.append(run)
    return list(groups.values())


@get("/judges", guards=[web_require("adjudicator")], include_in_schema=False)
async def judges_page(
    services: NamedDependency[Services], who: NamedDependency[SignedIn]
) -> Template:
    """Calibration runs per judge, each judge qualified or provisional."""
    judges = _grouped(await services.store.calibration.recent(limit=500))
    configured = judge_identity(services.settings.judge)
    return page(
        "judges.html",
        who,
        judges=judges,
        configured=configured,
        configured_runs=any(j.judge == configured for j in judges),
    )
