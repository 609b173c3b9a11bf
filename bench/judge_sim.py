"""A simulated OpenAI-compatible judge with a known limit: C slots of L seconds each.

    python bench/judge_sim.py [--latency 0.2] [--slots 8] [--port 8099]

Answers ``POST /v1/chat/completions`` with a valid reply in the service's own format
(a JSON object keyed by the question ids of the request's reply schema, each with
reasoning, evidence quoted from the fenced diagnosis, answer and confidence; or one
such answer object when the schema is one answer, as in per-question asking) after
``latency`` seconds, with at most ``slots`` requests being answered at once: the others
wait for a slot. Nothing can therefore be graded faster than ``slots / latency`` per
second. ``GET /v1/models`` lists the model; ``GET /stats`` gives the counters (requests
served, questions asked, most requests in a slot at once, most waiting); ``POST /control`` with
``{"latency": s, "slots": n}`` changes the figures between runs (``"reset": true``
zeroes the counters).

It is a raw ASGI app served by uvicorn (already a dependency of the service) and runs
in a process of its own (:class:`SimulatedJudge`), so it never shares the service's
event loop or the benchmark's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

import httpx

__all__ = ["MODEL", "SimState", "SimulatedJudge", "build_reply", "free_port", "make_app"]

MODEL = "bench-sim"
#: the service's rubric ids, for requests that carry no reply schema (json_object)
_DEFAULT_IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
_ANSWER_KEYS = ("reasoning", "evidence", "answer", "confidence")
_DIAGNOSIS = re.compile(r"<<<DIAGNOSIS (\w+)>>>\n(.*?)\n<<<END DIAGNOSIS \1>>>", re.DOTALL)

Scope = dict[str, Any]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _question_ids(request: dict[str, Any]) -> list[str] | None:
    """The question ids of a request's reply schema; None for a one-answer schema."""
    form = request.get("response_format") or {}
    schema = (form.get("json_schema") or {}).get("schema") or {}
    properties = list(schema.get("properties") or _DEFAULT_IDS)
    return None if set(properties) == set(_ANSWER_KEYS) else properties


def build_reply(request: dict[str, Any]) -> str:
    """Yes to every question asked, quoting the diagnosis's first words as evidence.

    A request whose schema is one answer (per-question asking) gets one answer object.
    """
    text = " ".join(str(m.get("content", "")) for m in request.get("messages", []))
    found = _DIAGNOSIS.search(text)
    quote = " ".join(found.group(2).split()[:8]) if found else ""
    entry = {"reasoning": "simulated judge", "evidence": quote, "answer": "yes"}
    entry["confidence"] = "high"
    ids = _question_ids(request)
    return json.dumps(entry if ids is None else {qid: entry for qid in ids})


class SimState:
    """Latency, slots and counters of one simulated judge."""

    def __init__(self, latency: float, slots: int) -> None:
        self.latency = latency
        self.slots = asyncio.Semaphore(slots)
        self.slot_count = slots
        self.reset()

    def reset(self) -> None:
        """Zero the counters."""
        self.served = self.in_flight = self.waiting = 0
        self.max_in_flight = self.max_waiting = 0
        self.prompt_chars = self.questions = 0

    async def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """One chat completion: wait for a slot, hold it ``latency`` seconds, answer."""
        self.waiting += 1
        self.max_waiting = max(self.max_waiting, self.waiting)
        async with self.slots:
            self.waiting -= 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.latency > 0:
                    await asyncio.sleep(self.latency)
            finally:
                self.in_flight -= 1
        self.served += 1
        self.questions += len(_question_ids(request) or [None])
        text = build_reply(request)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        self.prompt_chars += prompt_chars
        return {
            "id": f"chatcmpl-sim-{self.served}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", MODEL),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            # about four characters a token: the simulation has no tokenizer
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": len(text) // 4,
                "total_tokens": (prompt_chars + len(text)) // 4,
            },
        }

    def stats(self) -> dict[str, Any]:
        """The counters and settings, as ``GET /stats`` shows them."""
        return {
            "latency": self.latency,
            "slots": self.slot_count,
            "served": self.served,
            "in_flight": self.in_flight,
            "waiting": self.waiting,
            "max_in_flight": self.max_in_flight,
            "max_waiting": self.max_waiting,
            "prompt_chars": self.prompt_chars,
            "questions": self.questions,
        }

    def control(self, body: dict[str, Any]) -> None:
        """Change latency or slots (between runs), or reset the counters."""
        if "latency" in body:
            self.latency = float(body["latency"])
        if "slots" in body:
            self.slot_count = int(body["slots"])
            self.slots = asyncio.Semaphore(self.slot_count)
        if body.get("reset"):
            self.reset()


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_json(send: Any, payload: dict[str, Any], status: int = 200) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def make_app(state: SimState) -> Any:
    """The ASGI app serving ``state``."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        route = (scope["method"], scope["path"].rstrip("/"))
        body = await _read_body(receive)
        if route == ("POST", "/v1/chat/completions"):
            await _send_json(send, await state.complete(json.loads(body)))
        elif route == ("GET", "/v1/models"):
            entry = {"id": MODEL, "object": "model", "created": 0, "owned_by": "bench"}
            await _send_json(send, {"object": "list", "data": [entry]})
        elif route == ("GET", "/stats"):
            await _send_json(send, state.stats())
        elif route == ("POST", "/control"):
            state.control(json.loads(body or b"{}"))
            await _send_json(send, state.stats())
        else:
            await _send_json(send, {"error": {"message": "not found"}}, 404)

    return app


class SimulatedJudge:
    """The simulated judge in a process of its own; use as a context manager."""

    def __init__(self, *, latency: float, slots: int, port: int | None = None) -> None:
        self.latency, self.slots = latency, slots
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def openai_url(self) -> str:
        """The base URL for the service's judge spec."""
        return f"{self.url}/v1"

    def spec(self) -> str:
        """``SRE_JUDGE_JUDGE`` for this judge."""
        return f"openai:{MODEL}@{self.openai_url}"

    def __enter__(self) -> SimulatedJudge:
        # fmt: off
        command = [sys.executable, os.path.abspath(__file__), "--port", str(self.port),
                   "--latency", str(self.latency), "--slots", str(self.slots)]
        # fmt: on
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the simulated judge exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.openai_url}/models", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise TimeoutError("the simulated judge did not start")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def stats(self) -> dict[str, Any]:
        """The judge's counters."""
        return dict(httpx.get(f"{self.url}/stats", timeout=5).json())

    def control(self, **changes: Any) -> dict[str, Any]:
        """Change latency or slots, or ``reset=True`` the counters."""
        return dict(httpx.post(f"{self.url}/control", json=changes, timeout=5).json())


def main() -> None:
    """Serve the simulated judge until interrupted."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per request")
    parser.add_argument("--slots", type=int, default=8, help="requests answered at once")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    args = parser.parse_args()
    app = make_app(SimState(args.latency, args.slots))
    limit = args.slots / args.latency if args.latency > 0 else float("inf")
    print(f"simulated judge on http://{args.host}:{args.port}/v1, limit {limit:g}/s", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
