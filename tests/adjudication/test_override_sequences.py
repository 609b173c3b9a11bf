"""Any sequence of answer overrides, verdict overrides and withdrawals: the overrides in
force and the effective verdict follow from the history alone, and every view of a
grading (the grading object, the list, the JSONL, CSV and SREGym exports, the pass-rate
report, the workbench page) tells the same verdict and figures after each step."""

from __future__ import annotations

import ast
import csv
import io
import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.adjudication import OverrideEvent, effective_outcome, overrides_in_force
from judge.rubric import load_rubric_dir
from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

RUBRIC = load_rubric_dir()["sregym-rca"]
DIM = {q: q.split("-")[0] for q in IDS}
WEIGHTS = {"D1": 0.33, "D2": 0.33, "D3": 0.34}
QUOTE = "user-service deployment in hotel sets USER_PORT=9999"


def rule(answers: dict[str, bool]) -> bool:
    """The pass rule as the rubric states it: seven yes, at least one in each dimension."""
    per = {d: sum(answers[q] for q in IDS if DIM[q] == d) for d in WEIGHTS}
    return sum(answers.values()) >= 7 and all(v >= 1 for v in per.values())


answer_sets = st.fixed_dictionaries({q: st.booleans() for q in IDS})
steps = st.lists(
    st.one_of(
        st.tuples(st.just("answer"), st.sampled_from(IDS), st.booleans()),
        st.tuples(st.just("verdict"), st.sampled_from(["pass", "fail"]), st.none()),
        st.tuples(st.just("withdraw"), st.integers(0, 20), st.none()),
    ),
    max_size=12,
)


@given(answer_sets, steps)
@settings(max_examples=600, deadline=None)
def test_the_effective_verdict_follows_from_any_history_of_overrides(
    base: dict[str, bool], history: list[Any]
) -> None:
    """A later override of the same answer or of the verdict replaces the earlier one, a
    withdrawal removes the one it names, and the verdict is the human's while a verdict
    override is in force, else the rule's on the effective answers."""
    events: list[OverrideEvent] = []
    expected: dict[tuple[str, str], OverrideEvent] = {}
    for n, (kind, a, b) in enumerate(history):
        if kind == "withdraw":
            live = list(expected.values())
            if not live:
                continue
            target = live[a % len(live)]
            event = OverrideEvent(id=f"o{n}", kind="withdraw", withdraws=target.id)
            expected = {t: e for t, e in expected.items() if e.id != target.id}
        elif kind == "answer":
            event = OverrideEvent(id=f"o{n}", kind="answer", question_id=a, answer=b)
            expected[("answer", a)] = event
        else:
            event = OverrideEvent(id=f"o{n}", kind="verdict", verdict=a)
            expected[("verdict", "")] = event
        events.append(event)
    in_force = overrides_in_force(events)
    assert {t: e.id for t, e in in_force.items()} == {t: e.id for t, e in expected.items()}
    outcome = effective_outcome(RUBRIC, base, in_force)
    effective = {**base, **{q: bool(e.answer) for (k, q), e in expected.items() if k == "answer"}}
    assert outcome.answers == effective
    verdict = expected.get(("verdict", ""))
    assert outcome.passed == (rule(effective) if verdict is None else verdict.verdict == "pass")
    assert outcome.rule.passed == rule(effective)


class Expected:
    """What a grading should say after the overrides made so far."""

    def __init__(self, yes: set[str], *, holding: bool) -> None:
        self.base = {q: q in yes for q in IDS}
        self.holding = holding
        self.in_force: dict[tuple[str, str], dict[str, Any]] = {}

    def effective(self) -> dict[str, bool]:
        """The judge's answers with the answer overrides in force."""
        answers = dict(self.base)
        for (kind, q), made in self.in_force.items():
            if kind == "answer":
                answers[q] = made["answer"] == "yes"
        return answers

    def verdict(self) -> tuple[bool | None, bool]:
        """(passed, held): a rule pass is held where the grading's review reasons hold
        one, until a verdict override is in force."""
        made = self.in_force.get(("verdict", ""))
        if made is not None:
            return made["verdict"] == "pass", False
        passed = rule(self.effective())
        return (None, True) if passed and self.holding else (passed, False)

    def composite(self) -> float:
        """SREGym's composite of the effective answers."""
        eff = self.effective()
        per = {d: sum(eff[q] for q in IDS if DIM[q] == d) / 3 for d in WEIGHTS}
        return round(sum(w * per[d] for d, w in WEIGHTS.items()) + 1e-9, 2)


