"""Signing in to the workbench: sessions, cookies, CSRF, revocation, headers."""

from __future__ import annotations

import re
import time
from html import unescape
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.tokens.pages import LOGIN_CSRF_COOKIE, login_token
from storage import ChainKey, verify_chain
from storage.keys import ServiceKey
from tests.web.conftest import csrf_of, sign_in

CSP_SCRIPT = re.compile(r"script-src ([^;]*)")
#: src/href/action attributes naming a host (absolute or protocol-relative)
OUTSIDE = re.compile(r"""(?:src|href|action)\s*=\s*["']?\s*(?:[a-z]+:)?//""", re.I)


def _token(headers: dict[str, str]) -> str:
    return headers["Authorization"].split(" ", 1)[1]


def _assert_own_scripts_only(response: Any) -> None:
    policy = response.headers["content-security-policy"]
    script_src = CSP_SCRIPT.search(policy)
    assert script_src and script_src.group(1).split() == ["'self'"], policy
    assert "frame-ancestors 'none'" in policy
    assert not OUTSIDE.search(response.text), OUTSIDE.search(response.text)


async def test_without_a_session_every_page_sends_the_browser_to_sign_in(
    api_client: Any,
) -> None:
    async with api_client() as client:
        for path in ("/", "/queue", "/gradings", "/gradings/nope"):
            response = await client.get(path, follow_redirects=False)
            assert response.status_code == 303, path
            assert response.headers["location"].startswith("/login?next=")


async def _sign_in_at(client: Any, headers: dict[str, str], login_url: str) -> str:
    """Send the sign-in form ``login_url`` shows, as a browser would; where it leads."""
    form = (await client.get(login_url)).text
    found = re.search(r'name="next" value="([^"]*)"', form)
    assert found is not None
    sent = await client.post(
        "/login",
        data={"token": _token(headers), "_csrf": csrf_of(form), "next": unescape(found[1])},
        follow_redirects=False,
    )
    assert sent.status_code == 303
    return str(sent.headers["location"])


async def test_signing_in_leads_back_to_the_page_asked_for_its_query_kept(
    api_client: Any, tokens: Any
) -> None:
    """A link to a filtered list opened signed out; a form sent after the session ended
    leads back to the page it was sent from (its Referer), not to its POST-only action."""
    adj = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as client:
        asked = "/gradings?agent=a&status=graded"
        refused = await client.get(asked, follow_redirects=False)
        assert await _sign_in_at(client, adj, refused.headers["location"]) == asked
        client.cookies.clear()
        form = {"_csrf": "x", "revision": "1", "kind": "verdict", "verdict": "fail"}
        for referer, back in [
            ("http://testserver.local/gradings/g1?q.agent=a", "/gradings/g1?q.agent=a"),
            ("https://evil.example/gradings/g1", "/"),  # another origin's page: home
            (None, "/"),
        ]:
            client.cookies.clear()
            sent = await client.post(
                "/gradings/g1/overrides",
                data=form,
                headers={"Referer": referer} if referer else {},
                follow_redirects=False,
            )
            assert sent.status_code == 303
            assert await _sign_in_at(client, adj, sent.headers["location"]) == back


async def test_signing_in_sets_a_strict_httponly_session_cookie_and_shows_who(
    api_client: Any, tokens: Any
) -> None:
    adj = await tokens("adjudicator", "Ada")
    async with api_client() as client:
        form = await client.get("/login")
        assert form.status_code == 200
        response = await client.post(
            "/login",
            data={"token": _token(adj), "_csrf": csrf_of(form.text), "next": "/queue"},
            follow_redirects=False,
        )
        assert response.status_code == 303 and response.headers["location"] == "/queue"
        cookie = next(
            c for c in response.headers.get_list("set-cookie") if c.startswith("srej_session=")
        )
        assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
        assert "Secure" not in cookie  # plain http: a Secure cookie would never come back
        assert _token(adj) not in cookie
        page = await client.get("/queue")
        assert page.status_code == 200
        assert 'data-testid="principal">Ada<' in page.text
        assert 'data-testid="role">adjudicator<' in page.text


