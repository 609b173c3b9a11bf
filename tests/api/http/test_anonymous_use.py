"""``SRE_JUDGE_ALLOW_ANONYMOUS``: tokenless admin use is for the person at this machine,
not for any web page that person's browser opens: a page of another site (a bodiless
POST needs no preflight) or a page that reached the port through a DNS name rebound to
127.0.0.1 gets 403 and changes nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

#: what the local user's own tools send
LOCAL = {"Host": "127.0.0.1:8000"}


async def test_the_local_user_acts_as_admin_without_a_token(api_client: Any) -> None:
    async with api_client(start_workers=False, allow_anonymous=True) as client:
        for host in ("127.0.0.1:8000", "localhost", "[::1]:8000", "LOCALHOST:8000"):
            listed = await client.get("/v1/tokens", headers={"Host": host})
            assert listed.status_code == 200, (host, listed.text)
        same_origin = await client.post(
            "/v1/tokens",
            json={"name": "mine", "role": "submitter"},
            headers={**LOCAL, "Origin": "http://127.0.0.1:8000", "Sec-Fetch-Site": "same-origin"},
        )
    assert same_origin.status_code == 201, same_origin.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site"},
    ],
)
async def test_a_page_of_another_site_cannot_revoke_a_token(
    api_client: Any, tokens: Any, headers: dict[str, str]
) -> None:
    await tokens("submitter", "ci-harness")
    async with api_client(start_workers=False, allow_anonymous=True) as client:
        token_id = (await client.get("/v1/tokens", headers=LOCAL)).json()[0]["id"]
        revoked = await client.post(f"/v1/tokens/{token_id}/revoke", headers={**LOCAL, **headers})
        listed = (await client.get("/v1/tokens", headers=LOCAL)).json()
    assert revoked.status_code == 403, revoked.text
    assert "bearer token" in revoked.json()["detail"]
    assert listed[0]["revoked_at"] is None


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:3000", "http://localhost:8888", "http://[::1]:5173"]
)
async def test_a_page_of_another_local_port_cannot_revoke_a_token(
    api_client: Any, tokens: Any, origin: str
) -> None:
    """A page another local server serves (a dev server, a notebook) is another origin:
    from a browser that sends no Sec-Fetch-Site, its whole Origin (scheme, host and port)
    is compared with the address the request reached, so it gets 403, while a page of
    the service's own origin is answered."""
    await tokens("submitter", "ci-harness")
    async with api_client(start_workers=False, allow_anonymous=True) as client:
        token_id = (await client.get("/v1/tokens", headers=LOCAL)).json()[0]["id"]
        # a bodiless POST needs no CORS preflight: the browser sends it with its Origin
        revoked = await client.post(
            f"/v1/tokens/{token_id}/revoke", headers={**LOCAL, "Origin": origin}
        )
        listed = (await client.get("/v1/tokens", headers=LOCAL)).json()
        own = await client.get("/v1/tokens", headers={**LOCAL, "Origin": "http://127.0.0.1:8000"})
    assert revoked.status_code == 403, revoked.text
    assert "bearer token" in revoked.json()["detail"]
    assert listed[0]["revoked_at"] is None
    assert own.status_code == 200, own.text


async def test_a_rebound_host_name_gets_no_anonymous_admin(api_client: Any) -> None:
    """evil.example resolves to 127.0.0.1 for a moment: the page is then same-origin
    with the port, sends JSON and reads the answers; only its Host tells it apart."""
    rebound = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}
    async with api_client(start_workers=False, allow_anonymous=True) as client:
        minted = await client.post(
            "/v1/tokens", json={"name": "pwned", "role": "admin"}, headers=rebound
        )
        listed = (await client.get("/v1/tokens", headers=LOCAL)).json()
    assert minted.status_code == 403, minted.text
    assert "token" not in minted.json()
    assert listed == []


async def test_a_bearer_token_is_still_taken_from_any_host(api_client: Any, tokens: Any) -> None:
    """The checks are anonymous use's: a token works behind any name and from any page."""
    admin = await tokens("admin")
    async with api_client(start_workers=False, allow_anonymous=True) as client:
        listed = await client.get(
            "/v1/tokens", headers={**admin, "Host": "judge.example", "Origin": "https://x.example"}
        )
    assert listed.status_code == 200, listed.text


async def test_a_request_from_another_machine_is_not_the_anonymous_admin(
    api_client: Any,
) -> None:
    """Behind a reverse proxy on this machine (``serve`` believes its X-Forwarded-For, and
    nginx's default ``proxy_pass`` sends ``Host: 127.0.0.1:8000``), a request another
    machine sent is not the anonymous admin; a local one still is."""
    async with api_client(start_workers=False, allow_anonymous=True) as client:
        # as serve runs the app: uvicorn's proxy-header handling, the proxy at 127.0.0.1
        served = ProxyHeadersMiddleware(client.app, trusted_hosts="127.0.0.1")
        transport = httpx.ASGITransport(app=served, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000"
        ) as proxy:
            # a local request through the same path is the anonymous admin, as documented
            local = await proxy.get("/v1/tokens", headers={"X-Forwarded-For": "127.0.0.1"})
            assert local.status_code == 200, local.text
            # a remote machine's request, relayed by a reverse proxy (nginx's defaults)
            remote = await proxy.get(
                "/v1/tokens",
                headers={"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "http"},
            )
            minted = await proxy.post(
                "/v1/tokens",
                json={"name": "intruder", "role": "admin"},
                headers={"X-Forwarded-For": "203.0.113.7"},
            )
    assert remote.status_code in (401, 403), (remote.status_code, remote.text[:200])
    assert minted.status_code in (401, 403), (minted.status_code, minted.text[:200])
