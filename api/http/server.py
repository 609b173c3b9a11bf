"""Serving the app with uvicorn, shutting down gracefully on SIGTERM.

On SIGTERM (or Ctrl-C) the grading workers stop claiming at once; uvicorn stops
accepting connections and lets open requests finish (waiting requests answer 202)
for up to ``shutdown_seconds``; then the app's lifespan ends, in-flight gradings are
finished or their leases released, and the process exits with status 0. Unlike plain
``uvicorn.run`` the signal is not raised again after the graceful shutdown, which
would end the process with status 143 instead.

Before it migrates anything, ``serve`` checks that it can listen where it is told to
(:func:`check_listen_address`): a host that is no address of this machine or a port in
use is refused in one line naming its setting, not found by uvicorn once the app has
started.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import logging
import signal
import socket
import threading
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn
from litestar import Litestar

from api.http.auth import check_anonymous_use
from api.service.settings import Settings

__all__ = ["GracefulServer", "check_listen_address", "run_server"]

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


def check_listen_address(settings: Settings) -> None:
    """Refuse, naming the setting, an address ``serve`` cannot listen on; ValueError.

    The host is resolved and each of its addresses bound (then let go) as the server
    binds them (asyncio's ``create_server``: every address, ``SO_REUSEADDR``, IPv6 only
    on an IPv6 socket): a host that resolves to nothing or to no address of this machine
    names ``SRE_JUDGE_HOST``, a port in use or not open to this user ``SRE_JUDGE_PORT``.
    Tokenless use (``SRE_JUDGE_ALLOW_ANONYMOUS``) is refused on any host but a loopback one.
    """
    host, port = settings.host, settings.port
    check_anonymous_use(settings.allow_anonymous, host)
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        said = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ValueError(
            f"SRE_JUDGE_HOST (--host): {host!r} is no address or name this machine "
            f"resolves ({said})"
        ) from None
    for family, kind, proto, _, address in dict.fromkeys(found):
        try:
            sock = socket.socket(family, kind, proto)
        except OSError:  # a family this machine lacks (no IPv6): the server skips it too
            continue
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    raise ValueError(
                        f"SRE_JUDGE_PORT (--port): cannot listen on port {port} of {host}: "
                        f"{exc.strerror}"
                    ) from None
                raise ValueError(
                    f"SRE_JUDGE_HOST (--host): cannot listen on {host!r} ({address[0]}): "
                    f"{exc.strerror}"
                ) from None


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
