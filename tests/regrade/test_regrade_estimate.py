"""A regrade's dry run: its figures are those the real run then has (judge calls, cache
hits, blank diagnoses, prompt tokens), whatever the asking mode and ground truth.

The engine matters here: run on PostgreSQL too under ``--db all``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from api.regrade import estimate as estimates
from judge.backends.scripted import ScriptedBackend, _diagnosis_of
from judge.calls import JudgeRequest
from judge.extraction import CLAIM_KEYS
from tests.api.conftest import ClientFactory
from tests.regrade.test_regrade_api import MEMBERS, _finished, _members
from tests.support.app_client import AppClient

#: the engine matters here (the dry run's counts are SQL)
pytestmark = pytest.mark.postgres

TRUTH = "[fault_spec] component=deployment/checkout; namespace=shop || OOM"


class CompactPass(ScriptedBackend):
    """Says yes to every question in whichever reply format it is asked for."""

    def __init__(self) -> None:
        super().__init__(model="pass")

    def _next(self, request: JudgeRequest) -> str:
        properties = request.reply_schema.get("properties", {})
        quote = " ".join(_diagnosis_of(request).split()[:8])
        if "answer" in properties or not any(
            "reasoning" not in p.get("properties", {}) for p in properties.values()
        ):
            return super()._next(request)
        reply = {}
        for qid, schema in properties.items():
            entry = {"answer": "yes"}
            if "quote" in schema.get("properties", {}):
                entry["quote"] = quote
            reply[qid] = entry
        return json.dumps(reply)


async def _submit(client: AppClient, headers: dict[str, str], diagnoses: Any) -> None:
    for diagnosis in diagnoses:
        body = {"diagnosis": diagnosis, "ground_truth": TRUTH}
        sent = await client.post("/v1/submissions", params={"wait": 10}, json=body, headers=headers)
        assert sent.status_code == 201, sent.text


async def _estimate_then_run(
    client: AppClient, admin: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The dry run's estimate of a regrade of everything by ``scripted:pass`` with the
    shipped rubric, then that regrade run to its end: ``(estimate, finished job)``."""
    request = {"judge": "scripted:pass", "rubric": "sregym-rca"}
    dry = await client.post("/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin)
    estimate = dry.json()["estimate"]
    job = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
    return estimate, await _finished(client, admin, job["id"])


async def test_dry_run_cache_hits_match_the_run_with_a_compact_reply_format(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """With SRE_JUDGE_JUDGE_REPLY_FORMAT=compact the live gradings filled the cache and a
    regrade with the same judge and rubric costs nothing: the dry run says so (its keys
    are built in the grader's reply format)."""
    admin, submitter = await tokens("admin"), await tokens("submitter")
    backends = {"scripted:pass": CompactPass()}
    async with api_client(backends=backends, judge_reply_format="compact") as client:
        await _submit(client, submitter, (f"checkout ran out of memory ({n})" for n in range(3)))
        estimate, done = await _estimate_then_run(client, admin)
    assert (done["state"], done["done"]) == ("done", 3), done
    assert (done["judge_calls"], done["cache_hits"]) == (0, 3), done
    assert (estimate["judge_calls"], estimate["cache_hits"]) == (0, 3), estimate


#: a diagnosis far longer than a judge window of 3,500 tokens leaves room for
LONG = "checkout ran out of memory in namespace shop. " + (
    "Checked the pods and the logs of every service in the namespace again. " * 150
)


@pytest.mark.parametrize(("policy", "hits"), [("truncate", 1), ("unscored", 0)])
async def test_dry_run_counts_a_diagnosis_over_the_judges_window_as_the_grader_asks_it(
    api_client: ClientFactory, tokens: Callable[..., Any], policy: str, hits: int
) -> None:
    """A diagnosis over the judge's context window is cut to fit
    (``SRE_JUDGE_CONTEXT_OVERFLOW=truncate``) and its reply kept in the judge cache under
    the prompt as sent: the regrade is answered from the cache, and its dry run counts
    that hit. Where it is not cut (``unscored``) the judge is never asked, and the dry
    run counts no call."""
    judge = ScriptedBackend.for_mode("pass")
    admin = await tokens("admin")
    settings = {"context_overflow": policy, "judge_context_tokens": 3500}
    async with api_client(backends={"scripted:pass": judge}, **settings) as client:
        await _submit(client, admin, [LONG])
        assert len(judge.requests) == hits
        if hits:
            assert LONG not in judge.requests[0].messages[-1].content  # cut
        estimate, done = await _estimate_then_run(client, admin)
    # the diagnosis not cut is unscored again (context_overflow): the item failed
    assert (done["done"], done["failed"]) == (hits, 1 - hits), done
    assert (done["judge_calls"], done["cache_hits"]) == (0, hits), done
    assert len(judge.requests) == hits
    assert (estimate["judge_calls"], estimate["cache_hits"]) == (0, hits), estimate


@pytest.mark.parametrize(
    "settings",
    [
        {"judge_temperature": 0.5},  # a sampling judge: the cache is not checked
        {"judge_asking": "per_question"},  # nine calls a grading: nor here
        {"judge_samples": 3},  # three calls a grading
    ],
    ids=["sampling-judge", "per-question", "samples"],
)
async def test_dry_run_counts_no_call_for_a_diagnosis_over_the_window_whatever_the_asking(
    api_client: ClientFactory, tokens: Callable[..., Any], settings: dict[str, Any]
) -> None:
    """A diagnosis over the judge's context window, not cut, asks the judge nothing
    however the judge is asked (a sampling judge, several calls a grading), so a
    regrade's dry run counts no call for it, even where the judge cache is not checked."""
    judge = ScriptedBackend.for_mode("pass")
    admin = await tokens("admin")
    window = {"context_overflow": "unscored", "judge_context_tokens": 3500}
    async with api_client(backends={"scripted:pass": judge}, **window, **settings) as client:
        await _submit(client, admin, [LONG, "checkout ran out of memory"])
        asked = len(judge.requests)  # the short diagnosis only
        estimate, done = await _estimate_then_run(client, admin)
    assert done["failed"] == 1, done  # the long one: unscored (context_overflow) again
    assert len(judge.requests) - asked == done["judge_calls"], done
    # the cache is not checked: the calls are counted before it
    made = done["judge_calls"] + done["cache_hits"]
    assert (estimate["judge_calls"], estimate["cache_checked"]) == (made, False), estimate


def _sent_tokens(judge: ScriptedBackend) -> int:
    """What ``judge`` was sent, at the dry run's 4 characters a token: every request's
    messages and reply schema."""
    chars = sum(
        sum(len(m.content) for m in r.messages)
        + len(json.dumps(r.reply_schema, separators=(",", ":")))
        for r in judge.requests
    )
    return chars // 4


@pytest.mark.parametrize("asking", ["single", "per_question"])
async def test_the_dry_runs_prompt_tokens_are_what_the_run_sends(
    api_client: ClientFactory, tokens: Callable[..., Any], asking: str
) -> None:
    """The dry run's prompt tokens are those the regrade then sends, whatever the asking:
    a per-question call holds one question and its one-answer reply schema, not the
    whole rubric."""
    admin = await tokens("admin")
    new = ScriptedBackend.for_mode("fail")
    backends = {"scripted:pass": ScriptedBackend.for_mode("pass"), "scripted:fail": new}
    async with api_client(backends=backends, judge_asking=asking) as client:
        await _submit(client, admin, [f"checkout ran out of memory ({n})" for n in range(5)])
        request = {"judge": "scripted:fail", "rubric": "sregym-rca"}
        dry = await client.post(
            "/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin
        )
        estimate = dry.json()["estimate"]
        job = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        done = await _finished(client, admin, job["id"])
    assert done["judge_calls"] == estimate["judge_calls"] == len(new.requests)
    sent = _sent_tokens(new)
    assert sent * 0.95 <= estimate["prompt_tokens"] <= sent * 1.05, (estimate, sent)


async def test_dry_run_counts_the_calls_extraction_makes_for_a_ground_truth_without_header(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """Extraction asking: a ground truth without a ``[fault_spec]`` header has every
    question asked alone; the dry run counts those calls, as the run then makes them."""
    admin, submitter = await tokens("admin"), await tokens("submitter")
    backends = {"scripted:pass": ScriptedBackend.for_mode("pass")}
    async with api_client(backends=backends, judge_asking="extraction") as client:
        for n in range(2):
            body = {
                "diagnosis": f"checkout ran out of memory ({n})",
                "ground_truth": "the checkout deployment in namespace shop ran out of memory",
            }
            sent = await client.post(
                "/v1/submissions", params={"wait": 10}, json=body, headers=submitter
            )
            assert sent.status_code == 201, sent.text
        estimate, done = await _estimate_then_run(client, admin)
    assert done["state"] == "done", done
    made = done["judge_calls"] + done["cache_hits"]
    assert estimate["judge_calls"] == made, (estimate, done)


async def test_dry_run_counts_no_call_for_a_diagnosis_of_unicode_white_space(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A diagnosis of no-break, em and ideographic spaces is blank to the grader
    (``str.strip``: no judge call), and to the dry run."""
    admin, submitter = await tokens("admin"), await tokens("submitter")
    backends = {"scripted:pass": ScriptedBackend.for_mode("pass")}
    async with api_client(backends=backends) as client:
        await _submit(client, submitter, ["\u00a0\u2003\u3000", "checkout ran out of memory"])
        estimate, done = await _estimate_then_run(client, admin)
    assert (done["state"], done["done"]) == ("done", 2), done
    assert (done["judge_calls"], done["cache_hits"]) == (0, 1), done
    assert estimate["empty_diagnoses"] == 1, estimate
    assert estimate["judge_calls"] + estimate["cache_hits"] == 1, estimate


async def test_the_dry_run_of_a_latest_regrade_counts_the_newest_ground_truths_tokens(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """``ground_truth: latest`` grades against each scenario's newest text: the dry
    run's prompt tokens count that text, not the one each submission was sent with."""
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    async with api_client() as client:
        scenario = {"id": "s2", "ground_truth": "[fault_spec] component=deployment/x || short"}
        await client.post("/v1/scenarios", json=scenario, headers=admin)
        for n in range(3):
            body = {"diagnosis": f"deployment/x is down ({n})", "scenario_id": "s2"}
            await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        longer = "[fault_spec] component=deployment/x || " + "a much longer story " * 400
        put = await client.put(
            "/v1/scenarios/s2", json={"ground_truth": longer}, headers={**admin, "If-Match": '"1"'}
        )
        assert put.status_code == 200, put.text
        request = {"filter": {"scenario_id": "s2"}, "judge": "scripted:fail", "dry_run": True}
        own = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        newest = (
            await client.post(
                "/v1/regrade-jobs", json={**request, "ground_truth": "latest"}, headers=admin
            )
        ).json()
    grown = 3 * (len(longer) - len(scenario["ground_truth"])) // 4
    difference = newest["estimate"]["prompt_tokens"] - own["estimate"]["prompt_tokens"]
    assert difference >= grown * 0.9, (own["estimate"], newest["estimate"])


async def test_a_panel_s_dry_run_counts_the_calls_of_every_member(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> None:
    """A regrade judged by a panel (``panel:SPEC1,SPEC2``) is graded by its members, and its
    dry run counts each member's calls, per-question asking included: as many as the job
    then makes."""
    admin, submitter = await tokens("admin"), await tokens("submitter")
    members = _members()
    async with api_client(backends={**members}, judge_asking="per_question") as client:
        await _submit(client, submitter, (f"checkout ran out of memory ({n})" for n in range(3)))
        request = {"judge": f"panel:{','.join(MEMBERS)}", "rubric": "sregym-rca"}
        dry = await client.post(
            "/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin
        )
        assert dry.status_code == 200, dry.text
        job = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"], done["judge"]) == ("done", 3, request["judge"]), done
    assert all(len(judge.requests) == 3 * 9 for judge in members.values())
    estimate = dry.json()["estimate"]
    assert estimate["judge_calls"] == done["judge_calls"] == 2 * 3 * 9, (estimate, done)


class AnswersEveryFormat(ScriptedBackend):
    """Says ``answer`` to every question, in the reply schema it is asked for; gives
    empty claims to an extraction call."""

    def __init__(self, model: str, answer: str = "no") -> None:
        super().__init__(model=model)
        self.answer = answer

    def _entry(self, schema: dict[str, Any], quote: str) -> dict[str, Any]:
        props = schema.get("properties", {})
        entry: dict[str, Any] = {}
        for key in props:
            if key == "answer":
                entry[key] = self.answer
            elif key == "confidence":
                entry[key] = "high"
            elif key in ("evidence", "quote"):
                entry[key] = quote if self.answer == "yes" else ""
            else:
                entry[key] = "scripted"
        return entry

    def _next(self, request: JudgeRequest) -> str:
        schema = request.reply_schema
        props = schema.get("properties", {})
        quote = " ".join(_diagnosis_of(request).split()[:8])
        if set(props) == set(CLAIM_KEYS):
            return json.dumps({k: [] if p.get("type") == "array" else "" for k, p in props.items()})
        if "answer" in props:
            return json.dumps(self._entry(schema, quote))
        return json.dumps({qid: self._entry(s, quote) for qid, s in props.items()})


#: SREGym's ground-truth form: a header naming the component and namespace
TRUTH = "[fault_spec] component=deployment/checkout; namespace=shop || OOM"


async def test_a_large_extraction_regrade_s_estimate_counts_the_calls_the_run_makes(
    api_client: ClientFactory, tokens: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the selection counted submission by submission, the dry run of an extraction
    regrade counts the calls the run makes for ground truths in SREGym's own form (a
    header naming the component, changing no value: the values question is asked too).
    The limit is lowered so three submissions take the path of 50,001."""
    admin = await tokens("admin")
    new = AnswersEveryFormat("fail", "no")
    backends = {"scripted:pass": AnswersEveryFormat("pass", "yes"), "scripted:fail": new}
    async with api_client(backends=backends, judge_asking="extraction") as client:
        for n in range(3):
            body = {"diagnosis": f"checkout ran out of memory ({n})", "ground_truth": TRUTH}
            sent = await client.post(
                "/v1/submissions", params={"wait": 10}, json=body, headers=admin
            )
            assert sent.status_code == 201, sent.text
        request = {"judge": "scripted:fail", "rubric": "sregym-rca"}
        # more submissions than are counted one by one: the estimate from the totals
        monkeypatch.setattr(estimates, "CACHE_CHECK_LIMIT", 2)
        dry = await client.post(
            "/v1/regrade-jobs", json={**request, "dry_run": True}, headers=admin
        )
        assert dry.status_code == 200, dry.text
        figures = dry.json()["estimate"]
        assert figures["cache_checked"] is False  # the path of a selection over the limit
        job = (await client.post("/v1/regrade-jobs", json=request, headers=admin)).json()
        done = await _finished(client, admin, job["id"])
    assert (done["state"], done["done"]) == ("done", 3), done
    made = done["judge_calls"] + done["cache_hits"]
    assert made == len(new.requests) == 3 * 8  # the claims call and seven questions each
    assert figures["judge_calls"] == made, (figures, done)
