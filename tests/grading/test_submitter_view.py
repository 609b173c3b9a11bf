"""A submitter probing a registered scenario learns nothing from what it gets back
beyond its own verdict (and, under ``SRE_JUDGE_SUBMITTER_VIEW=answers``, the effective
answers): not which answers a code check vetoed, not the judge's own answers, not the
ground truth's length.

The probes vary the values (ports), the names (the component) and the length of the
diagnosis against two scenarios whose ground truths differ only in length, with a
yes-saying scripted judge, so every difference between two answers comes from the
ground truth through the code checks. The adjudicator's view of the same gradings does
differ beyond the verdict: the test can fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from judge.context import estimate_tokens, ground_truth_stand_in
from judge.prompt import build_messages
from judge.rubric import load_rubric_dir

SHORT_TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
    "The USER_PORT env var of user-service is set to 9999, so its callers are refused."
)
#: the same fault, told at length (no further names or values): a longer ground truth
LONG_TRUTH = SHORT_TRUTH + " The operators noticed it late and rolled back by hand." * 25
DIAGNOSIS = (
    "The {name} deployment in hotel-reservation is misconfigured: its container listens "
    "on port {port}, so the frontend's calls to it are refused."
)
PORTS = ("9999", "8080")
NAMES = ("user-service", "geo-service")
#: lines appended to the diagnosis: some probes fit the judge's window, the longer not
PADDING_LINES = (0, 12, 40)
PAD = "\nlog: connection refused by peer while the frontend retried its request"
#: what differs between probes by construction (ids, times, the probe's own text)
OWN = {"id", "submission_id", "created_at", "graded_at"}
OWN_SUBMISSION = {"id", "diagnosis", "created_at", "attempt", "scenario_id"}
VERDICT = {"status", "unscored_reason", "passed", "held"}
#: what the ``answers`` view adds to the verdict
ANSWERS = {"answers", "dimensions", "yes_count", "composite"}


def _window() -> int:
    """A context window the unpadded probes fit and the most padded do not, with the
    ground truth counted at its budget."""
    rubric = load_rubric_dir()["sregym-rca"]
    stand_in = ground_truth_stand_in(LONG_TRUTH, 2000)
    assert stand_in is not None and len(LONG_TRUTH) <= 2000
    base = DIAGNOSIS.format(name="user-service", port="9999")
    return estimate_tokens(build_messages(rubric, stand_in, base + PAD * 20)) + 1536


def _probes() -> list[tuple[str, str, int]]:
    return [(n, p, pad) for n in NAMES for p in PORTS for pad in PADDING_LINES]


def _residue(body: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    """What is left of an answer once the probe's own fields and ``allowed`` are gone."""
    rest = {k: v for k, v in body.items() if k not in OWN | allowed}
    rest["submission"] = {k: v for k, v in body["submission"].items() if k not in OWN_SUBMISSION}
    return rest


async def _run_probes(client: Any, agent: dict[str, str], admin: dict[str, str]) -> dict[str, Any]:
    """Every probe against both scenarios: the submitter's answers (POST, GET, list)
    and the adjudicator's view, by (scenario, probe)."""
    seen: dict[str, Any] = {"posted": {}, "read": {}, "listed": {}, "full": {}}
    attempt = 0
    for scenario in ("short", "long"):
        for probe in _probes():
            name, port, pad = probe
            attempt += 1
            diagnosis = DIAGNOSIS.format(name=name, port=port) + PAD * pad
            body = {"diagnosis": diagnosis, "scenario_id": scenario, "attempt": attempt}
            posted = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
            assert posted.status_code == 201, posted.text
            grading_id = posted.json()["id"]
            read = await client.get(f"/v1/gradings/{grading_id}", headers=agent)
            full = await client.get(f"/v1/gradings/{grading_id}", headers=admin)
            seen["posted"][scenario, probe] = posted.json()
            seen["read"][scenario, probe] = read.json()
            seen["full"][scenario, probe] = full.json()
    listed = await client.get("/v1/gradings?limit=500", headers=agent)
    assert listed.status_code == 200
    for item in listed.json()["items"]:
        seen["listed"][item["submission"]["attempt"]] = item
    return seen


