"""Input no database can store is a 4xx naming the field, never a 500, and stores nothing
(on SQLite and PostgreSQL: NUL characters, huge integers, edge dates, deep JSON)."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from storage.imports.tables import ImportJobRecord
from tests.support.submissions import DIAGNOSIS, TRUTH, count_submissions
from tests.web.conftest import sign_in

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

BASE = {"diagnosis": "user-service sets USER_PORT=9999", "ground_truth": "USER_PORT=9999"}
EDGE_DATE = "9999-12-31T23:59:59-14:00"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**BASE, "agent": "a\x00b"}, "agent"),
        ({**BASE, "model": "m\x00"}, "model"),
        ({**BASE, "run_id": "\x00"}, "run_id"),
        ({**BASE, "diagnosis": "broken\x00"}, "diagnosis"),
        ({**BASE, "metadata": {"note": "x\x00y"}}, "metadata.note"),
        ({**BASE, "metadata": {"k\x00": 1}}, "metadata.k\x00"),
        ({**BASE, "attempt": 2**31}, "attempt"),
        ({**BASE, "attempt": 2**63}, "attempt"),
        ({**BASE, "attempt": "3"}, "attempt"),
        ({**BASE, "agent": 7}, "agent"),
    ],
)
async def test_unstorable_submissions_are_422_naming_the_field(
    api_client: Any, tokens: Any, engine: Engine, body: dict[str, Any], field: str
) -> None:
    agent = await tokens("submitter")
    async with api_client() as client:
        answer = await client.post("/v1/submissions", json=body, headers=agent)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert any(e["field"] == field for e in answer.json()["errors"]), answer.json()
    assert await count_submissions(engine) == 0


@pytest.mark.parametrize("header", ["Idempotency-Key", "If-Match"])
async def test_a_stored_header_with_a_nul_is_422_naming_it(
    api_client: Any, tokens: Any, engine: Engine, header: str
) -> None:
    """An idempotency key is stored with its submission (PostgreSQL refuses a NUL in
    text: it was a 500 there, stored as sent on SQLite)."""
    agent = await tokens("submitter")
    async with api_client() as client:
        answer = await client.post(
            "/v1/submissions", json=BASE, headers={**agent, header: b"a\x00b"}
        )
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"] == header
    assert await count_submissions(engine) == 0


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ([b"run-\xff\xfe"], "visible ASCII"),  # not UTF-8 either
        (["запуск-7".encode()], "visible ASCII"),  # UTF-8: read as Latin-1 it is other text
        ([b"run\x01"], "visible ASCII"),
        ([b"run-1", b"run-2"], "more than once"),  # which one was meant is unknown
    ],
)
async def test_an_idempotency_key_outside_visible_ascii_or_sent_twice_is_400_naming_it(
    api_client: Any, tokens: Any, engine: Engine, keys: list[bytes], says: str
) -> None:
    """A key is stored and compared as text: header bytes beyond ASCII would be stored as
    other text than the client's (its retry with the key it meant would not replay), and
    of two keys one would be dropped silently. Nothing is stored."""
    agent = await tokens("submitter")
    headers = httpx.Headers(
        [("Authorization", agent["Authorization"]), *(("Idempotency-Key", k) for k in keys)]
    )
    async with api_client(start_workers=False) as client:
        answer = await client.post("/v1/submissions", json=BASE, headers=headers)
    assert answer.status_code == 400, answer.text
    error = answer.json()["errors"][0]
    assert error["field"] == "Idempotency-Key" and says in error["message"]
    assert await count_submissions(engine) == 0


async def test_an_idempotency_key_with_spaces_and_punctuation_is_taken(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """Every visible ASCII character and the space may be part of a key."""
    agent = await tokens("submitter")
    key = "run 17/attempt:1 ~!\"#$%&'()*+,-.;<=>?@[]^_`{|}"
    async with api_client(start_workers=False) as client:
        answer = await client.post(
            "/v1/submissions", json=BASE, headers={**agent, "Idempotency-Key": key}
        )
        again = await client.post(
            "/v1/submissions", json=BASE, headers={**agent, "Idempotency-Key": key}
        )
    assert answer.status_code == 202 and again.status_code == 202, answer.text
    assert again.json()["id"] == answer.json()["id"]
    assert again.headers.get("Idempotent-Replayed") == "true"


async def test_a_lone_surrogate_is_refused(api_client: Any, tokens: Any) -> None:
    agent = await tokens("submitter")
    raw = json.dumps(BASE)[:-1] + ', "agent": "\\ud800x"}'
    headers = {**agent, "content-type": "application/json"}
    async with api_client() as client:
        answer = await client.post("/v1/submissions", content=raw, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "agent"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/gradings?agent=%00",
        "/v1/gradings?scenario_id=a%00b",
        "/v1/gradings?created_after=not-a-date",
    ],
)
async def test_unstorable_filters_are_422_naming_the_parameter(
    api_client: Any, tokens: Any, path: str
) -> None:
    agent = await tokens("submitter")
    async with api_client() as client:
        answer = await client.get(path.replace("+", "%2B"), headers=agent)
    assert answer.status_code == 422, answer.text
    name = path.split("?")[1].split("=")[0]
    problem = answer.json()
    assert problem["errors"] == [{"field": name, "message": problem["detail"]}]
    assert problem["detail"].startswith(f"{name}: ")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/gradings?agent=%ff", "agent"),
        ("/v1/scenarios?set=%ff", "set"),
        ("/v1/stats/pass-rates?agent=caf%e9", "agent"),
        ("/v1/gradings?agent=%ED%A0%80", "agent"),  # UTF-8's form of a lone surrogate
        ("/v1/gradings?agent=a&caf%e9=1", "caf\\udce9"),
    ],
)
async def test_a_query_parameter_that_is_not_utf8_is_400_naming_it(
    api_client: Any, tokens: Any, path: str, field: str
) -> None:
    """A query name or value whose bytes are not UTF-8 text is refused naming it, never
    read as U+FFFD and filtered on (a name shown escaped, as in a body)."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        answer = await client.get(path, headers=admin)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in answer.json()["errors"]] == [field], answer.text


