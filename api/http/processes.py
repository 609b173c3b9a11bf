"""Several ``serve`` processes on one port: ``sre-judge serve --processes N``.

One Python process uses one core. With ``N`` above 1 the parent binds the port once
and starts ``N`` children (spawned, not forked), each a whole server on that socket:
the HTTP app, its grading workers and webhook delivery, like ``N`` machines sharing the
database. The kernel spreads connections over them. Exactly-once grading is the
database's: claims take row locks with ``SKIP LOCKED`` and a verdict is only written
under its lease, so PostgreSQL is required (SQLite admits one writer at a time: more
processes would queue for its lock). A submission's ``?wait=`` in one process sees a
grading finished by another within its poll interval.

SIGTERM or SIGINT to the parent is passed to every child, which shuts down gracefully
(one still starting ends by the signal: a stop too), and the parent exits 0; if a child
dies, the others are stopped and the parent exits with its status.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import socket
import time
from multiprocessing.process import BaseProcess
from types import FrameType

from api.service.settings import Settings

__all__ = ["bind_socket", "run_processes"]

#: pending connections the shared socket queues
_BACKLOG = 2048


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` that children can inherit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(_BACKLOG)
    sock.set_inheritable(True)
    return sock


def _child(settings: Settings, sock: socket.socket, announce: bool) -> None:
    """One server process: the whole app, on the parent's socket (``announce``: say which
    judge it uses, as one-process ``serve`` does)."""
    from api.http.app import create_app
    from api.http.server import announce_judge_on_start, run_server
    from api.service.observability import configure_logging

    configure_logging(settings)
    app = create_app(settings)
    if announce:
        announce_judge_on_start(app)
    run_server(app, settings, sockets=[sock])


def _stop(children: list[BaseProcess]) -> None:
    """SIGTERM (a graceful shutdown) to every child still running."""
    for child in children:
        if child.is_alive():
            with contextlib.suppress(ProcessLookupError):
                child.terminate()


def run_processes(settings: Settings, count: int) -> int:
    """Serve with ``count`` processes until SIGTERM or SIGINT; the exit status."""
    sock = bind_socket(settings.host, settings.port)
    context = multiprocessing.get_context("spawn")
    children: list[BaseProcess] = []  # the ones started
    stopping = False
    failed = 0  # the status of the first child that ended on its own

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        _stop(children)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for n in range(count):
            if stopping:  # a signal during start-up: start no more
                break
            child = context.Process(
                target=_child, args=(settings, sock, n == 0), name=f"sre-judge-serve-{n}"
            )
            child.start()
            children.append(child)
        if stopping:  # and pass it to those started since it came
            _stop(children)
        while any(child.is_alive() for child in children):
            dead = [c for c in children if not c.is_alive() and c.exitcode not in (None, 0)]
            if dead and not stopping:
                stopping = True
                failed = dead[0].exitcode or 0
                _stop(children)
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    # a child told to stop while still starting ends by the SIGTERM itself: a stop too
    stopped = (0, -signal.SIGTERM) if stopping else (0,)
    codes = [child.exitcode or 0 for child in children]
    return failed or next((code for code in codes if code not in stopped), 0)