@pytest.mark.parametrize("view", ["verdict", "answers"])
async def test_probes_differ_only_in_their_verdict(api_client: Any, tokens: Any, view: str) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "prober")
    settings = {
        "submitter_view": view,
        "judge_context_tokens": _window(),
        "submitter_attempts_per_scenario_per_hour": 0,
    }
    async with api_client(**settings) as client:
        for scenario, truth in (("short", SHORT_TRUTH), ("long", LONG_TRUTH)):
            made = await client.post(
                "/v1/scenarios", json={"id": scenario, "ground_truth": truth}, headers=admin
            )
            assert made.status_code == 201, made.text
        seen = await _run_probes(client, agent, admin)
    allowed = VERDICT | (ANSWERS if view == "answers" else set())
    bodies = [*seen["posted"].values(), *seen["read"].values(), *seen["listed"].values()]
    assert len(bodies) == 3 * 2 * len(_probes())
    residues = {repr(_residue(b, allowed)) for b in bodies}
    assert len(residues) == 1, residues  # the same everywhere but for the verdict
    [residue] = [_residue(bodies[0], allowed)]
    assert residue["view"] == view
    assert {"judge_passed", "detail", "review_reasons", "needs_review"} <= set(residue["withheld"])
    assert not ANSWERS & set(bodies[0]) if view == "verdict" else set(bodies[0]) >= ANSWERS
    for body in bodies:
        for answer in body.get("answers", []):
            assert set(answer) == {"question_id", "dimension_id", "answer"}
    # the ground truth's length changes nothing, not even the verdict
    for probe in _probes():
        short, long = seen["read"]["short", probe], seen["read"]["long", probe]
        assert _residue(short, OWN) == _residue(long, OWN), probe
    statuses = {b["status"] for b in bodies}
    assert statuses == {"graded", "unscored"}  # some probes overflowed the window
    assert {b["unscored_reason"] for b in bodies} == {None, "context_overflow"}

    # the control: the adjudicator's view of the same gradings shows the vetoes
    full = [seen["full"][k] for k in seen["full"] if k[1][2] == 0]
    assert len({repr(_residue(b, VERDICT | ANSWERS)) for b in full}) > 1
    vetoed = [
        a for b in full for a in b["answers"] if a["judge_answer"] == "yes" and a["answer"] == "no"
    ]
    assert vetoed, "no code check vetoed a probe: the test would prove nothing"


async def test_with_answers_an_effective_answer_carries_a_veto(
    api_client: Any, tokens: Any
) -> None:
    """What docs/api.md says ``answers`` can leak: two probes that differ in one value get
    different effective answers when a code check vetoes one of them."""
    admin, agent = await tokens("admin"), await tokens("submitter", "prober")
    async with api_client(submitter_view="answers") as client:
        await client.post(
            "/v1/scenarios", json={"id": "short", "ground_truth": SHORT_TRUTH}, headers=admin
        )
        answers = {}
        for port in ("9999", "8080"):
            body = {"diagnosis": DIAGNOSIS.format(name="user-service", port=port)}
            got = await client.post(
                "/v1/submissions?wait=10", json={**body, "scenario_id": "short"}, headers=agent
            )
            answers[port] = {a["question_id"]: a["answer"] for a in got.json()["answers"]}
    assert answers["9999"]["D2-Q2"] == "yes" and answers["8080"]["D2-Q2"] == "no"


