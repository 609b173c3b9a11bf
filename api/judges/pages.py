"""Judges and their calibration runs: which judge identities are qualified, which are
provisional (never calibrated, or their latest run did not qualify them)."""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency
from litestar.response import Template

from api.judges.calibration import judge_runs
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from judge.spec import judge_identity

__all__ = ["judges_page"]


@get("/judges", guards=[web_require("adjudicator")], include_in_schema=False)
async def judges_page(
    services: NamedDependency[Services], who: NamedDependency[SignedIn]
) -> Template:
    """Calibration runs per judge, each judge qualified or provisional."""
    judges = await judge_runs(services)
    configured = judge_identity(services.settings.judge)
    return page(
        "judges.html",
        who,
        judges=judges,
        configured=configured,
        configured_runs=any(j.judge == configured for j in judges),
    )
