"""A real HTTP receiver of webhooks that verifies Standard Webhooks signatures."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

__all__ = ["Receiver", "receiving"]


@dataclass
class Receiver:
    """What arrived: verified bodies in arrival order; ``status`` decides each answer."""

    url: str = ""
    secret: str | None = None
    #: (webhook-id, parsed body) of every verified request answered with a 2xx
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    unverified: int = 0
    #: the answer to the n-th request (0-based); 200 by default
    status: Callable[[int], int] = lambda n: 200
    #: extra headers of the answer to the n-th request (e.g. ``Retry-After``)
    headers: Callable[[int], dict[str, str]] = lambda n: {}
    #: seconds to hold the n-th request before answering
    delay: Callable[[int], float] = lambda n: 0.0
    #: answer with a body that never ends (bytes until the sender hangs up, 60 s at most)
    endless_body: bool = False
    #: bytes of the endless body the sender took before it hung up
    body_bytes_taken: int = 0
    requests: int = 0
    #: the ``Host`` header of every request, in arrival order
    hosts: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self) -> list[dict[str, Any]]:
        """Accepted bodies, one per distinct webhook-id (receivers deduplicate by it)."""
        seen: dict[str, dict[str, Any]] = {}
        for message_id, body in list(self.received):
            seen.setdefault(message_id, body)
        return list(seen.values())

    def wait_for(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        """Block until ``count`` distinct deliveries arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.delivered()) >= count:
                return self.delivered()
            time.sleep(0.05)
        raise AssertionError(f"{len(self.delivered())} of {count} deliveries arrived")


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
            with receiver.lock:
                n = receiver.requests
                receiver.requests += 1
                receiver.hosts.append(self.headers.get("host", ""))
            status = receiver.status(n)
            try:
                assert receiver.secret is not None
                parsed = Webhook(receiver.secret).verify(body, dict(self.headers.items()))
                if 200 <= status < 300:
                    receiver.received.append((self.headers["webhook-id"], parsed))
            except (AssertionError, WebhookVerificationError, ValueError):
                receiver.unverified += 1
            time.sleep(receiver.delay(n))
            self.send_response(status)
            for name, value in receiver.headers(n).items():
                self.send_header(name, value)
            if receiver.endless_body:
                self._endless()
                return
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def _endless(self) -> None:
            """A body of unstated length (read to the connection's end) that never ends."""
            self.send_header("connection", "close")
            self.end_headers()
            chunk = b"x" * 65536
            deadline = time.monotonic() + 60
            try:
                while time.monotonic() < deadline:
                    self.wfile.write(chunk)
                    receiver.body_bytes_taken += len(chunk)
            except OSError:  # the sender hung up
                return

        def log_message(self, *args: Any) -> None:
            return

    return Handler


@contextmanager
def receiving(*, tls: ssl.SSLContext | None = None) -> Iterator[Receiver]:
    """A receiver on a free loopback port for the duration of the block; with ``tls`` (a
    server context) it speaks HTTPS."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    receiver.url = f"{scheme}://127.0.0.1:{server.server_address[1]}/hook"
    # looks for shutdown every 50 ms: the default 0.5 s was the wait of every test's end
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
