"""The OpenAI Batch API's files and batches endpoints as respx routes, in recorded shapes.

``FakeBatchAPI(base_url).routes(router)`` serves ``POST /files`` (multipart upload,
purpose batch), ``POST /batches``, ``GET /batches`` (list), ``GET /batches/{id}`` and
``GET /files/{id}/content`` with the objects OpenAI answers (``object: "batch"``,
``request_counts``, ``output_file_id``, ``error_file_id``, ``metadata``...). A batch
stays ``in_progress`` until the test ends it with :meth:`FakeBatchAPI.finish`, which
writes its output and error files as OpenAI does: one line per request, a reply
(``response.status_code`` 200 with a chat completion) or an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx

__all__ = ["FakeBatchAPI", "chat_completion"]


def chat_completion(model: str, text: str, *, prompt_tokens: int = 500) -> dict[str, Any]:
    """A chat completion as a batch's output line carries it."""
    return {
        "id": "chatcmpl-batch",
        "object": "chat.completion",
        "created": 1733300000,
        "model": model,
        "system_fingerprint": "fp_test",  # the live judge server's: the same model
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": text, "refusal": None},
            }
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 200, "total_tokens": 700},
    }


@dataclass
class FakeBatchAPI:
    """Files and batches kept in memory; the calls each endpoint got."""

    base_url: str
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    uploads: int = 0
    creates: int = 0
    retrieves: int = 0
    #: answer every upload 400, as OpenAI refuses a file it cannot take
    refusing: bool = False

    def routes(self, router: respx.MockRouter) -> None:
        """Add the endpoints to ``router`` (other requests go where the router says)."""
        base = self.base_url.rstrip("/")
        router.post(f"{base}/files").mock(side_effect=self._upload)
        router.post(f"{base}/batches").mock(side_effect=self._create)
        router.get(f"{base}/batches").mock(side_effect=self._list)
        router.get(url__regex=rf"{re.escape(base)}/batches/[^/]+$").mock(side_effect=self._get)
        router.get(url__regex=rf"{re.escape(base)}/files/[^/]+/content$").mock(
            side_effect=self._content
        )

    def requests_of(self, batch_id: str) -> list[dict[str, Any]]:
        """The request lines a batch was created with."""
        data = self.files[self.batches[batch_id]["input_file_id"]].decode("utf-8")
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def finish(
        self,
        batch_id: str,
        status: str,
        reply: Callable[[dict[str, Any]], str],
        *,
        fail: set[str] = frozenset(),  # type: ignore[assignment]
        leave_out: set[str] = frozenset(),  # type: ignore[assignment]
        model: str | None = None,
    ) -> None:
        """End a batch in ``status`` with a reply per request (``reply(body)``), an error
        line for the custom ids in ``fail``, nothing for those in ``leave_out`` (an
        expired or cancelled batch's unfinished part); ``model``: the replies' model."""
        out, errors = [], []
        for n, line in enumerate(self.requests_of(batch_id)):
            cid, body = line["custom_id"], line["body"]
            if cid in leave_out:
                continue
            if cid in fail:
                errors.append(
                    {
                        "id": f"batch_req_{n}",
                        "custom_id": cid,
                        "response": {
                            "status_code": 500,
                            "request_id": f"req_{n}",
                            "body": {"error": {"message": "server error", "type": "server"}},
                        },
                        "error": None,
                    }
                )
                continue
            completion = chat_completion(model or body["model"], reply(body))
            out.append(
                {
                    "id": f"batch_req_{n}",
                    "custom_id": cid,
                    "response": {"status_code": 200, "request_id": f"req_{n}", "body": completion},
                    "error": None,
                }
            )
        batch = self.batches[batch_id]
        if out:
            batch["output_file_id"] = self._store("\n".join(json.dumps(o) for o in out) + "\n")
        if errors:
            batch["error_file_id"] = self._store("\n".join(json.dumps(e) for e in errors) + "\n")
        if status == "failed":
            batch["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_request", "message": "bad line", "line": 1}],
            }
        total = len(self.requests_of(batch_id))
        batch["request_counts"] = {"total": total, "completed": len(out), "failed": len(errors)}
        batch["status"] = status

    def _store(self, text: str) -> str:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = text.encode("utf-8")
        return file_id

    def _upload(self, request: httpx.Request) -> httpx.Response:
        self.uploads += 1
        if self.refusing:
            error = {"message": "file refused", "type": "invalid_request_error", "code": None}
            return httpx.Response(400, json={"error": {**error, "param": "file"}})
        content = request.content
        assert b'name="purpose"' in content and b"batch" in content
        # the JSON lines between the file part's headers and the closing boundary
        lines = [ln for ln in content.split(b"\r\n") if ln.startswith(b'{"custom_id"')]
        file_id = self._store("".join(f"{ln.decode()}\n" for ln in lines))
        return httpx.Response(
            200,
            json={
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": 1733300000,
                "filename": "regrade.jsonl",
                "purpose": "batch",
                "status": "processed",
            },
        )

    def _create(self, request: httpx.Request) -> httpx.Response:
        self.creates += 1
        body = json.loads(request.content)
        assert body["endpoint"] == "/v1/chat/completions"
        assert body["completion_window"] == "24h"
        batch_id = f"batch_{len(self.batches) + 1}"
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": "24h",
            "status": "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": 1733300000,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        return httpx.Response(200, json=self.batches[batch_id])

    def _list(self, request: httpx.Request) -> httpx.Response:
        data = list(self.batches.values())
        return httpx.Response(200, json={"object": "list", "data": data, "has_more": False})

    def _get(self, request: httpx.Request) -> httpx.Response:
        self.retrieves += 1
        batch_id = request.url.path.rsplit("/", 1)[1]
        found = self.batches.get(batch_id)
        if found is None:
            return httpx.Response(404, json={"error": {"message": "no such batch"}})
        return httpx.Response(200, json=found)

    def _content(self, request: httpx.Request) -> httpx.Response:
        file_id = request.url.path.split("/")[-2]
        return httpx.Response(200, content=self.files[file_id])