async def test_the_cookie_is_secure_over_tls(api_client: Any, tokens: Any) -> None:
    adj = await tokens("adjudicator")
    async with api_client() as client:
        form = await client.get("https://testserver.local/login")
        response = await client.post(
            "https://testserver.local/login",
            data={"token": _token(adj), "_csrf": csrf_of(form.text)},
            follow_redirects=False,
        )
        cookies = response.headers.get_list("set-cookie")
        assert any(c.startswith("__Host-srej_session=") and "Secure" in c for c in cookies)
        assert not any(c.startswith("srej_session=") for c in cookies)
        session = next(c for c in cookies if c.startswith("__Host-srej_session="))
        assert "Path=/;" in session or session.endswith("Path=/")
        assert "domain=" not in session.lower()  # a __Host- cookie carries none


async def test_a_session_cookie_a_sibling_host_planted_signs_no_one_in_over_tls(
    api_client: Any, tokens: Any
) -> None:
    """Any host of the site (``evil.example.com`` beside ``judge.example.com``) can set a
    cookie named ``srej_session`` for the whole site in a visitor's browser. Over TLS the
    workbench reads its session from the ``__Host-`` cookie only, which browsers take from
    this host alone: an attacker's own session planted that way signs no one in."""
    mallory = await tokens("adjudicator", "Mallory")
    async with api_client(start_workers=False) as client:
        form = await client.get("https://testserver.local/login")
        signed = await client.post(
            "https://testserver.local/login",
            data={"token": _token(mallory), "_csrf": csrf_of(form.text)},
            follow_redirects=False,
        )
        assert signed.status_code == 303
        value = signed.cookies["__Host-srej_session"]
        client.cookies.clear()
        planted = await client.get(
            "https://testserver.local/gradings",
            headers={"Cookie": f"srej_session={value}"},
            follow_redirects=False,
        )
        assert planted.status_code == 303 and planted.headers["location"].startswith("/login")
        own = await client.get(
            "https://testserver.local/gradings",
            headers={"Cookie": f"__Host-srej_session={value}"},
            follow_redirects=False,
        )
        assert own.status_code == 200 and "Mallory" in own.text


async def test_a_wrong_token_or_a_forged_form_opens_no_session(
    api_client: Any, tokens: Any
) -> None:
    adj = await tokens("adjudicator")
    async with api_client() as client:
        form = await client.get("/login")
        wrong = await client.post(
            "/login", data={"token": "srej_nope", "_csrf": csrf_of(form.text)}
        )
        assert wrong.status_code == 401 and "unknown, revoked or expired" in wrong.text
        client.cookies.clear()
        forged = await client.post("/login", data={"token": _token(adj), "_csrf": "guess"})
        assert forged.status_code == 403
        assert "srej_session" not in forged.headers.get("set-cookie", "")
        assert (await client.get("/queue", follow_redirects=False)).status_code == 303


async def test_the_sign_in_token_is_signed_for_its_own_pre_session(
    api_client: Any, tokens: Any, service_key: ServiceKey
) -> None:
    adj = await tokens("adjudicator")
    now = int(time.time())
    async with api_client() as client:
        form = await client.get("/login")
        pre_session, token = client.cookies[LOGIN_CSRF_COOKIE], csrf_of(form.text)
        made = {login_token(service_key, pre_session, now + late) for late in (0, 1, 2)}
        assert token != pre_session and token in made
        attempts = {
            # the unsigned double submit: a cookie planted with the same value as the field
            "double submit": ("planted-value-0123456789", "planted-value-0123456789"),
            "another pre-session's token": ("another-pre-session", token),
            "signed by another key": (
                pre_session,
                login_token(ServiceKey.ephemeral(), pre_session, now),
            ),
            "stale": (pre_session, login_token(service_key, pre_session, now - 3 * 3600)),
            "tampered": (pre_session, token[:-2] + ("AA" if token[-2:] != "AA" else "BB")),
            # "\u00b2".isdigit() holds, yet int() cannot read it: a 500 it was
            "not ASCII digits": (pre_session, "\u00b2." + token.partition(".")[2]),
        }
        for case, (cookie, field) in attempts.items():
            client.cookies.clear()
            client.cookies.set(LOGIN_CSRF_COOKIE, cookie, path="/login")
            refused = await client.post("/login", data={"token": _token(adj), "_csrf": field})
            assert refused.status_code == 403, case
            assert "srej_session" not in refused.headers.get("set-cookie", ""), case
        client.cookies.clear()
        client.cookies.set(LOGIN_CSRF_COOKIE, pre_session, path="/login")
        taken = await client.post(
            "/login", data={"token": _token(adj), "_csrf": token}, follow_redirects=False
        )
        assert taken.status_code == 303