async def test_a_submitter_still_sees_all_of_a_grading_against_its_own_ground_truth(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    async with api_client() as client:
        got = await client.post(
            "/v1/submissions?wait=10",
            json={
                "diagnosis": DIAGNOSIS.format(name="user-service", port="8080"),
                "ground_truth": SHORT_TRUTH,
            },
            headers=agent,
        )
    grading = got.json()
    assert grading["view"] == "full" and grading["withheld"] == []
    assert {a["question_id"]: a["judge_answer"] for a in grading["answers"]}["D2-Q2"] == "yes"
    assert grading["submission"]["ground_truth"] == SHORT_TRUTH


@pytest.mark.parametrize("view", ["verdict", "answers"])
async def test_the_sregym_oracle_fills_what_each_view_gives(
    api_client: Any, tokens: Any, view: str
) -> None:
    """SREGym's result dictionary from a submitter's view: with ``answers`` the
    checklist and dimensions (SREGym's CSV), with ``verdict`` the verdict alone."""
    from sre_judge_client import Grading
    from sre_judge_client.sregym import oracle_result

    admin, agent = await tokens("admin"), await tokens("submitter", "harness")
    async with api_client(submitter_view=view) as client:
        await client.post(
            "/v1/scenarios", json={"id": "short", "ground_truth": SHORT_TRUTH}, headers=admin
        )
        body = {"diagnosis": DIAGNOSIS.format(name="user-service", port="9999")}
        got = await client.post(
            "/v1/submissions?wait=10", json={**body, "scenario_id": "short"}, headers=agent
        )
    result = oracle_result(Grading.model_validate(got.json()))
    assert result["judgment"] == "True" and result["success"] is True
    if view == "answers":
        assert [c["id"] for c in result["checklist"]] == [
            f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)
        ]
        assert {c["evidence"] for c in result["checklist"]} == {""}  # evidence is withheld
        assert result["composite_score"] == 1.0 and set(result["dimensions"]) == {"D1", "D2", "D3"}
    else:
        assert (result["checklist"], result["dimensions"], result["composite_score"]) == (
            [],
            {},
            None,
        )
        assert "verdict only" in result["reasoning"]


@pytest.mark.parametrize("view", ["verdict", "answers"])
async def test_what_the_grading_object_gains_later_stays_out(
    api_client: Any, tokens: Any, view: str
) -> None:
    """The view is a whitelist: a field added to the grading object, an answer or a
    dimension (say, another check's words about the ground truth) never reaches it."""
    from api.service.schemas import AnswerPublic, DimensionPublic, GradingPublic
    from api.service.visibility import submitter_grading

    admin = await tokens("admin")
    async with api_client() as client:
        await client.post(
            "/v1/scenarios", json={"id": "short", "ground_truth": SHORT_TRUTH}, headers=admin
        )
        body = {"diagnosis": DIAGNOSIS.format(name="user-service", port="8080")}
        got = await client.post(
            "/v1/submissions?wait=10", json={**body, "scenario_id": "short"}, headers=admin
        )
    full = got.json()
    assert full["view"] == "full"

    class Later(GradingPublic):
        leak: str = SHORT_TRUTH

    class LaterAnswer(AnswerPublic):
        leak: str = SHORT_TRUTH

    class LaterDimension(DimensionPublic):
        leak: str = SHORT_TRUTH

    later = Later.model_validate(
        {
            **full,
            "judge": {**full["judge"], "leak": SHORT_TRUTH},
            "answers": [LaterAnswer.model_validate(a) for a in full["answers"]],
            "dimensions": [LaterDimension.model_validate(d) for d in full["dimensions"]],
        }
    )
    assert SHORT_TRUTH in later.model_dump_json()  # the test can fail
    shown = submitter_grading(later, view).model_dump_json()  # type: ignore[arg-type]
    assert "9999" not in shown and "leak" not in shown


