"""A server loads the credential detectors when it starts.

``sre-judge grade`` imports them only when needed, so that it reaches its judge sooner;
a server must not make its first submission pay that second instead. Checked in a fresh
interpreter, where nothing else has imported them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import asyncio, sys
from api.service.runtime import Runtime
from api.service.settings import Settings

async def main(workers):
    settings = Settings(judge="scripted:pass", database_url=sys.argv[1], workers=1)
    async with Runtime(settings, workers=workers, migrate=True):
        pass
    print("detect_secrets" in sys.modules)

asyncio.run(main(sys.argv[2] == "workers"))
"""


def _loaded(tmp_path: Path, mode: str) -> str:
    url = f"sqlite:///{tmp_path / mode}.db"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, url, mode], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow  # two fresh interpreters importing the whole service
def test_a_runtime_with_workers_preloads_and_a_plain_one_does_not(tmp_path: Path) -> None:
    assert _loaded(tmp_path, "workers") == "True"
    assert _loaded(tmp_path, "plain") == "False"