async def test_a_form_another_sites_page_sent_opens_no_session_and_changes_nothing(
    api_client: Any, tokens: Any
) -> None:
    """Anyone can fetch a sign-in form's (cookie, token) pair for themselves, and a
    sibling host (evil.example.com beside judge.example.com) can plant that cookie in a
    visitor's browser and post the form with the matching token and its own API token.
    The form is taken only from a page of this origin: the browser's Sec-Fetch-Site must
    say same-origin (or none, the user's own navigation), or, from a browser that sends
    none, its Origin must be the app's own. Refused: 403, no session cookie. A signed-in
    session's forms are held to the same."""
    attacker, ada = await tokens("adjudicator", "Mallory"), await tokens("adjudicator", "Ada")
    async with api_client() as client:

        async def sent_from(headers: dict[str, str], who: dict[str, str] = attacker) -> Any:
            """A fresh form, fetched by the attacker, posted with ``headers``."""
            form = await client.get("/login")  # the attacker's own visit
            pre_session, token = form.cookies.get(LOGIN_CSRF_COOKIE), csrf_of(form.text)
            assert pre_session
            client.cookies.clear()  # the visitor's browser, the cookie planted in it
            client.cookies.set(LOGIN_CSRF_COOKIE, pre_session, path="/login")
            return await client.post(
                "/login",
                data={"token": _token(who), "_csrf": token, "next": "/queue"},
                headers=headers,
                follow_redirects=False,
            )

        for refused_from in (
            {"Origin": "https://evil.example.com", "Sec-Fetch-Site": "same-site"},
            {"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"},
            {"Origin": "https://evil.example.com"},  # a browser that sends no Sec-Fetch-Site
            {"Origin": "http://testserver.local:8080"},  # another port: another origin
            {"Origin": "https://testserver.local"},  # another scheme
            {"Origin": "null"},  # an opaque origin: a sandboxed frame, a data: page
        ):
            refused = await sent_from(refused_from)
            assert refused.status_code == 403, (refused_from, refused.status_code)
            assert "srej_session" not in refused.headers.get("set-cookie", ""), refused_from
        for own in (
            {"Origin": "http://testserver.local", "Sec-Fetch-Site": "same-origin"},
            {"Origin": "http://TestServer.local:80"},  # the same origin, written otherwise
            {"Sec-Fetch-Site": "none"},  # the user's own navigation
            {},  # no browser at all: a script
        ):
            taken = await sent_from(own, ada)
            assert taken.status_code == 303, (own, taken.text)
        csrf = csrf_of((await client.get("/gradings")).text)
        cross = {"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"}
        out = await client.post(
            "/logout", data={"_csrf": csrf}, headers=cross, follow_redirects=False
        )
        assert out.status_code == 403
        assert (await client.get("/gradings", follow_redirects=False)).status_code == 200


def _multipart(fields: dict[str, bytes]) -> bytes:
    parts = [
        b'--XX\r\nContent-Disposition: form-data; name="' + name.encode() + b'"\r\n\r\n'
        + value + b"\r\n"
        for name, value in fields.items()
    ]  # fmt: skip
    return b"".join(parts) + b"--XX--\r\n"


