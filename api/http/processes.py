"""Several ``serve`` processes on one port: ``sre-judge serve --processes N``.

One Python process uses one core. With ``N`` above 1 the parent binds the port once
and starts ``N`` children (spawned, not forked), each a whole server on that socket:
the HTTP app, its grading workers and webhook delivery, like ``N`` machines sharing the
database. The kernel spreads connections over them. Exactly-once grading is the
database's: claims take row locks with ``SKIP LOCKED`` and a verdict is only written
under its lease, so PostgreSQL is required (SQLite admits one writer at a time: more
processes would queue for its lock). A submission's ``?wait=`` in one process sees a
grading finished by another within its poll interval.

``SRE_JUDGE_JUDGE_CONCURRENCY`` bounds the calls to one judge endpoint, whichever
process makes them: each child is given its share (:func:`judge_shares`), and its
grading workers, unless ``SRE_JUDGE_WORKERS`` says how many, follow that share. More
processes than the concurrency are refused: each needs at least one call.

SIGTERM or SIGINT to the parent is passed to every child, which shuts down gracefully
(one still starting ends by the signal: a stop too), and the parent exits 0; if a child
dies, the others are stopped and the parent exits with its status (``128 + s`` for one
killed by signal ``s``, as a shell shows it). Once its children are started the parent
keeps no copy of the socket: when they close theirs to drain, the port refuses new
connections at once, as one process's does. A Ctrl-C from a terminal reaches every
process of its group: a child takes SIGINT only once its server handles it (until then
the parent's SIGTERM stops it), so one still starting does not die of it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import socket
import time
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.process import BaseProcess
from types import FrameType

from api.service.settings import Settings

__all__ = ["bind_socket", "judge_shares", "run_processes"]

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


def judge_shares(concurrency: int, count: int) -> list[int]:
    """Each of ``count`` processes' share of ``concurrency`` concurrent calls to one judge
    endpoint: ``concurrency // count``, one more for each of the first
    ``concurrency % count``. ValueError, naming both settings, when a process would get
    none."""
    if count > concurrency:
        raise ValueError(
            f"--processes {count} (SRE_JUDGE_PROCESSES) is more than "
            f"SRE_JUDGE_JUDGE_CONCURRENCY={concurrency}: the processes share the concurrent "
            "calls to one judge endpoint and each needs at least one; lower --processes or "
            "raise SRE_JUDGE_JUDGE_CONCURRENCY"
        )
    share, more = divmod(concurrency, count)
    return [share + (1 if n < more else 0) for n in range(count)]


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back in this process while a child is started, and so in the child.

    A blocked signal is inherited across ``exec``: the child is born with SIGINT held
    and drops it when it runs (:func:`_child`), so a Ctrl-C while its interpreter still
    imports cannot kill it. The parent's own SIGINT waits meanwhile and is handled
    when the block is lifted. The resource tracker is started first: starting it
    unblocks SIGINT in the process that starts it, which would undo the block."""
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _child(settings: Settings, sock: socket.socket, announce: bool) -> None:
    """One server process: the whole app, on the parent's socket (``announce``: say which
    judge it uses, as one-process ``serve`` does)."""
    # born with SIGINT blocked: ignore it (a Ctrl-C pending since the start goes), then
    # let it through; the server handles it once it runs, the parent's SIGTERM until then
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

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


def _exit_status(exitcode: int) -> int:
    """A child's exit code as a process status: ``128 + s`` for one killed by signal
    ``s`` (multiprocessing's ``-s``), as shells, systemd and docker show it."""
    return 128 - exitcode if exitcode < 0 else exitcode


def run_processes(settings: Settings, count: int) -> int:
    """Serve with ``count`` processes until SIGTERM or SIGINT; the exit status.

    Each process calls a judge endpoint at most its share of the judge concurrency
    (:func:`judge_shares`; ValueError when there are more processes than calls)."""
    shares = judge_shares(settings.judge_concurrency, count)
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
            own = settings.model_copy(update={"judge_concurrency": shares[n]})
            child = context.Process(
                target=_child, args=(own, sock, n == 0), name=f"sre-judge-serve-{n}"
            )
            with _sigint_blocked():
                child.start()
            children.append(child)
        # each child has its own copy of the socket (no child is ever restarted): the
        # parent's would keep the port queueing connections that nobody serves once the
        # children close theirs to drain
        sock.close()
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
    # a child told to stop while still starting ends by the signal itself: a stop too
    stopped = (0, -signal.SIGTERM, -signal.SIGINT) if stopping else (0,)
    codes = [child.exitcode or 0 for child in children]
    return _exit_status(failed or next((code for code in codes if code not in stopped), 0))
