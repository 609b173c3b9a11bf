"""Running ``sre-judge`` as real processes, as an operator would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["ServiceProcess", "cli", "free_port", "serving"]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``sre-judge ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "api", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class ServiceProcess:
    """A ``sre-judge serve`` process on a free port."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "api", "serve", "--port", str(self.port)],
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        """Block until /healthz answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError("the service did not become healthy")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no lease released."""
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM and wait."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@contextmanager
def serving(env: dict[str, str], log_path: Path) -> Iterator[ServiceProcess]:
    """A running service for the duration of the block."""
    service = ServiceProcess(env, log_path)
    try:
        service.wait_ready()
        yield service
    finally:
        service.stop()
