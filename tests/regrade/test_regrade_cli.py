"""``sre-judge import`` and ``sre-judge regrade`` as a user runs them (in process, for speed)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine

from api.cli.main import main
from storage import Store
from tests.storage.helpers import graded_result, new_submission, sregym_rubric
from tests.support.keys import session_key
from tests.support.sregym_results import write_sregym_results


class _Done:
    """What a test reads of a finished command."""

    def __init__(self, result: Result) -> None:
        self.returncode = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.exception: Any = result.exception


def cli(*args: str, env: dict[str, str], input: str | None = None) -> _Done:
    """Run ``sre-judge ARGS`` in this process with ``env`` set (``input`` on stdin)."""
    return _Done(CliRunner(env=env).invoke(main, list(args), input=input))


def _env(database_url: str) -> dict[str, str]:
    return {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_POLL_SECONDS": "0.05",
        "NO_COLOR": "1",
        "COLUMNS": "160",
    }


def test_import_sregym_then_regrade_with_progress_flips_and_a_free_second_run(
    database_url: str, tmp_path: Path
) -> None:
    env = _env(database_url)
    fixture = write_sregym_results(tmp_path)
    imported = cli(
        "import", "sregym", str(fixture.root), "--problems", str(fixture.problems_file),
        "--format", "table", env=env,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert "imported 45 submissions (42 SREGym verdicts kept" in imported.stdout
    assert "1 deploy_failed, 1 no_submission, 1 timed_out" in imported.stdout

    args = ["regrade", "--judge", "scripted:fail", "--filter-judge", "external:sregym"]
    dry = cli(*args, "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    estimate = json.loads(dry.stdout)
    assert (estimate["state"], estimate["total"], estimate["done"]) == ("done", 42, 0)
    assert estimate["estimate"]["judge_calls"] == 42 and estimate["estimate"]["prompt_tokens"] > 0

    first = cli(*args, "--wait", "--json", env=env)
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout)
    assert (job["state"], job["done"], job["judge_calls"]) == ("done", 42, 42)
    assert "regrading" in first.stderr and "42/42" in first.stderr  # the progress bar

    status = cli("regrade", "status", job["id"], "--format", "table", env=env)
    assert status.returncode == 0 and f"regrade job {job['id']}: done" in status.stdout
    flips = cli("regrade", "flips", job["id"], "--format", "csv", env=env)
    rows = flips.stdout.strip().splitlines()
    assert len(rows) == 43 and sum(",pass->fail," in r for r in rows) == sum(
        fixture.verdicts.values()
    )
    report = json.loads(cli("regrade", "flips", job["id"], env=env).stdout)
    assert report["pass_to_fail"]["count"] == sum(fixture.verdicts.values())

    second = cli(*args, "--wait", "--json", env=env)
    again = json.loads(second.stdout)
    assert (again["judge_calls"], again["cache_hits"], again["done"]) == (0, 42, 42)

    unknown = cli("regrade", "--rubric", "no-such-rubric", env=env)
    assert unknown.returncode == 2 and "rubric" in unknown.stderr
    # an empty rubric names none: a usage error, not a regrade with the default rubric
    empty = cli("regrade", "--rubric", "", "--dry-run", "--json", env=env)
    assert empty.returncode == 2 and "rubric" in empty.stderr and not empty.stdout
    missing = cli("regrade", "status", "nope", env=env)
    assert missing.returncode == 2 and missing.stderr == "error: no regrade job 'nope'\n"


async def _one_grading_by_scripted_pass(engine: Engine) -> None:
    store = Store(engine, key=session_key())
    await store.submissions.create(
        new_submission(), rubric=sregym_rubric(), judge_spec="scripted:pass",
        judge_backend="scripted", judge_model="pass", actor="tok-1",
    )  # fmt: skip
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result())


@pytest.mark.parametrize(
    ("graded_judge", "named"),
    [("", "--graded-judge"), ("  ", "--graded-judge"), ("nonsense", "judge")],
)
def test_regrade_refuses_a_graded_judge_that_names_no_judge(
    database_url: str, engine: Engine, graded_judge: str, named: str
) -> None:
    """``regrade --graded-judge`` given empty (``"$OLD_JUDGE"`` with it unset) or in
    none of a judge's forms is bad usage naming it (exit 2), not a job of no submission;
    the same command without it covers the stored grading."""
    env = _env(database_url)
    asyncio.run(_one_grading_by_scripted_pass(engine))
    base = ["regrade", "--judge", "scripted:fail", "--dry-run", "--format", "json"]
    control = cli(*base, env=env)
    assert control.returncode == 0, control.stderr
    assert json.loads(control.stdout)["total"] == 1
    result = cli(*base, "--graded-judge", graded_judge, env=env)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert named in result.stderr and not result.stdout


def test_import_jsonl_reports_line_numbers_and_strict_imports_nothing(
    database_url: str, tmp_path: Path
) -> None:
    env = _env(database_url)
    path = tmp_path / "history.jsonl"
    path.write_text(
        json.dumps({"diagnosis": "a is down", "ground_truth": "g", "agent": "x"})
        + "\n{broken\n"
        + json.dumps({"diagnosis": "b", "ground_truth": "g", "created_at": "2025-03-01T10:00:00Z"})
        + "\n"
    )
    strict = cli("import", "jsonl", str(path), "--strict", env=env)
    assert strict.returncode == 1
    assert f"{path} line 2: not valid JSON" in strict.stderr and "nothing imported" in strict.stderr
    lenient = cli("import", "jsonl", str(path), "--json", env=env)
    assert lenient.returncode == 1 and f"{path} line 2" in lenient.stderr
    summary = json.loads(lenient.stdout)
    assert (summary["submissions"], summary["queued"]) == (2, 2)
    again = json.loads(cli("import", "jsonl", str(path), "--json", env=env).stdout)
    assert (again["submissions"], again["already_imported"]) == (0, 2)


def test_an_offline_regrade_writes_its_requests_and_grades_from_the_results_file(
    database_url: str, tmp_path: Path
) -> None:
    from tests.support.batch_api import chat_completion
    from tests.support.judge_server import running_judge_server, sregym_reply

    env = _env(database_url)
    fixture = write_sregym_results(tmp_path)
    imported = cli(
        "import", "sregym", str(fixture.root), "--problems", str(fixture.problems_file), env=env
    )
    assert imported.returncode == 0, imported.stderr
    with running_judge_server(default=sregym_reply(set())) as server:
        judge = f"openai:judge-m@{server.openai_url}"
        args = ["regrade", "--judge", judge, "--filter-judge", "external:sregym"]
        refused = cli(*args, "--engine", "offline", "--wait", env=env)
        assert refused.returncode == 2 and "without --wait" in refused.stderr
        started = cli(*args, "--engine", "offline", "--json", env=env)
        assert started.returncode == 0, started.stderr
        job = json.loads(started.stdout)
        assert (job["engine"], job["state"], job["total"]) == ("offline", "queued", 42)

        requests_file = tmp_path / "requests.jsonl"
        written = cli("regrade", "requests", job["id"], "-o", str(requests_file), env=env)
        assert written.returncode == 0, written.stderr
        assert "42 requests written" in written.stderr
        lines = [json.loads(line) for line in requests_file.read_text().splitlines()]
        results = tmp_path / "results.jsonl"
        results.write_text(
            "".join(
                json.dumps(
                    {
                        "id": str(n),
                        "custom_id": line["custom_id"],
                        "response": {
                            "status_code": 200,
                            "request_id": str(n),
                            "body": chat_completion(line["body"]["model"], sregym_reply(set())),
                        },
                        "error": None,
                    }
                )
                + "\n"
                for n, line in enumerate(lines)
            )
        )
        imported_results = cli(
            "regrade", "results", job["id"], str(results), "--wait", "--json", env=env
        )
        assert imported_results.returncode == 0, imported_results.stderr
        done = json.loads(imported_results.stdout)
        assert done["results"]["answered"] == 42
        assert (done["job"]["state"], done["job"]["done"]) == ("done", 42)
        assert done["job"]["batch"]["completed"] == 42

        # the same file again, read from stdin: every reply a duplicate, nothing re-kept
        again = cli(
            "regrade", "results", job["id"], "-", "--format", "table",
            env=env, input=results.read_text(),
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "0 replies kept" in again.stdout and "42 duplicates" in again.stdout
        binary = tmp_path / "binary.jsonl"
        binary.write_bytes(b"\xff\xfe" + results.read_bytes())
        refused = cli("regrade", "results", job["id"], str(binary), env=env)
        assert refused.returncode == 2
        assert "Invalid value for FILE: is not UTF-8 text" in refused.stderr
        assert server.requests == []
        status = cli("regrade", "status", job["id"], "--format", "table", env=env)
        assert "engine offline (grading, retry live): requests 42 written" in status.stdout
