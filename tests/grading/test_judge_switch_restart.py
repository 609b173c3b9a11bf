"""The operator's path, as real processes: serve without the judge, submit, restart with another.

The restart itself is what is under test here (``test_judge_switch`` covers the same
rules in process): ``sre-judge serve`` with the default judge on an address where nothing
listens, then ``sre-judge serve`` again with ``SRE_JUDGE_JUDGE`` pointing at a real
OpenAI-compatible judge server. Every pending grading is graded once, by the new judge,
each move is in the audit log, and ``sre-judge audit verify`` passes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import running_judge_server, sregym_reply
from tests.support.service_process import serving
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH

pytestmark = [pytest.mark.slow, pytest.mark.postgres]  # two `sre-judge serve` processes, about 20 s

OLD = "ollama:qwen2.5:7b-instruct@http://127.0.0.1:9"


def _token(env: dict[str, str], role: str) -> dict[str, str]:
    done = cli_in_process("tokens", "create", "--role", role, "--name", f"switch-{role}", env=env)
    assert done.returncode == 0, done.stderr
    return {"Authorization": f"Bearer {done.stdout.strip()}"}


def _until(url: str, ids: list[str], headers: dict[str, str], check: Any) -> list[Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        gradings = [httpx.get(f"{url}/v1/gradings/{i}", headers=headers).json() for i in ids]
        if all(check(g) for g in gradings):
            return gradings
        time.sleep(0.2)
    raise AssertionError(f"never reached: {gradings}")


def test_a_restart_with_another_judge_grades_what_the_old_one_left_pending(
    database_url: str, tmp_path: Path
) -> None:
    env = {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": OLD,
        "SRE_JUDGE_JUDGE_MAX_ATTEMPTS": "1",
        "SRE_JUDGE_POLL_SECONDS": "0.1",
    }
    submitter, adjudicator = _token(env, "submitter"), _token(env, "adjudicator")
    with serving(env, tmp_path / "without-judge.log") as service:
        ids = []
        for n in range(3):
            body = {"diagnosis": f"{DIAGNOSIS} #{n}", "ground_truth": TRUTH}
            answer = httpx.post(f"{service.url}/v1/submissions", json=body, headers=submitter)
            assert answer.status_code == 202, answer.text
            ids.append(answer.json()["id"])
        _until(service.url, ids, submitter, lambda g: g["pending_reason"])
        stuck = httpx.get(f"{service.url}/readyz")
    assert stuck.status_code == 503 and stuck.json()["queue"]["pending"] == 3

    reply = sregym_reply(set(IDS), evidence="sets USER_PORT=9999")
    with running_judge_server(default=reply) as judge:
        restart = {**env, "SRE_JUDGE_JUDGE": f"openai:new-judge@{judge.openai_url}"}
        with serving(restart, tmp_path / "new-judge.log") as service:
            gradings = _until(service.url, ids, submitter, lambda g: g["status"] != "pending")
            histories = [
                httpx.get(f"{service.url}/v1/gradings/{i}/history", headers=adjudicator).json()
                for i in ids
            ]
            ready = httpx.get(f"{service.url}/readyz")
        asked = len(judge.requests)

    assert {(g["status"], g["judge"]["model"]) for g in gradings} == {("graded", "new-judge")}
    assert asked == 3  # once each
    for history in histories:  # each grading's move, on record
        moved = [e for e in history["events"] if e["event"] == "grading.judge_moved"]
        assert [(e["payload"]["from"], e["payload"]["to"]) for e in moved] == [
            (OLD, restart["SRE_JUDGE_JUDGE"])
        ]
    assert ready.status_code == 200, ready.text
    verified = cli_in_process("audit", "verify", env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
