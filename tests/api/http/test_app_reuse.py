"""An application made by ``create_app`` is lent to the next one once its runtime stopped:
each app still serves with its own settings and runtime, and two apps running at once
are two applications."""

from __future__ import annotations

from typing import Any

from tests.support.submissions import DIAGNOSIS, TRUTH


async def _grade(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_the_next_app_serves_with_its_own_settings(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    async with api_client(judge="scripted:pass") as first:
        passed = await _grade(first, headers)
        app = first.app
    async with api_client(judge="scripted:fail", max_text_bytes=4096) as second:
        assert second.app is app, "the stopped app was not lent again"
        failed = await _grade(second, headers)
        too_long = await second.post(
            "/v1/submissions",
            json={"diagnosis": "x" * 5000, "ground_truth": TRUTH},
            headers=headers,
        )
    assert (passed["passed"], passed["judge"]["model"]) == (True, "pass")
    assert (failed["passed"], failed["judge"]["model"]) == (False, "fail")
    assert too_long.status_code == 422 and "diagnosis" in too_long.text


async def test_two_apps_running_at_once_are_two_apps(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    async with (
        api_client(judge="scripted:pass") as first,
        api_client(judge="scripted:fail") as second,
    ):
        assert first.app is not second.app
        assert (await _grade(first, headers))["passed"] is True
        assert (await _grade(second, headers))["passed"] is False


async def test_a_body_limit_gets_an_app_of_its_own(api_client: Any, tokens: Any) -> None:
    """The request-size limit is the application's own (Litestar refuses the body)."""
    headers = await tokens("submitter")
    body = {"diagnosis": "y" * 6000, "ground_truth": TRUTH}
    async with api_client(max_body_bytes=8192) as small:
        refused = await small.post(
            "/v1/submissions", json={**body, "x": "z" * 9000}, headers=headers
        )
    async with api_client() as usual:
        accepted = await usual.post("/v1/submissions", json=body, headers=headers)
    assert refused.status_code == 413
    assert accepted.status_code == 202, accepted.status_code