async def _override(client: Any, gid: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
    """The grading after the override ``body``, made against its current ETag."""
    etag = (await client.get(f"/v1/gradings/{gid}", headers=headers)).headers["etag"]
    response = await client.post(
        f"/v1/gradings/{gid}/overrides", json=body, headers={**headers, "If-Match": etag}
    )
    assert response.status_code == 201, response.text
    return response.json()


async def _step(
    client: Any, gid: str, adj: dict[str, str], expected: Expected, rng: random.Random
) -> str:
    """One random override or withdrawal, made and expected; what it was, in words."""
    choice = rng.random()
    if choice < 0.2 and expected.in_force:
        target, made = rng.choice(list(expected.in_force.items()))
        await _override(client, gid, adj, {"withdraw": made["id"], "reason": "taken back"})
        del expected.in_force[target]
        return f"withdraw {target}"
    if choice < 0.45:
        verdict = rng.choice(["pass", "fail"])
        done = await _override(client, gid, adj, {"verdict": verdict, "reason": "human call"})
        expected.in_force[("verdict", "")] = {"id": done["overrides"][-1]["id"], "verdict": verdict}
        return f"verdict {verdict}"
    q, answer = rng.choice(IDS), rng.choice(["yes", "no"])
    body = {"question_id": q, "answer": answer, "reason": "reread it"}
    done = await _override(client, gid, adj, body)
    expected.in_force[("answer", q)] = {"id": done["overrides"][-1]["id"], "answer": answer}
    return f"answer {q}={answer}"


async def _check_views(
    client: Any, gid: str, agent: str, expected: Expected, headers: dict[str, dict[str, str]]
) -> None:
    """Every view of the grading tells what ``expected`` says."""
    adj, admin = headers["adjudicator"], headers["admin"]
    passed, held = expected.verdict()
    eff = expected.effective()
    yes = sum(eff.values())
    g = (await client.get(f"/v1/gradings/{gid}", headers=adj)).json()
    assert (g["passed"], g["held"], g["yes_count"]) == (passed, held, yes)
    assert g["composite"] == expected.composite()
    assert {a["question_id"]: a["answer"] == "yes" for a in g["answers"]} == eff
    assert {d["id"]: d["yes"] for d in g["dimensions"]} == {
        d: sum(eff[q] for q in IDS if DIM[q] == d) for d in WEIGHTS
    }
    made = expected.in_force.get(("verdict", ""))
    assert g["verdict_override"] == (made["verdict"] if made else None)
    listed = (await client.get(f"/v1/gradings?agent={agent}", headers=adj)).json()["items"]
    [item] = [i for i in listed if i["id"] == gid]
    assert (item["passed"], item["held"], item["yes_count"]) == (passed, held, yes)
    export = f"/v1/exports/gradings?agent={agent}&format="
    body = (await client.get(f"{export}jsonl", headers=admin)).text
    [line] = [json.loads(x) for x in body.splitlines() if x and json.loads(x)["id"] == gid]
    assert (line["passed"], line["held"], line["yes_count"]) == (passed, held, yes)
    body = (await client.get(f"{export}csv", headers=admin)).text
    [row] = [r for r in csv.DictReader(io.StringIO(body)) if r["grading_id"] == gid]
    assert (row["passed"], row["held"]) == ("" if passed is None else str(passed), str(held))
    assert int(row["yes_count"]) == yes and {q: row[q] == "yes" for q in IDS} == eff
    body = (await client.get(f"{export}sregym", headers=admin)).text
    [srow] = [r for r in csv.DictReader(io.StringIO(body)) if r["grading_id"] == gid]
    assert srow["Diagnosis.success"] == str(bool(passed))
    checklist = ast.literal_eval(srow["Diagnosis.checklist"])
    assert {c["id"]: c["answer"] == "Yes" for c in checklist} == eff
    assert float(srow["Diagnosis.composite_score"]) == expected.composite()
    rates = f"/v1/stats/pass-rates?agent={agent}&inline=include"
    overall = (await client.get(rates, headers=adj)).json()["overall"]
    counts = (overall["passed"], overall["failed"], overall["held"])
    assert counts == (int(passed is True), int(passed is False), int(held))
    page = (await client.get(f"/gradings/{gid}")).text
    label = re.search(r'data-testid="effective-verdict">(\w+)<', page)
    assert label is not None
    assert label.group(1) == ("HELD" if held else ("PASS" if passed else "FAIL"))


@pytest.mark.parametrize("policy", ["unflagged", "qualified"])
async def test_every_view_tells_the_same_verdict_after_any_overrides(
    api_client: Any, tokens: Any, policy: str
) -> None:
    """Gradings near the pass threshold, each through six random overrides and
    withdrawals: after every step each view shows the rule's verdict on the effective
    answers (held where the pass policy held the judge's own pass, until a human's verdict)
    or the human's verdict, and SREGym's composite of the effective answers."""
    rng = random.Random(f"override-sequences-{policy}")
    sets = [set(rng.sample(IDS, rng.choice([5, 6, 6, 7, 7, 7, 8, 9]))) for _ in range(4)]
    submitter = await tokens("submitter")
    headers = {"adjudicator": await tokens("adjudicator", "Ada"), "admin": await tokens("admin")}
    replies = [sregym_reply(s, evidence=QUOTE) for s in sets]
    async with api_client(pass_policy=policy, **scripted_judge(*replies)) as client:
        await sign_in(client, headers["adjudicator"])
        for n, yes in enumerate(sets):
            agent = f"agent-{policy}-{n}"
            response = await client.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "agent": agent},
                headers=submitter,
            )
            assert response.status_code == 201, response.text
            gid = response.json()["id"]
            # the pass policy holds a pass of the judge's own (its judge is not qualified)
            judge_passed = rule({q: q in yes for q in IDS})
            expected = Expected(yes, holding=policy == "qualified" and judge_passed)
            trail = [f"judge yes={sorted(yes)}"]
            for step in range(7):
                if step:
                    trail.append(await _step(client, gid, headers["adjudicator"], expected, rng))
                try:
                    await _check_views(client, gid, agent, expected, headers)
                except AssertionError as exc:
                    raise AssertionError(" / ".join(trail)) from exc
