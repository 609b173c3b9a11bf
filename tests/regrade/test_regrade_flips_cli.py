"""``sre-judge regrade flips`` as tables (the default on a terminal), with the paired test
of the pass rates before and after; JSON stays the default for scripts."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest
from sqlalchemy.engine import Engine

from storage import Store
from tests.support.gradings import add_many, shadow_regrade
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key


async def _job_failing_nine_of_ten(engine: Engine) -> str:
    """10 attempts passed by the judge; a new judge passes 1 and fails 9 in a shadow
    regrade: 9 pass->fail flips, none the other way."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 10}, agent="stratus-gpt-4o-mini-diagnoser-v2")
    return await shadow_regrade(store, passing=1)


def _env(database_url: str, columns: int) -> dict[str, str]:
    return {"NO_COLOR": "1", "COLUMNS": str(columns), "SRE_JUDGE_DATABASE_URL": database_url}


async def test_flips_as_a_table_with_the_paired_test_at_80_columns(
    database_url: str, engine: Engine
) -> None:
    job_id = await _job_failing_nine_of_ten(engine)

    done = cli_in_process(
        "regrade", "flips", job_id, "--format", "table", env=_env(database_url, 80)
    )

    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in text
    assert "pass rate old -> new" in text and "Flipped verdicts (pass->fail 9" in text
    new_minus_old = next(line for line in text.splitlines() if line.startswith("new - old"))
    assert "-0.900" in new_minus_old and "0.00391" in new_minus_old  # p = 2 / 2^9
    assert "mcnemar-exact" in new_minus_old
    words = " ".join(text.split())  # notes wrap at the terminal's width
    assert "McNemar's exact p-value (paired: the same 10 submissions" in words
    assert "95% CI" in text and "Answers per question" in text and "Agreement" in text


async def test_flips_off_a_terminal_stay_json_and_carry_the_paired_difference(
    database_url: str, engine: Engine
) -> None:
    job_id = await _job_failing_nine_of_ten(engine)

    done = cli_in_process("regrade", "flips", job_id, env=_env(database_url, 80))

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pass_to_fail"]["count"] == 9
    rates = report["pass_rates"]
    assert (rates["old"]["successes"], rates["new"]["successes"], rates["old"]["n"]) == (10, 1, 10)
    change = rates["new_minus_old"]
    assert (change["design"], change["test"]) == ("paired", "mcnemar-exact")
    assert change["p_value"] == pytest.approx(2 / 2**9, rel=1e-12)
    assert change["estimate"] == pytest.approx(-0.9)


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``sre-judge ARGS`` in its own process with stdout on a pseudo-terminal."""
    main, child = pty.openpty()
    code = "from api.cli.main import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=child,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
    )
    os.close(child)
    output = bytearray()
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child's side closed: all read
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(main)
    assert process.stderr is not None
    process.stderr.close()
    return process.returncode, output.decode().replace("\r\n", "\n")


@pytest.mark.slow  # a real process on a pseudo-terminal; the table itself is tested in process
async def test_flips_default_to_a_table_on_a_terminal(database_url: str, engine: Engine) -> None:
    job_id = await _job_failing_nine_of_ten(engine)

    status, text = _on_a_terminal(["regrade", "flips", job_id], _env(database_url, 80))

    assert status == 0, text
    assert "pass rate old -> new" in text and "mcnemar-exact" in text
    assert not text.lstrip().startswith("{")
