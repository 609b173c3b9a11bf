"""A real HTTP server that answers every POST with scripted byte pieces, each after its
delay, in one chunked reply: what a server sends, as it paces it (a reasoning model's
thinking before its reply)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["paced_server"]


@contextmanager
def paced_server(pieces: list[tuple[float, bytes]], content_type: str) -> Iterator[str]:
    """A server at the yielded base URL that answers every POST with ``pieces``, each
    after its delay (seconds), and every GET with 404."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for delay, piece in pieces:
                    time.sleep(delay)
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up
                self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
