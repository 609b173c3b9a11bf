"""``If-Match`` names a revision this service gave out, or the write is refused with 412
naming the header (428 without one): never a 500, whatever the header holds."""

from __future__ import annotations

from typing import Any

import pytest

from api.http.preconditions import expected_revision
from api.http.problems import ApiProblem


@pytest.mark.parametrize(
    "header",
    [
        '"\u00b2"',  # the header byte 0xB2 as read: a digit to str.isdigit, not to int
        '"\u0663"',  # ARABIC-INDIC DIGIT THREE
        'W/"3"',  # weak: If-Match compares strongly
        '"1234567890123456789"',
        '"-1"',
        "*",
        '"3", "4"',
        '"03"',  # compared character by character: not the ETag "3"
        "3",  # unquoted
        '""3""',
    ],
)
def test_an_if_match_that_names_no_revision_of_ours_is_412(header: str) -> None:
    with pytest.raises(ApiProblem) as refused:
        expected_revision(header, what="overrides need If-Match")
    assert (refused.value.status, refused.value.field) == (412, "If-Match")


@pytest.mark.parametrize("header", ["*", " * ", '"3", "4"', '"3",'])
def test_a_list_or_a_star_in_if_match_is_refused_saying_to_send_the_etag_read(
    header: str,
) -> None:
    with pytest.raises(ApiProblem) as refused:
        expected_revision(header, what="overrides need If-Match")
    assert refused.value.status == 412 and "the one ETag you read" in str(refused.value.detail)


def test_if_match_names_the_revision_and_is_required() -> None:
    assert expected_revision('"42"', what="x") == 42
    with pytest.raises(ApiProblem) as missing:
        expected_revision(None, what="overrides need If-Match")
    assert (missing.value.status, missing.value.field) == (428, "If-Match")


async def test_a_stale_if_match_and_a_body_too_large_name_their_field(
    api_client: Any, tokens: Any
) -> None:
    """Every problem names the field at fault: the usual stale If-Match (raised by the
    write, not by reading the header) named nothing, nor did the framework's own 413."""
    admin = await tokens("admin")
    truth = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT=7777"
    async with api_client(max_body_bytes=4096) as client:
        made = await client.post("/v1/scenarios", json={"id": "s/3", "ground_truth": truth},
                                 headers=admin)  # fmt: skip
        assert made.status_code == 201, made.text
        stale = await client.put(
            "/v1/scenarios/s/3",
            json={"ground_truth": truth + " (fixed)"},
            headers={**admin, "If-Match": '"2"'},
        )
        assert stale.status_code == 412
        assert stale.json()["errors"][0]["field"] == "If-Match"
        body = {"diagnosis": "d", "scenario_id": "s/3", "metadata": {"x": "y" * 8000}}
        large = await client.post("/v1/submissions", json=body, headers=admin)
        assert large.status_code == 413
        assert large.headers["content-type"].startswith("application/problem+json")
        assert large.json()["errors"][0]["field"] == "body"


async def test_if_match_in_two_lines_is_a_list_and_refused_like_one_line(
    api_client: Any, tokens: Any
) -> None:
    """``If-Match`` sent as two header lines is one list of ETags (RFC 9110 5.3), refused
    with 412 as the same list on one line is: the write is not made."""
    admin = await tokens("admin")
    truth = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT=7777"
    async with api_client(start_workers=False) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "s/1", "ground_truth": truth}, headers=admin
        )
        assert made.status_code == 201, made.text
        assert made.headers["etag"] == '"1"'
        one_line = await client.put(
            "/v1/scenarios/s/1",
            json={"ground_truth": truth + " (fixed)"},
            headers={**admin, "If-Match": '"1", "5"'},
        )
        assert one_line.status_code == 412, one_line.text
        two_lines = await client.put(
            "/v1/scenarios/s/1",
            json={"ground_truth": truth + " (fixed)"},
            headers=[
                ("Authorization", admin["Authorization"]),
                ("If-Match", '"1"'),
                ("If-Match", '"5"'),
            ],
        )
        assert two_lines.status_code == 412, two_lines.text
        assert two_lines.json()["errors"][0]["field"] == "If-Match"
        kept = await client.get("/v1/scenarios/s/1", headers=admin)
        assert kept.json()["version"] == 1
