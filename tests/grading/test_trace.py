"""The agent's trace sent with a submission: accepted or refused, redacted, stored, shown
only to who may read the grading, part of an idempotent request, and checked in code
against the answers' quotes."""

from __future__ import annotations

import json
import random
import string
import time
from typing import Any

import pytest

from judge.secrets import redact
from judge.trace import (
    Trace,
    TraceText,
    check_trace,
    redact_trace,
    screen_submission,
    trace_check,
    trace_text,
)
from storage import NewSubmission
from storage.canonical import canonical_json, sha256_hex
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: a trace as SREGym records it: tool calls with their input and what they observed
STEPS: list[dict[str, Any]] = [
    {"tool": "kubectl_get", "input": {"args": "pods -n hotel"}, "output": "user-service 0/1"},
    {
        "tool": "kubectl_describe",
        "input": "deployment user-service -n hotel",
        "output": "Env: USER_PORT=9999\nThe user-service deployment in hotel sets "
        "USER_PORT=9999; the frontend cannot connect.",
    },
]
SECRET = "AKIAIOSFODNN7EXAMPLE"


async def _submit(client: Any, headers: dict[str, str], **body: Any) -> Any:
    payload = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, **body}
    return await client.post("/v1/submissions?wait=10", json=payload, headers=headers)


async def test_a_trace_of_steps_is_stored_redacted_and_checked(
    api_client: Any, tokens: Any
) -> None:
    headers = await tokens("submitter")
    steps = [*STEPS, {"tool": "env", "output": f"AWS_ACCESS_KEY_ID={SECRET}"}]
    async with api_client() as client:
        response = await _submit(client, headers, trace=steps)
        assert response.status_code == 201, response.text
        grading = response.json()
        again = (await client.get(f"/v1/gradings/{grading['id']}", headers=headers)).json()
    for seen in (grading, again):
        trace = seen["submission"]["trace"]
        assert trace[:2] == STEPS
        assert SECRET not in str(trace) and "[REDACTED:" in trace[2]["output"]
        assert {a["trace_check"] for a in seen["answers"]} == {"found"}


