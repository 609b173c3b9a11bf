"""``pip install ./client`` into a fresh environment pulls no server dependency."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: httpx, pydantic, tenacity and what they depend on; nothing of the server
ALLOWED = {
    "sre-judge-client", "httpx", "httpcore", "h11", "anyio", "idna", "sniffio", "certifi",
    "pydantic", "pydantic-core", "annotated-types", "typing-extensions",
    "typing-inspection", "tenacity", "exceptiongroup", "pip", "setuptools", "wheel",
}  # fmt: skip


def test_the_client_installs_alone_with_httpx_pydantic_and_tenacity(tmp_path: Path) -> None:
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    done = subprocess.run(
        [python, "-m", "pip", "install", "-q", str(ROOT / "client")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    names = {line.split("==")[0].lower().replace("_", "-") for line in listed.stdout.split()}
    assert names - ALLOWED == set()
    imported = subprocess.run(
        [python, "-c", "import sre_judge_client.sregym, sys; "
         "print(sorted(m for m in ('litestar', 'sqlalchemy', 'scipy') if m in sys.modules))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert imported.stdout.strip() == "[]"
