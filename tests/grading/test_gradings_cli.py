"""``sre-judge gradings move-judge``: an admin moves pinned pending gradings (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli.main import main

OLD = "ollama:qwen2.5:7b-instruct@http://127.0.0.1:9"


def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    result = CliRunner(env=env).invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_move_judge_moves_pinned_pending_gradings_once_audited(
    database_url: str, tmp_path: Path
) -> None:
    base = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE_MAX_ATTEMPTS": "1"}
    history = tmp_path / "history.jsonl"
    lines = [{"diagnosis": f"pod {i} OOMKilled", "ground_truth": "g"} for i in range(2)]
    history.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = _cli("import", "jsonl", str(history), env={**base, "SRE_JUDGE_JUDGE": OLD})
    assert code == 0, err

    pinned = {**base, "SRE_JUDGE_JUDGE": "scripted:pass", "SRE_JUDGE_PENDING_JUDGE": "pin"}
    code, out, err = _cli("gradings", "move-judge", "--from", OLD, "--format", "json", env=pinned)
    assert code == 0, err
    assert json.loads(out) == {"from_judge": OLD, "to_judge": "scripted:pass", "moved": 2}
    code, out, _ = _cli("gradings", "move-judge", "--from", OLD, "--format", "table", env=pinned)
    assert (code, out.strip()) == (0, f"moved 0 pending gradings from {OLD} to scripted:pass")

    # with follow (the default) pending work goes to the configured judge, nowhere else
    follow = {**base, "SRE_JUDGE_JUDGE": "scripted:pass"}
    code, _, err = _cli(
        "gradings", "move-judge", "--from", "scripted:pass", "--to", "scripted:fail", env=follow
    )
    assert code == 2 and "--to" in err and "follow the configured judge" in err

    code, out, err = _cli("audit", "verify", env=pinned)
    assert code == 0, out + err


@pytest.mark.parametrize("option", ["--from", "--to"])
@pytest.mark.parametrize(
    "spec", ["", "ollama:" + "m" * 600], ids=["empty", "longer-than-a-judge-spec"]
)
def test_move_judge_refuses_a_bad_spec_naming_its_option(
    database_url: str, option: str, spec: str
) -> None:
    """A spec given to ``--from`` or ``--to`` that is empty, or longer than a judge spec
    can be, is refused in one line naming that option (``Invalid value for --from:
    ...``), exit 2, as the command's other refused specs are."""
    env = {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_PENDING_JUDGE": "pin",
    }
    given = {"--from": OLD, "--to": "scripted:fail"} | {option: spec}
    code, _, err = _cli(
        "gradings", "move-judge", *[w for pair in given.items() for w in pair], env=env
    )
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: Invalid value for {option}: "), line
    assert "unexpected" not in line and "ValidationError" not in line, line