@pytest.mark.parametrize("view", ["verdict", "answers"])
async def test_a_submitters_etag_and_revision_move_only_with_what_its_view_shows(
    api_client: Any, tokens: Any, view: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer override that leaves the verdict as it was and a failure tag change
    nothing a ``verdict`` view shows: its ETag and ``revision`` stay, so the submitter
    cannot tell that a human (with the hidden ground truth in view) corrected or tagged
    its grading. Under ``answers`` the override is shown, and the ETag moves with it; a
    verdict override moves both views' ETag. The whole object's ETag is its revision."""
    monkeypatch.setenv("SRE_JUDGE_SUBMITTER_VIEW", view)
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    submitter = await tokens("submitter")
    truth = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
    async with api_client() as client:
        await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": truth}, headers=admin
        )
        made = await client.post(
            "/v1/submissions?wait=10",
            json={"scenario_id": "hotel/user-port", "diagnosis": "user-service USER_PORT=9999"},
            headers=submitter,
        )
        grading_id = made.json()["id"]
        url = f"/v1/gradings/{grading_id}"
        before = await client.get(url, headers=submitter)

        async def override(body: dict[str, Any]) -> None:
            full = await client.get(url, headers=adjudicator)
            assert full.headers["ETag"] == f'"{full.json()["revision"]}"'
            done = await client.post(
                f"{url}/overrides",
                json=body,
                headers={**adjudicator, "If-Match": full.headers["ETag"]},
            )
            assert done.status_code == 201, done.text

        await override({"question_id": "D1-Q1", "answer": "no", "reason": "not in the truth"})
        tagged = await client.post(f"{url}/tags", json={"tag": "misread-unit"}, headers=adjudicator)
        assert tagged.status_code == 201, tagged.text
        after = await client.get(url, headers=submitter)
        await override({"verdict": "fail", "reason": "the port is wrong"})
        failed = await client.get(url, headers=submitter)
    assert made.status_code == 201 and before.json()["view"] == view
    assert made.headers["ETag"] == before.headers["ETag"]
    assert after.json()["passed"] == before.json()["passed"]  # 8 of 9 still passes
    assert after.json()["revision"] == before.json()["revision"] == 2
    if view == "verdict":
        assert after.headers["ETag"] == before.headers["ETag"]
        assert after.json() == before.json()
    else:
        assert after.headers["ETag"] != before.headers["ETag"]  # the answer it shows moved
    assert failed.json()["passed"] is False and failed.headers["ETag"] != after.headers["ETag"]


@pytest.mark.parametrize("view", ["verdict", "answers"])
async def test_a_submitter_reading_a_grading_a_promote_replaced_is_told_which_counts(
    api_client: Any, tokens: Any, view: str
) -> None:
    """The id a submission's answer gave keeps its verdict after a promoted regrade, and
    says it no longer counts: ``is_current`` false and ``superseded_by`` naming the
    grading in force, which the submitter reads with the verdict reports count."""
    from tests.support.regrades import promote_regrade

    admin, agent = await tokens("admin"), await tokens("submitter", "harness")
    async with api_client(submitter_view=view) as client:  # scripted:pass grades it
        await client.post(
            "/v1/scenarios", json={"id": "short", "ground_truth": SHORT_TRUTH}, headers=admin
        )
        body = {"diagnosis": DIAGNOSIS.format(name="user-service", port="9999")}
        sent = await client.post(
            "/v1/submissions?wait=10", json={**body, "scenario_id": "short"}, headers=agent
        )
        assert sent.status_code == 201, sent.text
        assert sent.json()["is_current"] is True and sent.json()["superseded_by"] is None
        await promote_regrade(client, admin, "scripted:fail")
        listed = (await client.get("/v1/gradings", headers=agent)).json()["items"]
        old = (await client.get(f"/v1/gradings/{sent.json()['id']}", headers=agent)).json()
        new = (await client.get(f"/v1/gradings/{old['superseded_by']}", headers=agent)).json()
    assert [(g["id"], g["passed"]) for g in listed] == [(new["id"], False)]
    assert (old["view"], old["passed"], old["is_current"]) == (view, True, False)
    assert (new["view"], new["passed"], new["is_current"]) == (view, False, True)
    assert new["superseded_by"] is None
    assert not {"is_current", "superseded_by"} & set(old["withheld"])
