"""A service loads the client of the judge it uses, not the other one.

The openai package alone is about 48 MiB of memory and most of a command's start-up
time; a service judged through Ollama (the default) has no use for it until a regrade
asks an OpenAI-compatible judge. Checked in a fresh interpreter, where nothing else has
imported either client.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import asyncio, sys
from api.http.app import create_app
from api.service.runtime import Runtime
from api.service.settings import Settings

async def main(judge, url):
    settings = Settings(judge=judge, database_url=url, workers=1)
    create_app(settings)
    async with Runtime(settings, workers=False, migrate=True) as runtime:
        runtime.services.backends.get(judge)
    print(sorted(m for m in ("openai", "ollama") if m in sys.modules))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _clients(tmp_path: Path, judge: str, name: str) -> str:
    url = f"sqlite:///{tmp_path / name}.db"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, judge, url],
        capture_output=True,
        text=True,
        timeout=120,
        env={"SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "key"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # two fresh interpreters importing the whole service
def test_an_ollama_judged_service_never_loads_the_openai_client(tmp_path: Path) -> None:
    assert _clients(tmp_path, "ollama:qwen2.5:7b@http://127.0.0.1:9", "ollama") == "['ollama']"
    openai = _clients(tmp_path, "openai:m@http://127.0.0.1:9/v1", "openai")
    assert openai == "['openai']"
