"""A submitter's page of a grading against a registered scenario shows what its API
answer holds (``SRE_JUDGE_SUBMITTER_VIEW``) and nothing a judge or a code check derived
from the ground truth: no judge's answer, quote, reasoning or veto."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import sign_in

TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
    "The USER_PORT env var of user-service is set to 9999, so its callers are refused."
)
#: a wrong port: a code check vetoes the judge's yes to D2-Q2
DIAGNOSIS = (
    "The user-service deployment in hotel-reservation is misconfigured: its container "
    "listens on port 8080, so the frontend's calls to it are refused."
)


@pytest.mark.parametrize("view", ["verdict", "answers"])
async def test_the_page_shows_the_submitters_view(api_client: Any, tokens: Any, view: str) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent")
    async with api_client(submitter_view=view) as c:
        await c.post("/v1/scenarios", json={"id": "s", "ground_truth": TRUTH}, headers=admin)
        posted = await c.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "scenario_id": "s"},
            headers=agent,
        )
        grading_id = posted.json()["id"]
        full = (await c.get(f"/v1/gradings/{grading_id}", headers=admin)).json()
        await sign_in(c, agent)
        page = (await c.get(f"/gradings/{grading_id}")).text
        listing = (await c.get("/gradings")).text
    d2q2 = next(a for a in full["answers"] if a["question_id"] == "D2-Q2")
    assert (d2q2["judge_answer"], d2q2["answer"]) == ("yes", "no")  # the test can fail
    assert f'data-view="{view}"' in page and grading_id in listing
    assert 'data-testid="ground-truth-withheld"' in page
    for derived in ("judge:", "found in the diagnosis", "scripted judge", "9999", "USER_PORT"):
        assert derived not in page, derived
    if view == "answers":
        assert 'data-testid="answer-D2-Q2">NO<' in page
    else:
        assert 'data-testid="answer-' not in page


async def test_the_page_of_a_grading_a_promote_replaced_links_the_one_that_counts(
    api_client: Any, tokens: Any
) -> None:
    """A submitter opening the grading its submission's answer named, after a promoted
    regrade, reads that it was replaced and follows the link to the grading in force."""
    from tests.support.regrades import promote_regrade

    admin, agent = await tokens("admin"), await tokens("submitter", "agent")
    async with api_client() as c:
        await c.post("/v1/scenarios", json={"id": "s", "ground_truth": TRUTH}, headers=admin)
        posted = await c.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "scenario_id": "s"},
            headers=agent,
        )
        first = posted.json()["id"]
        await sign_in(c, agent)
        before = (await c.get(f"/gradings/{first}")).text
        await promote_regrade(c, admin, "scripted:fail")
        [in_force] = (await c.get("/v1/gradings", headers=agent)).json()["items"]
        replaced = (await c.get(f"/gradings/{first}")).text
        followed = await c.get(f"/gradings/{in_force['id']}")
    assert 'data-testid="superseded"' not in before
    assert 'data-testid="superseded"' in replaced and 'data-view="verdict"' in replaced
    assert f'<a href="/gradings/{in_force["id"]}" data-testid="superseded-by">' in replaced
    assert followed.status_code == 200 and 'data-testid="superseded"' not in followed.text
