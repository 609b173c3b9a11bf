"""A judge as slow as a 7B model on a CPU: does a grading finish with the default settings?

    python bench/slow_judge.py [--prompt-seconds 100] [--tokens-per-second 4] [--reply-tokens 573]

Serves an OpenAI-compatible judge that streams its reply like a local model: silence
while it "reads the prompt", then tokens at a steady pace (a token being four
characters). The reply is a valid yes-to-all in the service's format, padded in its
reasoning to ``--reply-tokens`` tokens (573: the size measured for a single-call grading
with reasoning, evidence and confidence). Then ``sre-judge grade`` runs with nothing
but the judge spec set, and the figures say whether it finished and how long it took.
Before streaming, the default 120 s timeout cut such a grading off.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Figure, print_report  # noqa: E402
from bench.judge_sim import build_reply  # noqa: E402
from tests.support.judge_server import TOKEN_CHARS, running_judge_server  # noqa: E402

TRUTH = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT is 9999"
DIAGNOSIS = "The geo deployment in hotel listens on GEO_PORT 9999 while its Service targets 8083."


def padded_reply(request: dict[str, Any], tokens: int) -> str:
    """The simulated judge's reply, its reasoning padded to about ``tokens`` tokens."""
    reply = json.loads(build_reply(request))
    entries = reply.values() if "answer" not in reply else [reply]
    short = len(json.dumps(reply))
    pad = max(0, tokens * TOKEN_CHARS - short) // max(1, len(list(entries)))
    for entry in reply.values() if "answer" not in reply else [reply]:
        entry["reasoning"] = ("the diagnosis names the component and the value " * 40)[:pad]
    return json.dumps(reply)


def main() -> None:
    """Grade once against the slow judge; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt-seconds", type=float, default=100.0)
    parser.add_argument("--tokens-per-second", type=float, default=4.0)
    parser.add_argument("--reply-tokens", type=int, default=573)
    args = parser.parse_args()
    with running_judge_server(
        default=lambda body: padded_reply(body, args.reply_tokens),
        first_token_seconds=args.prompt_seconds,
        token_seconds=1 / args.tokens_per_second,
    ) as server:
        env = {**os.environ, "SRE_JUDGE_JUDGE": f"openai:slow-7b@{server.openai_url}"}
        for name in ("SRE_JUDGE_JUDGE_TIMEOUT", "SRE_JUDGE_JUDGE_FIRST_TOKEN_SECONDS"):
            env.pop(name, None)
        env.pop("SRE_JUDGE_JUDGE_IDLE_SECONDS", None)
        started = time.monotonic()
        done = subprocess.run(
            [str(Path(sys.executable).parent / "sre-judge"), "grade", "--json",
             "--ground-truth", TRUTH, "--diagnosis", DIAGNOSIS],
            env=env, capture_output=True, text=True, cwd=ROOT, check=False,
        )  # fmt: skip
        took = time.monotonic() - started
    grading = json.loads(done.stdout) if done.stdout.strip() else {}
    expected = args.prompt_seconds + args.reply_tokens / args.tokens_per_second
    finished = done.returncode == 0 and grading.get("status") == "graded"
    print_report(
        "slow_judge",
        "A 7B-speed judge on a CPU, default settings",
        [
            Figure("judge reply time (simulated)", expected, "s"),
            Figure("grading wall time", took, "s"),
            Figure("graded", finished, target="True", met=finished),
            Figure("status", grading.get("status") or done.stderr.strip()[-200:]),
        ],
    )


if __name__ == "__main__":
    main()
