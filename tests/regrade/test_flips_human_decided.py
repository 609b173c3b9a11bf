"""The flip report on effective verdicts compares an unscored grading a human decided: a
verdict override puts a verdict in force (pass rates and ``/v1/stats/compare`` count it),
so the report counts the pair as a flip or the same, as those reports pair it."""

from __future__ import annotations

import csv
import io
from typing import Any

from judge.backends.scripted import ScriptedBackend
from tests.regrade.test_regrade_api import _finished
from tests.support.submissions import DIAGNOSIS, TRUTH

OLD, NEW = "scripted:garbage", "scripted:fail"


def _backends() -> dict[str, Any]:
    return {spec: ScriptedBackend.for_mode(spec.split(":")[1]) for spec in (OLD, NEW)}


async def _reports(c: Any, admin: dict[str, str], job_id: str, arms: dict[str, str]) -> Any:
    """The job's flip report as JSON and CSV, and ``/v1/stats/compare`` of ``arms``."""
    flips = (await c.get(f"/v1/regrade-jobs/{job_id}/flips", headers=admin)).json()
    as_csv = await c.get(
        f"/v1/regrade-jobs/{job_id}/flips", params={"format": "csv"}, headers=admin
    )
    compare = await c.get("/v1/stats/compare", params=arms, headers=admin)
    return flips, as_csv.text, compare.json()


async def _override(client: Any, grading_id: str, headers: dict[str, str], body: Any) -> Any:
    etag = (await client.get(f"/v1/gradings/{grading_id}", headers=headers)).headers["etag"]
    reply = await client.post(
        f"/v1/gradings/{grading_id}/overrides", json=body, headers={**headers, "If-Match": etag}
    )
    assert reply.status_code in (200, 201), reply.text
    return reply.json()


async def test_an_unscored_grading_a_human_passed_flips_to_the_new_judges_fail(
    api_client: Any, tokens: Any
) -> None:
    """The judge could not score the diagnosis, a shadow regrade by a new judge fails it,
    then an adjudicator passes the old grading by a verdict override: old PASS (the
    human's), new FAIL, one pass->fail flip, as ``/v1/stats/compare`` pairs the same two
    gradings (one discordant attempt)."""
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator", "Ada")
    async with api_client(judge=OLD, backends=_backends()) as c:
        made = await c.post(
            "/v1/scenarios", json={"id": "hotel/port", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        graded = await c.post(
            "/v1/submissions?wait=10",
            json={"scenario_id": "hotel/port", "diagnosis": DIAGNOSIS, "agent": "a"},
            headers=admin,
        )
        old = graded.json()
        assert old["status"] == "unscored", old
        job = await c.post("/v1/regrade-jobs", json={"judge": NEW, "mode": "shadow"}, headers=admin)
        assert job.status_code == 201, job.text
        job_id = job.json()["id"]
        assert (await _finished(c, admin, job_id))["state"] == "done"
        decided = await _override(
            c, old["id"], adjudicator, {"verdict": "pass", "reason": "names the port mismatch"}
        )
        assert (decided["status"], decided["passed"]) == ("unscored", True)

        flips, flips_csv, compare = await _reports(
            c, admin, job_id, {"a.judge": OLD, "b.judge": NEW, "b.include": "shadow"}
        )

    # /v1/stats/compare pairs the very two gradings: a (old) passed, b (new) failed
    assert compare["difference"]["pairs"] == {"both": 0, "only_a": 1, "only_b": 0, "neither": 0}
    [row] = list(csv.DictReader(io.StringIO(flips_csv)))
    assert (row["previous_passed"], row["passed"]) == ("True", "False")
    assert row["flip"] == "pass->fail", row
    assert flips["compared"] == 1, flips["not_compared"]
    assert flips["pass_to_fail"]["count"] == 1
    assert flips["pass_rates"]["old"]["n"] == compare["a"]["outcome"]["n"] == 1
    assert flips["pass_rates"]["new_minus_old"]["pairs"] == {
        "both": 0, "only_a": 0, "only_b": 1, "neither": 0,
    }  # fmt: skip


async def test_a_human_fail_carried_onto_an_unscored_regrade_is_the_same_not_left_out(
    api_client: Any, tokens: Any
) -> None:
    """The old grading passed by the judge and failed by a human, a shadow regrade by a
    judge that cannot score it carries the human's fail onto the new, unscored grading:
    fail -> fail is ``same`` and compared, as ``/v1/stats/compare`` pairs them
    (``neither`` 1)."""
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator", "Ada")
    backends = {spec: ScriptedBackend.for_mode(spec.split(":")[1])
                for spec in ("scripted:pass", OLD)}  # fmt: skip
    async with api_client(judge="scripted:pass", backends=backends) as c:
        made = await c.post(
            "/v1/scenarios", json={"id": "hotel/port", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        old = (
            await c.post(
                "/v1/submissions?wait=10",
                json={"scenario_id": "hotel/port", "diagnosis": DIAGNOSIS, "agent": "a"},
                headers=admin,
            )
        ).json()
        assert old["passed"] is True, old
        await _override(c, old["id"], adjudicator, {"verdict": "fail", "reason": "wrong fault"})
        job = await c.post("/v1/regrade-jobs", json={"judge": OLD, "mode": "shadow"}, headers=admin)
        assert job.status_code == 201, job.text
        job_id = job.json()["id"]
        # ``failed``: every item unscored, as the docs say of such a job
        assert (await _finished(c, admin, job_id))["state"] == "failed"
        flips, flips_csv, compare = await _reports(
            c, admin, job_id, {"a.judge": "scripted:pass", "b.judge": OLD, "b.include": "shadow"}
        )

    assert compare["difference"]["pairs"] == {"both": 0, "only_a": 0, "only_b": 0, "neither": 1}
    [row] = list(csv.DictReader(io.StringIO(flips_csv)))
    assert (row["status"], row["previous_passed"], row["passed"]) == ("unscored", "False", "False")
    assert row["flip"] == "same", row
    assert flips["compared"] == 1, flips["not_compared"]
    assert flips["pass_rates"]["new_minus_old"]["pairs"] == compare["difference"]["pairs"]
