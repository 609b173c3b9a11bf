"""How the command line prints a grading's verdict: PASS, FAIL, HELD with its reason, and
NO VERDICT for a graded grading without one, never a fail it was not."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from api.cli.render import render_grading, render_submitter_view


def _grading(passed: bool | None, *, held: bool = False) -> dict[str, Any]:
    return {
        "rubric": {"id": "sregym-rca", "version": "v1"},
        "judge": {"backend": "external", "model": "sregym"},
        "status": "graded",
        "answers": [],
        "held": held,
        "passed": passed,
        "review_reasons": ["judge_not_qualified"] if held else [],
        "dimensions": [{"id": "D1", "yes": 3, "total": 3}],
        "yes_count": 3,
        "composite": None,
        "detail": None,
        "needs_review": held,
        "view": "verdict",
    }


def _printed(render: Any, grading: dict[str, Any]) -> str:
    out = io.StringIO()
    render(grading, Console(file=out, width=200, color_system=None))
    return out.getvalue()


@pytest.mark.parametrize("render", [render_grading, render_submitter_view])
@pytest.mark.parametrize(
    ("passed", "held", "shown"),
    [
        (True, False, "PASS"),
        (False, False, "FAIL"),
        (None, True, "HELD"),
        (None, False, "NO VERDICT"),
    ],
)
def test_the_verdict_printed_is_the_gradings(
    render: Any, passed: bool | None, held: bool, shown: str
) -> None:
    """Each verdict prints as itself; a graded grading with no verdict and not held (an
    SREGym attempt imported with a partial checklist and no success by earlier versions)
    prints NO VERDICT, not FAIL."""
    printed = _printed(render, _grading(passed, held=held))
    assert shown in printed, printed
    if shown != "FAIL":
        assert "FAIL" not in printed, printed