async def test_free_text_trace_and_no_trace(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    async with api_client() as client:
        text = (await _submit(client, headers, trace="$ kubectl get pods\nall fine")).json()
        none = (await _submit(client, headers, diagnosis=DIAGNOSIS + " ")).json()
    assert text["submission"]["trace"] == "$ kubectl get pods\nall fine"
    assert {a["trace_check"] for a in text["answers"]} == {"not_found"}
    assert none["submission"]["trace"] is None
    assert {a["trace_check"] for a in none["answers"]} == {"no_trace"}
    assert none["passed"] is True and text["passed"] is True  # the check changes no verdict


@pytest.mark.parametrize(
    "trace",
    [42, {"tool": "x"}, ["not an object"], [{"tool": "x"}, 3]],
    ids=["number", "object", "list-of-strings", "mixed"],
)
async def test_a_trace_of_the_wrong_type_is_refused(
    api_client: Any, tokens: Any, trace: Any
) -> None:
    """Refused naming the place in the body (``trace``, ``trace[1]``), never the union
    members the server tried (``trace.str``)."""
    headers = await tokens("submitter")
    async with api_client() as client:
        response = await _submit(client, headers, trace=trace)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    fields = {e.get("field") or "" for e in response.json().get("errors", [])}
    assert fields and fields <= {"trace", "trace[0]", "trace[1]"}, response.text


@pytest.mark.parametrize("as_steps", [False, True], ids=["text", "steps"])
async def test_a_trace_over_the_text_limit_is_refused(
    api_client: Any, tokens: Any, as_steps: bool
) -> None:
    headers = await tokens("submitter")
    big = "x" * 5000
    trace: Any = [{"output": big}] if as_steps else big
    async with api_client(max_text_bytes=4096) as client:
        response = await _submit(client, headers, trace=trace)
        listed = (await client.get("/v1/gradings", headers=headers)).json()
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == ["trace"] and "4096" in problem["detail"]
    assert listed["items"] == []  # nothing stored


async def test_the_trace_is_withheld_from_other_submitters(api_client: Any, tokens: Any) -> None:
    owner, other = await tokens("submitter"), await tokens("submitter")
    adjudicator = await tokens("adjudicator")
    async with api_client() as client:
        grading = (await _submit(client, owner, trace=STEPS)).json()
        url = f"/v1/gradings/{grading['id']}"
        refused = await client.get(url, headers=other)
        listed = (await client.get("/v1/gradings", headers=other)).json()
        seen = (await client.get(url, headers=adjudicator)).json()
    assert refused.status_code in (403, 404)
    assert STEPS[1]["output"] not in refused.text
    assert listed["items"] == []
    assert seen["submission"]["trace"] == STEPS


async def test_a_replay_with_another_trace_is_a_conflict(api_client: Any, tokens: Any) -> None:
    headers = {**(await tokens("submitter")), "Idempotency-Key": "k-trace"}
    async with api_client() as client:
        first = await _submit(client, headers, trace=STEPS)
        same = await _submit(client, headers, trace=STEPS)
        other = await _submit(client, headers, trace="another trace")
        none = await _submit(client, headers)
    assert first.status_code == 201 and same.status_code in (200, 201)
    assert same.json()["id"] == first.json()["id"]
    assert other.status_code == 409 and none.status_code == 409


def test_the_request_hash_without_a_trace_or_a_rubric_is_unchanged() -> None:
    """Submissions stored before traces (and rubrics in the hash) existed keep valid
    hashes: no ``trace`` or ``rubric`` key is hashed when there is none (the hash is the
    one computed before the fields existed)."""
    plain = NewSubmission(diagnosis="d", ground_truth="t", ground_truth_source="inline")
    traced = NewSubmission(diagnosis="d", ground_truth="t", ground_truth_source="inline", trace="x")
    named = NewSubmission(diagnosis="d", ground_truth="t", ground_truth_source="inline", rubric="r")
    left_out = {"scenario_version", "screening", "trace", "rubric"}
    before = plain.model_dump(mode="json", exclude=left_out)
    assert plain.request_hash() == sha256_hex(canonical_json(before))
    assert traced.request_hash() != plain.request_hash() != named.request_hash()


def test_the_trace_check_in_code() -> None:
    trace = TraceText(STEPS)
    assert trace_check("USER_PORT=9999", trace) == "found"
    assert trace_check("the user service deployment in hotel sets user_port=9999", trace) == (
        "found"
    )  # case, punctuation and white space as the evidence check allows
    assert trace_check("user-service 0/1 ... cannot connect", trace) == "found"
    assert trace_check("the database ran out of disk", trace) == "not_found"
    assert trace_check("", trace) is None
    assert trace_check("USER_PORT=9999", None) == "no_trace"
    text = trace_text(STEPS)  # every step's values, not its keys
    assert "kubectl_get" in text and "pods -n hotel" in text and "output" not in text


def test_trace_checks_and_redaction() -> None:
    check_trace(STEPS, max_bytes=4096)
    with pytest.raises(ValueError, match="trace"):
        check_trace("y" * 5000, max_bytes=4096)
    with pytest.raises(ValueError, match="trace"):
        check_trace([{"output": "a\x00b"}])
    nested = redact_trace([{"input": {"env": [f"KEY={SECRET}"]}}])
    assert SECRET not in str(nested)


#: a step whose values only their keys mark as passwords
KEYED_STEP: dict[str, Any] = {
    "tool": "kubectl",
    "input": "get secret db -o jsonpath='{.data}' | base64 -d",
    "output": {
        "DB_PASSWORD": "hunter22",
        "MONGO_PASSWORD": "S3cr3t!x",
        "db_passphrase": "correct horse battery staple",
    },
}
KEYED_VALUES = ("hunter22", "S3cr3t!x", "horse battery")


def test_a_value_under_a_key_that_names_a_password_is_redacted() -> None:
    """A step sent as an object is redacted as its JSON text would be: a string value is
    read with its key, which may be what makes it a credential."""
    as_text = redact_trace(json.dumps(KEYED_STEP))
    as_steps = json.dumps(redact_trace([KEYED_STEP]))
    for value in KEYED_VALUES:
        assert value not in str(as_text) and value not in as_steps, as_steps
    kept = redact_trace([KEYED_STEP, *STEPS])
    assert isinstance(kept, list)
    assert kept[0]["tool"] == "kubectl" and kept[0]["input"] == KEYED_STEP["input"]
    assert set(kept[0]["output"].values()) == {"[REDACTED:secret-keyword]"}
    assert kept[1:] == STEPS  # values under ordinary keys are left as they are


def _redacted_step(step: dict[str, Any]) -> dict[str, Any]:
    """``step`` as a trace of that one step is redacted."""
    redacted = redact_trace([step])
    assert isinstance(redacted, list)
    return redacted[0]


#: ``kubectl get pod -o json``: the container's env as Kubernetes' name/value entries
ENV_STEP: dict[str, Any] = {
    "tool": "kubectl_get",
    "input": "pod user-service-7d9f -n hotel -o json",
    "output": {
        "env": [
            {"name": "USER_PORT", "value": "9999"},
            {"name": "DB_PASSWORD", "value": "rabbit4711"},
        ]
    },
}


def test_an_env_entry_named_like_a_credential_is_redacted() -> None:
    """A Kubernetes env entry (``{"name": "DB_PASSWORD", "value": ...}``), inside a step
    or as a step itself, has its value read with its name and redacted, as the entry's
    JSON text is; an entry with an ordinary name keeps its value."""
    entry = {"name": "DB_PASSWORD", "value": "rabbit4711"}
    for step in (ENV_STEP, entry):
        assert "rabbit4711" not in redact(json.dumps(step)).text
        assert "rabbit4711" not in json.dumps(redact_trace([step]))
    kept = _redacted_step(ENV_STEP)
    assert kept["output"]["env"] == [
        {"name": "USER_PORT", "value": "9999"},
        {"name": "DB_PASSWORD", "value": "[REDACTED:secret-keyword]"},
    ]


@pytest.mark.parametrize("password", ['Xk9"vQ2mLp7', 'se cret\\"Tail99'], ids=["quote", "escaped"])
def test_a_password_with_a_quote_in_it_is_redacted_whole(password: str) -> None:
    """A password under a key that names one is replaced whole even where it holds a
    ``"``, at which a detector reading the JSON text stops."""
    kept = _redacted_step({"tool": "env", "output": {"DB_PASSWORD": password}})
    assert kept["output"] == {"DB_PASSWORD": "[REDACTED:secret-keyword]"}


def test_a_number_under_a_password_key_is_redacted() -> None:
    """A number under a key that names a password (a values file read by YAML makes
    digits a number) becomes the marker string, as the step's JSON text is redacted;
    numbers under other keys stay numbers."""
    output = {"REDIS_PASSWORD": 73910482, "replicas": 3, "max_password_len": 64}
    assert "73910482" not in redact(json.dumps(output)).text
    kept = _redacted_step({"tool": "helm_get_values", "output": output})
    assert kept["output"] == {
        "REDIS_PASSWORD": "[REDACTED:secret-keyword]",
        "replicas": 3,
        "max_password_len": 64,
    }


def test_a_credential_in_a_key_is_redacted_and_keys_stay_apart() -> None:
    """A key is redacted as a value is (a tool that reports per target keys its output by
    connection URL, password and all); keys that redact alike keep their values apart,
    and a key with no credential in it keeps its text."""
    output = {
        "postgres://admin:hunter22@db.hotel:5432/users": "connection refused",
        "postgres://admin:s3cret99@db.hotel:5432/users": "ok",
        "redis://redis.hotel:6379": "ok",
    }
    kept = _redacted_step({"tool": "check_connections", "output": output})
    text = json.dumps(kept)
    assert "hunter22" not in text and "s3cret99" not in text, text
    assert list(kept["output"].values()) == ["connection refused", "ok", "ok"]
    first, second, plain = kept["output"]
    assert "[REDACTED:" in first and "[REDACTED:" in second and first != second
    assert plain == "redis://redis.hotel:6379"


async def test_a_submitted_step_keeps_no_password_under_its_key(
    api_client: Any, tokens: Any
) -> None:
    """Neither the answer to the submission nor the grading read later shows a password
    a step holds under its key or in an env entry."""
    headers = await tokens("submitter")
    async with api_client() as client:
        response = await _submit(client, headers, trace=[KEYED_STEP, ENV_STEP])
        assert response.status_code == 201, response.text
        grading = await client.get(response.headers["location"], headers=headers)
    for value in (*KEYED_VALUES, "rabbit4711"):
        for seen in (response, grading):
            assert value not in seen.text, seen.json()["submission"]["trace"]


def test_a_cookie_header_in_a_trace_step_is_redacted() -> None:
    """A headers dict with a ``Cookie`` key, as HTTP tool calls record the header, loses
    its session: the value is read with its key."""
    session = "sess-8f3k2p9x7q1w"
    step = {
        "tool": "http",
        "input": {"url": "http://frontend", "headers": {"Cookie": f"session={session}"}},
    }
    kept = _redacted_step(step)
    assert kept["input"]["headers"] == {"Cookie": "[REDACTED:cookie]"}


PASSWORD = "Zx81pq77wQ"
#: a password found in one step (an env listing) and repeated in another (a command line)
REPEATED_STEPS = [
    {"tool": "exec", "input": "kubectl exec user-0 -- env", "output": f"DB_PASSWORD={PASSWORD}"},
    {"tool": "exec", "input": f"mongo -u admin -p {PASSWORD} --eval 1", "output": "auth failed"},
]


def test_a_password_found_in_one_step_is_redacted_in_the_others() -> None:
    """A value found in one step of a trace is redacted wherever another step repeats it,
    as in a free-text trace."""
    redacted = redact_trace(REPEATED_STEPS)
    assert PASSWORD not in json.dumps(redacted), redacted
    assert redacted[1]["input"] == "mongo -u admin -p [REDACTED:secret-keyword] --eval 1"
    assert redact_trace(redacted) == redacted


async def test_a_password_found_in_the_trace_is_not_stored_in_the_diagnosis(
    api_client: Any, tokens: Any
) -> None:
    """A password found in the trace is redacted in the diagnosis sent with it too: it is
    stored in clear in neither."""
    headers = await tokens("submitter")
    body = {
        "diagnosis": f"user-service cannot log in to MongoDB with {PASSWORD}: auth failed.",
        "ground_truth": TRUTH,
        "trace": REPEATED_STEPS,
    }
    async with api_client(start_workers=False) as client:
        answer = await client.post("/v1/submissions", json=body, headers=headers)
        assert answer.status_code in (201, 202), answer.text
        grading = (await client.get(answer.headers["location"], headers=headers)).json()
    diagnosis = grading["submission"]["diagnosis"]
    assert PASSWORD not in diagnosis, diagnosis
    assert "[REDACTED:secret-keyword]" in diagnosis


@pytest.mark.parametrize(
    "trace",
    [
        [{"tool": "exec", "input": f"mongo -u admin -p {PASSWORD} --eval 1", "output": "x"}],
        f"$ mongo -u admin -p {PASSWORD} --eval 1\nx",
    ],
    ids=["steps", "text"],
)
def test_a_password_found_in_the_diagnosis_is_redacted_in_the_trace(trace: Trace) -> None:
    """A password the diagnosis shows as one (``DB_PASSWORD=...``, ending its sentence)
    is redacted in the trace sent with it too, where a command line repeats it."""
    screening, redacted = screen_submission(f"user-service sets DB_PASSWORD={PASSWORD}.", trace)
    assert PASSWORD not in screening.text
    assert PASSWORD not in json.dumps(redacted), redacted
    assert "-p [REDACTED:secret-keyword] --eval" in json.dumps(redacted)


def _credential_steps(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` one-line steps, each showing a password of its own."""
    draw = random.Random(seed)
    return [
        {
            "o": "password="
            + "".join(draw.choices(string.ascii_letters, k=6))
            + str(draw.randint(10, 99))
        }
        for _ in range(count)
    ]


def _seconds_to_screen(steps: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    screen_submission("the pod is fine", steps)
    return time.perf_counter() - started


def test_a_trace_of_many_credentials_is_redacted_in_time_that_grows_with_its_size() -> None:
    """A trace's redaction takes time in proportion to its size, however many distinct
    credentials it holds: ten times the steps, each with a password of its own (17 KB, a
    quarter of the submission limit), take about ten times as long, not a hundred. A
    submitter cannot hold an intake worker for minutes."""
    small, large = 60, 600
    check_trace(_credential_steps(large, seed=0))  # within the submission limit
    _seconds_to_screen(_credential_steps(small, seed=1))  # the detectors loaded
    base = min(_seconds_to_screen(_credential_steps(small, seed=2 + n)) for n in range(3))
    grown = min(_seconds_to_screen(_credential_steps(large, seed=5 + n)) for n in range(2))
    assert grown / base < 30, f"{large} steps took {grown:.2f} s, {small} steps {base:.3f} s"
