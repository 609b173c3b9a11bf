"""A registered scenario's ground truth never reaches a submitter, not even through what
the judge or an adjudicator wrote with it in view (reasoning, evidence, detail, notes),
nor through how soon its grading is done (the judge cache)."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from judge.backends.scripted import ScriptedBackend
from judge.calls import Completion, JudgeRequest

SPEC = "scripted:quoting"
TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation "
    "|| USER_PORT=9999 replaced 8086; mongodb-geo lost its replica"
)
VAGUE = "Something in the cluster is broken; requests fail."
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


def _truth_tokens() -> set[str]:
    """Every word or number of the ground truth that the diagnosis does not contain."""
    words = set(re.findall(r"[A-Za-z0-9_][A-Za-z0-9_./-]{3,}", TRUTH))
    return {w for w in words if w.lower() not in VAGUE.lower()}


def _quoting_judge(request: JudgeRequest) -> str:
    """A judge that repeats the ground truth in its reasoning and evidence."""
    entry = {
        "reasoning": f"the ground truth says {TRUTH}",
        "evidence": TRUTH,
        "answer": "yes",
        "confidence": "high",
    }
    return json.dumps({qid: entry for qid in IDS})


def _leaks(text: str) -> set[str]:
    # whole tokens only: a random hex id may hold "9999" or "8086" by chance
    return {
        token
        for token in _truth_tokens()
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", text)
    }


async def test_no_answer_a_submitter_gets_carries_a_ground_truth_token(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    judge = ScriptedBackend([_quoting_judge] * 4)
    answers: list[str] = []
    async with api_client(judge=SPEC, backends={SPEC: judge}) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201
        body = {"diagnosis": VAGUE, "scenario_id": "hotel/user-port"}
        sent = {**agent, "Idempotency-Key": "run-1"}
        first = await client.post("/v1/submissions?wait=10", json=body, headers=sent)
        grading_id = first.json()["id"]
        as_admin = await client.get(f"/v1/gradings/{grading_id}", headers=admin)
        etag = as_admin.headers["ETag"]
        override = await client.post(
            f"/v1/gradings/{grading_id}/overrides",
            json={"question_id": "D1-Q1", "answer": "no", "reason": f"not {TRUTH}"},
            headers={**admin, "If-Match": etag},
        )
        assert override.status_code == 201, override.text
        answers.append(first.text + json.dumps(dict(first.headers)))
        replay = await client.post("/v1/submissions?wait=10", json=body, headers=sent)
        answers.append(replay.text + json.dumps(dict(replay.headers)))
        for path in (f"/v1/gradings/{grading_id}", "/v1/gradings", "/v1/gradings?agent=agent-1"):
            got = await client.get(path, headers=agent)
            assert got.status_code == 200
            answers.append(got.text + json.dumps(dict(got.headers)))
        mine = (await client.get(f"/v1/gradings/{grading_id}", headers=agent)).json()
        seen_by_admin = (await client.get(f"/v1/gradings/{grading_id}", headers=admin)).text
    assert first.json()["status"] == "graded"
    # the judge and the adjudicator did write the ground truth down: the test can fail
    assert _leaks(seen_by_admin) == _truth_tokens()
    for text in answers:
        assert _leaks(text) == set(), text
    assert mine["view"] == "verdict" and {"answers", "overrides", "detail"} <= set(mine["withheld"])
    assert not {"answers", "overrides", "detail"} & set(mine)


async def test_a_submitter_sees_all_of_a_grading_against_its_own_ground_truth(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    judge = ScriptedBackend([_quoting_judge])
    async with api_client(judge=SPEC, backends={SPEC: judge}) as client:
        got = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": VAGUE, "ground_truth": TRUTH},
            headers=agent,
        )
    grading = got.json()
    assert grading["withheld"] == []
    assert grading["answers"][0]["reasoning"] == f"the ground truth says {TRUTH}"
    assert grading["submission"]["ground_truth"] == TRUTH


async def test_no_scenario_route_gives_a_submitter_a_ground_truth_or_its_versions(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    fixed = TRUTH.replace("9999", "9998")
    scenario = {"id": "hotel/user-port", "ground_truth": TRUTH, "title": TRUTH, "tags": ["t"]}
    answers: list[str] = []
    async with api_client() as client:
        await client.post("/v1/scenarios", json=scenario, headers=admin)
        put = {"ground_truth": fixed, "note": f"was {TRUTH}"}
        await client.put(
            "/v1/scenarios/hotel/user-port", json=put, headers={**admin, "If-Match": '"1"'}
        )
        path = "/v1/scenarios/hotel/user-port"
        refused = {}
        for suffix in ("", "/versions", "/versions/1", "/versions/2", "/versions/9"):
            got = await client.get(path + suffix, headers=agent)
            refused[suffix] = got.status_code
            answers.append(got.text + json.dumps(dict(got.headers)))
        for params in ({}, {"id_prefix": "hotel/"}, {"set": "default"}):
            listed = await client.get("/v1/scenarios", params=params, headers=agent)
            assert listed.status_code == 200 and listed.json()["items"]
            answers.append(listed.text + json.dumps(dict(listed.headers)))
        for method, body in (("put", put), ("post", None)):
            target = path if method == "put" else "/v1/scenarios:bulk"
            headers = {**agent, "If-Match": '"2"', "Content-Type": "application/jsonl"}
            wrote = await client.request(
                method.upper(), target, content=json.dumps(body or scenario), headers=headers
            )
            assert wrote.status_code == 403
            answers.append(wrote.text)
        versions = (await client.get(f"{path}/versions", headers=admin)).text
    assert set(refused.values()) == {403}
    # an adjudicator's view does hold both versions: the test can fail
    assert _leaks(versions) == _truth_tokens()
    for text in answers:
        assert _leaks(text) == set(), text


#: how long the judge of the cache test takes to answer
JUDGE_SECONDS = 0.6


class _SlowJudge(ScriptedBackend):
    """A deterministic judge (temperature 0, with a model digest) that takes its time."""

    async def complete(self, request: JudgeRequest) -> Completion:
        await asyncio.sleep(JUDGE_SECONDS)
        return await super().complete(request)


async def _scenario_grading_seconds(
    client: Any, agent: dict[str, str], scenario: str, guess: str, n: int
) -> float:
    """Send a diagnosis with the inline ``guess``, then the same one against ``scenario``:
    how long the scenario's grading took, as the submitter's own view says."""
    diagnosis = f"{VAGUE} (run {n})"
    inline = {"diagnosis": diagnosis, "ground_truth": guess}
    sent = await client.post("/v1/submissions?wait=20", json=inline, headers=agent)
    assert sent.status_code == 201, sent.text
    body = {"diagnosis": diagnosis, "scenario_id": scenario}
    got = await client.post("/v1/submissions?wait=20", json=body, headers=agent)
    assert got.status_code == 201, got.text
    view = got.json()
    assert view["view"] == "verdict" and view["status"] == "graded", view
    made = datetime.fromisoformat(view["created_at"])
    return (datetime.fromisoformat(view["graded_at"]) - made).total_seconds()


async def test_an_inline_guess_of_a_hidden_ground_truth_is_not_confirmed_by_the_cache(
    api_client: Any, tokens: Any
) -> None:
    """A submitter that sends a diagnosis with a guessed ground truth, then the same
    diagnosis against a scenario, waits for the judge either way: the judge cache keeps
    the entries of an inline ground truth apart from a scenario's, so a right guess is
    not answered at once."""
    admin, agent = await tokens("admin"), await tokens("submitter", "prober")
    spec = "scripted:slow"
    judge = _SlowJudge(model="pass", digest="sha256:0123456789abcdef")
    async with api_client(judge=spec, backends={spec: judge}, judge_digest_seconds=0) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "held-out/one", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        wrong = TRUTH.replace("9999", "9998")
        wrong_guess = await _scenario_grading_seconds(client, agent, "held-out/one", wrong, 1)
        right_guess = await _scenario_grading_seconds(client, agent, "held-out/one", TRUTH, 2)
    # a wrong guess leaves the judge to answer, which takes its time: the test can fail
    assert wrong_guess >= JUDGE_SECONDS * 0.8, wrong_guess
    assert right_guess >= JUDGE_SECONDS * 0.8, (right_guess, wrong_guess)


def _cached_calls(metrics: str) -> float:
    """The judge calls answered from the cache, as ``/metrics`` counts them for an
    admin."""
    return sum(
        s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "sre_judge_judge_calls_total" and s.labels.get("outcome") == "cached"
    )


async def test_a_submitter_cannot_tell_that_a_hidden_ground_truth_was_edited(
    api_client: Any, tokens: Any
) -> None:
    """A submitter that sends a diagnosis against two scenarios, then sends it again
    after an admin edited one scenario's ground truth, reads the same of both second
    gradings: a submitter's live grading against a scenario always asks the judge, so
    neither comes back at once nor is a ``cached`` judge call (as an admin's ``/metrics``
    counts them)."""
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    judge = ScriptedBackend(model="pass", digest="sha256:0123456789abcdef")
    cached: dict[str, float] = {}
    async with api_client(judge=SPEC, backends={SPEC: judge}) as client:
        etags = {}
        for sid in ("s/kept", "s/edited"):
            made = await client.post(
                "/v1/scenarios", json={"id": sid, "ground_truth": TRUTH}, headers=admin
            )
            assert made.status_code == 201, made.text
            etags[sid] = made.headers["ETag"]
        for sid in ("s/kept", "s/edited"):
            body = {"diagnosis": VAGUE, "scenario_id": sid}
            first = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
            assert first.status_code == 201, first.text
        put = await client.put(
            "/v1/scenarios/s/edited",
            json={"ground_truth": TRUTH.replace("9999", "9998")},
            headers={**admin, "If-Match": etags["s/edited"]},
        )
        assert put.status_code == 200, put.text
        for sid in ("s/kept", "s/edited"):
            before = _cached_calls((await client.get("/metrics", headers=admin)).text)
            body = {"diagnosis": VAGUE, "scenario_id": sid}
            again = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
            assert again.status_code == 201, again.text
            assert "scenario_version" not in again.json()["submission"]
            after = _cached_calls((await client.get("/metrics", headers=admin)).text)
            cached[sid] = after - before
    assert cached == {"s/kept": 0, "s/edited": 0}
    assert len(judge.requests) == 4  # every live grading asked the judge


async def test_a_regrade_reuses_the_replies_of_submitters_live_gradings(
    api_client: Any, tokens: Any
) -> None:
    """The replies of submitters' live gradings against a scenario are kept in the judge
    cache: an admin's regrade of them with the same judge and rubric asks the judge
    nothing."""
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    judge = ScriptedBackend(model="pass", digest="sha256:0123456789abcdef")
    async with api_client(judge=SPEC, backends={SPEC: judge}) as client:
        scenario = {"id": "held-out/one", "ground_truth": TRUTH}
        assert (await client.post("/v1/scenarios", json=scenario, headers=admin)).is_success
        for n in range(2):
            body = {"diagnosis": f"{VAGUE} (run {n})", "scenario_id": "held-out/one"}
            sent = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
            assert sent.status_code == 201, sent.text
        request = {"judge": SPEC, "filter": {"scenario_id": "held-out/one"}}
        made = await client.post("/v1/regrade-jobs", json=request, headers=admin)
        assert made.status_code == 201, made.text
        for _ in range(400):  # 20 s
            job = (await client.get(f"/v1/regrade-jobs/{made.json()['id']}", headers=admin)).json()
            if job["state"] not in ("queued", "running"):
                break
            await asyncio.sleep(0.05)
    assert (job["state"], job["done"], job["judge_calls"], job["cache_hits"]) == ("done", 2, 0, 2)
    assert len(judge.requests) == 2  # the two live gradings only
