"""Serving the app with uvicorn, shutting down gracefully on SIGTERM.

On SIGTERM (or Ctrl-C) the grading workers stop claiming at once; uvicorn stops
accepting connections and lets open requests finish (waiting requests answer 202)
for up to ``shutdown_seconds``; then the app's lifespan ends, in-flight gradings are
finished or their leases released, and the process exits with status 0. Unlike plain
``uvicorn.run`` the signal is not raised again after the graceful shutdown, which
would end the process with status 143 instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
import socket
import threading
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn
from litestar import Litestar

from api.service.settings import Settings

__all__ = ["GracefulServer", "run_server"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """uvicorn's server, telling the app at once when a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, on_signal: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_signal = on_signal
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve until a signal; remember the loop so the handler can reach it."""
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Begin uvicorn's shutdown and tell the app (on the loop, not in the handler)."""
        super().handle_exit(sig, frame)
        if self._loop is not None and not self._loop.is_closed():
            # an empty context: not the one of whatever request the signal interrupted
            self._loop.call_soon_threadsafe(self._on_signal, context=contextvars.Context())

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Handle SIGINT and SIGTERM while serving; restore the old handlers after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def announce_judge_on_start(app: Litestar) -> None:
    """Make ``app`` log on start (logger ``sre_judge.startup``, a warning when the judge
    did not answer) which judge it will use, where, and the setting that changes it."""
    from api.service.judge_status import judge_status, startup_message

    async def announce(app: Litestar) -> None:
        status = await judge_status(app.state.services)
        level = logging.INFO if status["ok"] else logging.WARNING
        logging.getLogger("sre_judge.startup").log(level, startup_message(status))

    app.on_startup.append(announce)


def run_server(
    app: Litestar, settings: Settings, sockets: list[socket.socket] | None = None
) -> None:
    """Serve ``app`` on the configured host and port (or on ``sockets``, bound by a
    parent process: ``api.http.processes``) until SIGTERM or SIGINT."""

    def on_signal() -> None:
        workers = getattr(app.state, "workers", None)
        if workers is not None:
            workers.begin_shutdown()

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_config=None,
        log_level=settings.log_level.lower(),
        access_log=False,  # the app writes its own access lines, with the request id
        timeout_graceful_shutdown=max(1, round(settings.shutdown_seconds)),
    )
    GracefulServer(config, on_signal).run(sockets=sockets)
