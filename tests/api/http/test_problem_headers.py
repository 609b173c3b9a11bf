"""Every problem+json answer tells browsers not to sniff it into another type."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.parametrize(
    ("method", "path", "body", "auth", "status"),
    [
        ("GET", "/v1/gradings/nope", None, True, 404),
        ("GET", "/v1/gradings", None, False, 401),
        ("POST", "/v1/submissions", b'{"diagnosis": 5}', True, 422),
        ("POST", "/v1/submissions", b"{not json", True, 400),
        ("POST", "/v1/submissions", b'{"a": 1e400}', True, 422),
    ],
)
async def test_a_problem_answer_is_not_sniffed(
    api_client: Any, tokens: Any, method: str, path: str, body: bytes | None, auth: bool,
    status: int,
) -> None:  # fmt: skip
    headers = {"content-type": "application/json", **(await tokens("admin") if auth else {})}
    async with api_client(start_workers=False) as client:
        answer = await client.request(method, path, content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.headers["x-content-type-options"] == "nosniff"
