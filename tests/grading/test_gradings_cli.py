"""``sre-judge gradings move-judge``: an admin moves pinned pending gradings (in process)."""

from __future__ import annotations

import json
from pathlib import Path

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