async def _raw_get(app: Any, path: str, query: bytes, headers: dict[str, str]) -> Any:
    """GET ``path?query`` straight through the ASGI app, the query's bytes as sent (an
    HTTP client would percent-encode them first): (status, JSON body)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query,
        "root_path": "", "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
        "headers": [(b"host", b"testserver")]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


async def test_a_query_sent_as_raw_utf8_bytes_is_read_as_that_text(
    api_client: Any, tokens: Any
) -> None:
    """A query whose non-ASCII text is sent as raw UTF-8 bytes, not percent-encoded,
    filters on that text (never on its bytes read as Latin-1); raw bytes that are not
    UTF-8 are refused with 400 naming the parameter."""
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "agent": "café"}
        made = await client.post("/v1/submissions?wait=10", json=body, headers=admin)
        assert made.status_code == 201, made.text
        status, listed = await _raw_get(client.app, "/v1/gradings", b"agent=caf\xc3\xa9", admin)
        assert status == 200, listed
        assert [g["submission"]["agent"] for g in listed["items"]] == ["café"]
        status, refused = await _raw_get(client.app, "/v1/gradings", b"agent=caf\xe9", admin)
    assert status == 400, refused
    assert [e["field"] for e in refused["errors"]] == ["agent"]


@pytest.mark.parametrize(
    "reason",
    ["caf%e9+is+not+named", "café is named"],
    ids=["not UTF-8", "raw bytes"],
)
async def test_a_page_form_of_text_it_cannot_read_as_sent_is_refused(
    api_client: Any, tokens: Any, reason: str
) -> None:
    """A page's form whose value is not UTF-8 text (a verdict override's reason sent as
    ``caf%e9``), or whose text is raw bytes, not percent-encoded as browsers send it
    (``café``), is refused with 400 and stores nothing: never kept with U+FFFD where the
    byte was, nor read as other text (``cafÃ©``)."""
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        sent = await c.post(
            "/v1/submissions?wait=10",
            json={"ground_truth": TRUTH, "diagnosis": DIAGNOSIS},
            headers=ada,
        )
        grading = sent.json()
        csrf = await sign_in(c, ada)
        body = (
            f"_csrf={csrf}&kind=verdict&verdict=fail&reason={reason}&revision={grading['revision']}"
        ).encode()
        answer = await c.post(
            f"/gradings/{grading['id']}/overrides",
            content=body,
            headers={"content-type": "application/x-www-form-urlencoded"},
            follow_redirects=False,
        )
        after = (await c.get(f"/v1/gradings/{grading['id']}", headers=ada)).json()
    assert answer.status_code == 400, (answer.status_code, answer.headers.get("location"))
    assert after["overrides"] == []


#: the earliest date-time there is, which leaves the calendar once moved to UTC
FIRST_DATE = "0001-01-01T00:00:00%2B14:00"


@pytest.mark.parametrize(
    ("path", "total"),
    [
        ("/v1/stats/pass-rates", lambda body: body["overall"]["n"]),
        ("/v1/stats/questions", lambda body: max((q["n"] for q in body["questions"]), default=0)),
        ("/v1/gradings", lambda body: len(body["items"])),
    ],
)
async def test_a_date_bound_beyond_the_stored_years_reads_as_their_end(
    api_client: Any, tokens: Any, path: str, total: Any
) -> None:
    """Dates up to year 9999 with any offset are answered, not refused: a bound before
    1900 or after 9000 selects what the end of the stored range selects."""
    admin = await tokens("admin")
    async with api_client() as client:
        graded = await client.post("/v1/submissions?wait=10", json=BASE, headers=admin)
        assert graded.status_code == 201, graded.text

        async def count(query: str) -> int:
            # the ground truth is inline: reports mix it in only when asked
            mixed = "&inline=include" if path.startswith("/v1/stats") else ""
            answer = await client.get(f"{path}?{query}{mixed}", headers=admin)
            assert answer.status_code == 200, answer.text
            return int(total(answer.json()))

        assert await count(f"created_before={EDGE_DATE}") == 1
        assert await count(f"created_after={FIRST_DATE}") == 1
        assert await count(f"created_after={EDGE_DATE}") == 0
        assert await count(f"created_before={FIRST_DATE}") == 0


@pytest.mark.parametrize(
    "path",
    [
        "/v1/gradings",
        "/v1/scenarios",
        "/v1/stats/pass-rates",
        "/v1/stats/questions",
        "/v1/stats/attempts",
        "/v1/exports/gradings",
    ],
)
async def test_a_date_without_offset_is_utc_and_a_compact_one_is_no_epoch(
    api_client: Any, tokens: Any, path: str
) -> None:
    """``created_after=2024-01-01T00:00:00`` (no offset) was a 500 on every filtered
    read, and ``20240101`` (ISO's basic format) was read as seconds since 1970."""
    admin = await tokens("admin")
    async with api_client() as client:
        graded = await client.post("/v1/submissions?wait=10", json=BASE, headers=admin)
        assert graded.status_code == 201, graded.text
        for value in ("2024-01-01T00:00:00", "20240101", "29990101"):
            answer = await client.get(path, params={"created_after": value}, headers=admin)
            assert answer.status_code == 200, (value, answer.text)
        listed = await client.get("/v1/gradings?created_after=29990101", headers=admin)
        assert listed.json()["items"] == []  # the year 2999, not 1970
        since = await client.get("/v1/stats/attempts?created_after=20240101", headers=admin)
        assert since.json()["since"].startswith("2024-01-01")


@pytest.mark.parametrize(
    ("value", "since"),
    [
        ("2024-01-01T00:00:00z", "2024-01-01T00:00:00Z"),  # a lower-case z
        ("2024-01-01t12:00:00Z", "2024-01-01T12:00:00Z"),  # a lower-case t
        ("2016-12-31T23:59:60Z", "2017-01-01T00:00:00Z"),  # a leap second
    ],
)
async def test_every_rfc3339_date_time_is_taken_as_a_filter_bound(
    api_client: Any, tokens: Any, value: str, since: str
) -> None:
    """A filter bound takes any RFC 3339 date-time: ``t`` and ``z`` in either case, and a
    leap second, read as the next minute's first second."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        listed = await client.get("/v1/gradings", params={"created_after": value}, headers=admin)
        counted = await client.get(
            "/v1/stats/attempts", params={"created_after": value}, headers=admin
        )
    assert listed.status_code == 200, listed.text
    assert counted.status_code == 200, counted.text
    assert counted.json()["since"] == since


async def test_a_comparison_takes_edge_dates_in_either_arm(api_client: Any, tokens: Any) -> None:
    admin = await tokens("admin")
    async with api_client() as client:
        await client.post("/v1/submissions?wait=10", json=BASE, headers=admin)
        answer = await client.get(
            f"/v1/stats/compare?a.created_before={EDGE_DATE}&b.created_after={FIRST_DATE}"
            "&a.inline=include&b.inline=include",
            headers=admin,
        )
    assert answer.status_code == 200, answer.text
    arms = answer.json()
    assert arms["a"]["outcome"]["n"] == arms["b"]["outcome"]["n"] == 1


@pytest.mark.parametrize(
    "expires_at",
    [EDGE_DATE, "8999-12-31T23:00:00-05:00"],  # the second is 9000-01-01T04:00 in UTC
    ids=["edge", "past-it-once-in-utc"],
)
async def test_a_token_expiring_past_the_storable_range_is_refused(
    api_client: Any, tokens: Any, expires_at: str
) -> None:
    """An expiry is checked against the stored range as it is stored: in UTC."""
    admin = await tokens("admin")
    async with api_client() as client:
        answer = await client.post(
            "/v1/tokens",
            json={"name": "forever", "role": "submitter", "expires_at": expires_at},
            headers=admin,
        )
        listed = (await client.get("/v1/tokens", headers=admin)).json()
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"] == "expires_at"
    assert not any(token["name"] == "forever" for token in listed)  # nothing stored


@pytest.mark.parametrize("route", ["/v1/submissions", "/v1/scenarios", "/v1/tokens"])
async def test_json_nested_too_deep_is_400_on_any_route(
    api_client: Any, tokens: Any, engine: Engine, route: str
) -> None:
    admin = await tokens("admin")
    deep = "[" * 2000 + "]" * 2000
    raw = json.dumps(BASE)[:-1] + f', "metadata": {{"a": {deep}}}}}'
    headers = {**admin, "content-type": "application/json"}
    async with api_client() as client:
        answer = await client.post(route, content=raw, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json()["errors"][0]["field"] == "metadata"  # the field it is nested under
    assert await count_submissions(engine) == 0


async def test_brackets_inside_strings_do_not_count_as_depth(api_client: Any, tokens: Any) -> None:
    agent = await tokens("submitter")
    body = {**BASE, "diagnosis": "[" * 500 + " logs show {{{{ " * 20}
    async with api_client() as client:
        answer = await client.post("/v1/submissions", json=body, headers=agent)
    assert answer.status_code == 202, answer.text


@pytest.mark.parametrize(
    ("content", "content_type", "status", "field"),
    [
        ('{"diagnosis": ', "application/json", 400, "body"),
        (json.dumps(BASE), "text/plain", 415, "Content-Type"),
        (json.dumps(BASE), "application/x-www-form-urlencoded", 415, "Content-Type"),
    ],
)
async def test_a_body_that_is_not_json_is_refused_naming_it(
    api_client: Any,
    tokens: Any,
    engine: Engine,
    content: str,
    content_type: str,
    status: int,
    field: str,
) -> None:
    agent = await tokens("submitter")
    headers = {**agent, "content-type": content_type}
    async with api_client() as client:
        answer = await client.post("/v1/submissions", content=content, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["errors"][0]["field"] == field
    assert await count_submissions(engine) == 0


async def test_a_date_filter_must_be_a_date(api_client: Any, tokens: Any) -> None:
    agent = await tokens("submitter")
    async with api_client() as client:
        answer = await client.get("/v1/gradings?created_before=0.5", headers=agent)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "created_before"


@pytest.mark.parametrize(
    "payload",
    [
        ["9999-12-31T23:59:59-14:00", "a" * 32],
        ["0001-01-01T00:00:00+14:00", "a" * 32],
        ["2026-01-01T00:00:00+00:00", "a\u0000b"],
        ["2026-01-01T00:00:00+00:00", 7],
    ],
)
async def test_a_forged_cursor_is_refused_not_a_500(
    api_client: Any, tokens: Any, payload: list[Any]
) -> None:
    agent = await tokens("submitter")
    raw = json.dumps(payload, separators=(",", ":")).encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    async with api_client() as client:
        answer = await client.get(f"/v1/gradings?cursor={cursor}", headers=agent)
    assert answer.status_code == 400, answer.text
    assert answer.json()["title"] == "Invalid cursor"
    assert answer.json()["errors"][0]["field"] == "cursor"


@pytest.mark.parametrize(
    ("raw_key", "field"),
    [('"\\ud800"', "\\ud800"), ('"\\udc00x"', "\\udc00x")],
)
@pytest.mark.parametrize("where", ["top", "metadata"])
async def test_a_lone_surrogate_in_a_key_is_422_naming_the_field(
    api_client: Any, tokens: Any, engine: Engine, raw_key: str, field: str, where: str
) -> None:
    agent = await tokens("submitter")
    pair = f"{raw_key}: 1"
    tail = f", {pair}}}" if where == "top" else f', "metadata": {{{pair}}}}}'
    raw = json.dumps(BASE)[:-1] + tail
    headers = {**agent, "content-type": "application/json"}
    async with api_client() as client:
        answer = await client.post("/v1/submissions", content=raw, headers=headers)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    expected = field if where == "top" else f"metadata.{field}"
    assert answer.json()["errors"][0]["field"] == expected
    assert await count_submissions(engine) == 0


#: a body the routes' parser refuses as a whole for one value -> (status, field named)
ONE_BAD_VALUE = {
    "number out of range": (b'"attempt": 1e400', 422, "attempt"),
    "NaN": (b'"metadata": {"x": [1, NaN]}', 422, "metadata.x[1]"),
    "-Infinity": (b'"metadata": {"score": -Infinity}', 422, "metadata.score"),
    "5000 digits": (b'"attempt": ' + b"7" * 5000, 422, "attempt"),
    "not UTF-8": (b'"agent": "caf\xe9"', 400, "agent"),
    "not UTF-8 in a key": (b'"metadata": {"\xff": 1}', 400, "metadata.\\udcff"),
}


@pytest.mark.parametrize("case", sorted(ONE_BAD_VALUE))
async def test_a_body_refused_for_one_value_names_its_field(
    api_client: Any, tokens: Any, engine: Engine, case: str
) -> None:
    pair, status, field = ONE_BAD_VALUE[case]
    agent = await tokens("submitter")
    raw = json.dumps(BASE).encode()[:-1] + b", " + pair + b"}"
    headers = {**agent, "content-type": "application/json"}
    async with api_client() as client:
        answer = await client.post("/v1/submissions", content=raw, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["errors"][0]["field"] == field
    assert await count_submissions(engine) == 0


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"diagnosis": "port 9999", "diagnosis": "port 8086", "ground_truth": "g"}', "diagnosis"),
        ('{"diagnosis": "d", "ground_truth": "g", "metadata": {"a": 1, "a": 2}}', "metadata.a"),
    ],
)
async def test_a_key_given_twice_is_refused_naming_it_and_stores_nothing(
    api_client: Any, tokens: Any, engine: Engine, raw: str, field: str
) -> None:
    """Which of a repeated key's values the writer meant is unknown: a submission, a
    scenario or its new version is never made from a guess (the last value)."""
    agent, admin = await tokens("submitter"), await tokens("admin")
    json_body = {"Content-Type": "application/json"}
    async with api_client(start_workers=False) as client:
        sent = await client.post("/v1/submissions", content=raw, headers={**agent, **json_body})
        twice = '{"id": "hotel/p", "ground_truth": "port 9999", "ground_truth": "port 8086"}'
        made = await client.post("/v1/scenarios", content=twice, headers={**admin, **json_body})
        first = {"id": "hotel/q", "ground_truth": "port 9999"}
        assert (await client.post("/v1/scenarios", json=first, headers=admin)).status_code == 201
        put = await client.put(
            "/v1/scenarios/hotel/q",
            content='{"ground_truth": "a", "ground_truth": "b"}',
            headers={**admin, **json_body, "If-Match": '"1"'},
        )
        versions = await client.get("/v1/scenarios/hotel/q/versions", headers=admin)
        missing = await client.get("/v1/scenarios/hotel/p", headers=admin)
    assert (sent.status_code, sent.json()["errors"][0]["field"]) == (422, field), sent.text
    assert (made.status_code, made.json()["errors"][0]["field"]) == (422, "ground_truth")
    assert (put.status_code, put.json()["errors"][0]["field"]) == (422, "ground_truth")
    assert "given twice" in put.json()["detail"]
    assert await count_submissions(engine) == 0
    assert missing.status_code == 404
    assert len(versions.json()["items"]) == 1


@pytest.mark.parametrize(
    ("path", "content_type", "content"),
    [
        ("/v1/submissions", "application/json", json.dumps(BASE).encode()),
        ("/v1/imports", "application/x-ndjson", json.dumps(BASE).encode() + b"\n"),
    ],
)
async def test_a_body_in_a_content_coding_is_415_naming_content_encoding(
    api_client: Any,
    tokens: Any,
    engine: Engine,
    path: str,
    content_type: str,
    content: bytes,
) -> None:
    """A gzip-compressed body is refused with 415 naming ``Content-Encoding`` (a JSON
    body, an import's file alike), never read as if it were the content; nothing is
    stored and no import job starts."""
    admin = await tokens("admin")
    headers = {**admin, "Content-Type": content_type, "Content-Encoding": "gzip"}
    async with api_client(start_workers=False) as client:
        answer = await client.post(path, content=gzip.compress(content), headers=headers)
    assert answer.status_code == 415, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.headers["accept-encoding"] == "identity"
    assert answer.json()["errors"][0]["field"] == "Content-Encoding"
    assert await count_submissions(engine) == 0
    with engine.connect() as connection:
        jobs = connection.execute(select(func.count()).select_from(ImportJobRecord))
        assert jobs.scalar_one() == 0