@pytest.mark.parametrize("field", ["_csrf", "reason"])
async def test_a_form_that_is_not_url_encoded_is_refused_and_the_session_stays(
    api_client: Any, tokens: Any, field: str
) -> None:
    """A page takes only a URL-encoded form: a multipart body, even one whose fields are
    not UTF-8 (a Latin-1 'é'), gets 415 before anything reads it, and the session it came
    with stays signed in."""
    adj = await tokens("adjudicator")
    async with api_client() as client:
        csrf = await sign_in(client, adj)
        fields = {"_csrf": csrf.encode(), "reason": b"caf\xe9"}
        if field == "_csrf":
            fields["_csrf"] = b"caf\xe9"
        sent = await client.post(
            "/logout",
            content=_multipart(fields),
            headers={"Content-Type": "multipart/form-data; boundary=XX"},
            follow_redirects=False,
        )
        assert sent.status_code == 415, (sent.status_code, sent.text[-400:])
        assert (await client.get("/gradings", follow_redirects=False)).status_code == 200


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil"])
async def test_after_sign_in_the_browser_stays_on_this_host(
    api_client: Any, tokens: Any, target: str
) -> None:
    adj = await tokens("adjudicator")
    async with api_client() as client:
        form = await client.get("/login")
        response = await client.post(
            "/login",
            data={"token": _token(adj), "_csrf": csrf_of(form.text), "next": target},
            follow_redirects=False,
        )
        assert response.headers["location"] == "/"


async def test_signing_out_ends_the_session_on_the_server(
    api_client: Any, tokens: Any, engine: Engine, service_key: ServiceKey
) -> None:
    """Signing in and out are audit events by the token; a second sign-out is none."""
    adj = await tokens("adjudicator")
    async with api_client() as client:
        csrf = await sign_in(client, adj)
        stolen = client.cookies.get("srej_session")
        refused = await client.post("/logout", data={}, follow_redirects=False)
        assert refused.status_code == 403  # no CSRF token: the session stays
        response = await client.post("/logout", data={"_csrf": csrf}, follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"] == "/login"
        client.cookies.set("srej_session", stolen or "")
        assert (await client.get("/gradings", follow_redirects=False)).status_code == 303
    with engine.connect() as connection:
        events = connection.execute(
            text("SELECT event, actor, entity_id FROM audit_log WHERE entity_type = 'web_session'")
        ).all()
        token_id = connection.execute(text("SELECT id FROM api_token")).scalar_one()
    assert [(e, a) for e, a, _ in events] == [
        ("session.opened", token_id), ("session.ended", token_id)
    ], events  # fmt: skip
    assert events[0].entity_id == events[1].entity_id != stolen  # its hash, not the cookie
    assert (await verify_chain(engine, key=ChainKey.of(service_key))).ok


async def test_revoking_the_token_ends_its_sessions(api_client: Any, tokens: Any) -> None:
    admin, adj = await tokens("admin"), await tokens("adjudicator", "Ada")
    async with api_client() as client:
        await sign_in(client, adj)
        assert (await client.get("/gradings")).status_code == 200
        listed = (await client.get("/v1/tokens", headers=admin)).json()
        token_id = next(t["id"] for t in listed if t["name"] == "Ada")
        revoked = await client.post(f"/v1/tokens/{token_id}/revoke", headers=admin)
        assert revoked.status_code == 200, revoked.text
        response = await client.get("/gradings", follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"].startswith("/login")


async def test_every_html_answer_admits_only_the_apps_own_scripts(
    api_client: Any, tokens: Any
) -> None:
    adj = await tokens("adjudicator")
    async with api_client() as client:
        _assert_own_scripts_only(await client.get("/login"))
        docs = await client.get("/schema")
        assert docs.status_code == 200
        _assert_own_scripts_only(docs)
        assert "cdn" not in docs.text.lower()
        for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', docs.text):
            assert (await client.get(asset)).status_code == 200, asset
        await sign_in(client, adj)
        for path in ("/queue", "/gradings", "/gradings/unknown"):
            response = await client.get(path)
            assert response.headers["content-type"].startswith("text/html"), path
            _assert_own_scripts_only(response)
        assert (await client.get("/gradings/unknown")).status_code == 404


async def test_roles_a_submitter_gets_no_queue_and_no_override(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    async with api_client() as client:
        csrf = await sign_in(client, agent)
        assert (await client.get("/queue")).status_code == 403
        assert (await client.get("/queue/next", follow_redirects=False)).status_code == 403
        response = await client.post(
            "/gradings/x/overrides", data={"_csrf": csrf, "reason": "mine", "verdict": "pass"}
        )
        assert response.status_code == 403
