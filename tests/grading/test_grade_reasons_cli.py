"""``sre-judge grade --format table`` says why code did not take a judge's yes: which
check vetoed or flagged it and what it looked for, and why a quote does not count.
In process, against a real local judge server."""

from __future__ import annotations

import json

from click.testing import CliRunner

from api.cli.main import main
from tests.support.judge_server import running_judge_server

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
#: gives the fault's value but never names user-service
UNNAMED = "The frontend fails: the USER_PORT variable is 9999 instead of 8086."
QUOTE = "the USER_PORT variable is 9999"
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


def _yes_to_all() -> str:
    """SREGym's reply format: yes to every question, no quote for D3-Q2."""
    items = [
        {"id": q, "answer": "Yes", "evidence": "" if q == "D3-Q2" else QUOTE, "confidence": "High"}
        for q in IDS
    ]
    return json.dumps(items)


def _rows(out: str) -> dict[str, str]:
    """Each question's table row (with its folded continuation lines) as one string."""
    rows: dict[str, str] = {}
    current = None
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│┃|").split("│")]
        if cells and cells[0] in IDS:
            current = cells[0]
        elif cells and cells[0] and not cells[0].startswith(("─", "━")):
            current = None
        if current:
            rows[current] = " ".join(f"{rows.get(current, '')} {' '.join(cells)}".split())
    return rows


def test_the_table_names_the_check_that_vetoed_a_yes_and_what_it_looked_for() -> None:
    with running_judge_server([_yes_to_all()]) as server:
        done = CliRunner().invoke(
            main,
            [
                "grade", "--format", "table", "--judge", f"openai:m@{server.openai_url}",
                "--ground-truth", TRUTH, "--diagnosis", UNNAMED,
            ],
            env={"NO_COLOR": "1", "COLUMNS": "240"},
        )  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = _rows(done.output)
    assert "check in code" in done.output
    vetoed = rows["D1-Q1"]
    assert "no (judge: yes)" in vetoed
    assert "vetoed grounding.component: the diagnosis does not name deployment/user-service" in (
        vetoed
    )
    assert (
        "vetoed grounding.origin_consistent: nothing in the diagnosis points at" in (rows["D1-Q2"])
    )
    empty = rows["D3-Q2"]
    assert "not found: the judge quoted nothing from the diagnosis" in empty
    assert "flagged evidence.empty" in empty
    assert "vetoed" not in rows["D2-Q1"] and "flagged" not in rows["D2-Q1"]
