"""Dependencies point one way, as the import contracts in pyproject.toml say.

api -> storage -> judge; judge knows no web or database and has no import cycle; the
application layer (api.service) knows neither litestar nor click; the command line does
not import the HTTP edge, except ``sre-judge serve``, which runs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 8 kept, 0 broken" in done.stdout
