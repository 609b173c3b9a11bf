"""Extraction asking (issue 18, item 5): the judge extracts the diagnosis' claims, code
answers the questions that follow from comparing them with the ground truth, and the
judge is asked only the rest, one short call each. The real ``openai`` client talks to
the local test judge server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from judge.backends.openai import OpenAIBackend
from judge.backends.scripted import ScriptedBackend, asked_question, scripted_reply
from judge.backends.streaming import StreamLimits
from judge.batch import RequestRecorder
from judge.calls import JudgeRequest
from judge.extraction import parse_claims
from judge.grader import Grader
from judge.reply import ReplyInvalid
from judge.retry import RetryPolicy
from judge.rubric import Rubric, load_rubric_dir
from tests.support.calibration_cases import calibration_case
from tests.support.judge_server import running_judge_server

TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel || "
    "The USER_PORT env var of user-service is set to 9999."
)
DIAGNOSIS = (
    "The user-service deployment in hotel sets USER_PORT=9999. "
    "The frontend fails to reach it and reservations error out."
)
FAST = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01, jitter=0)
CODED = {"D1-Q1", "D1-Q3", "D2-Q2"}


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def claims(**given: Any) -> str:
    base: dict[str, Any] = {
        "origin_component": "user-service",
        "origin_namespace": "hotel",
        "fault_kind": "wrong env var",
        "values": ["USER_PORT=9999"],
        "symptoms": ["reservations error out"],
        "affected": ["frontend"],
        "other_causes": [],
    }
    return json.dumps({**base, **given})


def answer(qid: str, rubric: Rubric, yes: bool = True) -> str:
    q = rubric.question(qid)
    evidence = "sets USER_PORT=9999" if yes and q.requires_quote else ""
    return json.dumps(
        {
            "reasoning": "r",
            "evidence": evidence,
            "answer": "yes" if yes else "no",
            "confidence": "high",
        }
    )


async def _grade(
    rubric: Rubric, replies: list[str], truth: str = TRUTH, diagnosis: str = DIAGNOSIS
) -> tuple[Any, list[Any]]:
    with running_judge_server(replies=list(replies)) as server:
        backend = OpenAIBackend(
            "m", base_url=server.openai_url, limits=StreamLimits(5, 5, None), logprobs=False
        )
        try:
            grader = Grader(backend, retry=FAST, asking="extraction")
            result = await grader.grade(rubric, truth, diagnosis)
        finally:
            await backend.aclose()
        return result, server.requests


def _rest(rubric: Rubric) -> list[str]:
    return [answer(q.id, rubric) for q in rubric.questions if q.id not in CODED]


async def test_claims_answer_three_questions_in_code_and_the_rest_are_asked(
    rubric: Rubric,
) -> None:
    result, requests = await _grade(rubric, [claims(), *_rest(rubric)])
    assert len(requests) == 1 + 6
    extraction = requests[0]["messages"]
    assert "write down what it claims" in extraction[0]["content"]
    assert "GROUND_TRUTH" not in extraction[1]["content"]  # the judge sees the diagnosis only
    asked = [r["messages"][1]["content"].rsplit("\n", 1)[-1].split()[1] for r in requests[1:]]
    assert asked == ["D1-Q2", "D2-Q1", "D2-Q3", "D3-Q1", "D3-Q2", "D3-Q3"]
    answers = {a.question_id: a for a in result.answers}
    assert all(answers[q].answer for q in CODED)
    assert answers["D1-Q1"].evidence_verified is True  # the sentence naming the origin
    assert answers["D1-Q1"].reasoning == "[claims] origin_component: user-service"
    assert result.outcome.passed and not result.needs_review
    assert {v.question_id: v.call_index for v in result.votes}["D1-Q1"] == 0


async def test_a_different_origin_or_another_cause_answers_no(rubric: Rubric) -> None:
    diagnosis = DIAGNOSIS + " The real cause is mongodb-rate, which user-service calls."
    reply = claims(origin_component="mongodb-rate", other_causes=["mongodb-rate"])
    result, _ = await _grade(rubric, [reply, *_rest(rubric)], diagnosis=diagnosis)
    answers = {a.question_id: a.answer for a in result.answers}
    assert answers["D1-Q1"] is False and answers["D1-Q3"] is False
    assert answers["D2-Q2"] is True


async def test_claims_not_in_the_diagnosis_are_dropped(rubric: Rubric) -> None:
    vague = "Something in the cluster is misconfigured and reservations fail."
    reply = claims(origin_component="user-service", values=["USER_PORT=9999"])
    result, _ = await _grade(rubric, [reply, *_rest(rubric)], diagnosis=vague)
    answers = {a.question_id: a.answer for a in result.answers}
    assert answers["D1-Q1"] is False and answers["D2-Q2"] is False
    assert answers["D1-Q3"] is True  # no component blamed at all


async def test_a_control_scenario_asks_every_question(rubric: Rubric) -> None:
    replies = [answer(q.id, rubric, yes=False) for q in rubric.questions]
    result, requests = await _grade(rubric, replies, truth="")
    assert len(requests) == 9 and result.status == "graded"


async def test_an_unusable_extraction_is_unscored_after_one_repair(rubric: Rubric) -> None:
    result, requests = await _grade(rubric, ["no json", '{"origin_component": 3}'])
    assert result.status == "unscored" and result.unscored_reason == "unparseable_reply"
    assert len(requests) == 2
    assert "origin_component must be a string" in result.detail


async def test_rendering_for_a_batch_sends_the_claims_call_and_every_asked_question(
    rubric: Rubric,
) -> None:
    """A judge that records each request for a batch and answers none is sent the claims
    call and the six questions code does not answer: none of them depends on another's
    reply, so all seven are calls a live grading makes first and all go in the batch."""
    recorder = RequestRecorder(ScriptedBackend())
    result = await Grader(recorder, retry=FAST, asking="extraction").grade(rubric, TRUTH, DIAGNOSIS)
    assert len(recorder.requests) == 7 and len(result.calls) == 7
    assert "write down what it claims" in recorder.requests[0].messages[0].content
    asked = [asked_question(r) for r in recorder.requests[1:]]
    assert asked == ["D1-Q2", "D2-Q1", "D2-Q3", "D3-Q1", "D3-Q2", "D3-Q3"]
    assert result.status == "unscored"


def test_claims_parser_is_strict() -> None:
    with pytest.raises(ReplyInvalid, match="missing key values"):
        parse_claims('{"origin_component": "x"}')
    with pytest.raises(ReplyInvalid, match="unexpected key answer"):
        parse_claims(claims(answer="yes"))
    assert parse_claims(claims(other_causes=["  redis "]))["other_causes"] == ["redis"]


def test_a_list_where_the_claims_schema_asks_for_one_string_is_refused() -> None:
    """The claims schema makes the origin, its namespace and the fault kind one string
    each: a reply that gives a list there (two origins) does not follow it, and is
    refused for its repair call rather than read as one of its elements."""
    for key in ("origin_component", "origin_namespace", "fault_kind"):
        with pytest.raises(ReplyInvalid, match=f"{key} must be a string"):
            parse_claims(claims(**{key: ["frontend", "user-service"]}))


@pytest.mark.parametrize(
    "origins",
    [["user-service", "frontend"], ["frontend", "user-service"]],
    ids=["truth-first", "truth-last"],
)
async def test_an_extraction_naming_two_origins_is_unscored_in_either_order(
    rubric: Rubric, origins: list[str]
) -> None:
    """A claims reply that names two origins as a list, again after its repair call,
    leaves the grading unscored (``unparseable_reply``) whichever origin comes first:
    the verdict never depends on the order of the list."""
    diagnosis = DIAGNOSIS + " Or maybe the frontend is broken."
    bad = claims(origin_component=origins)
    backend = ScriptedBackend([bad, bad, *_rest(rubric)])
    grader = Grader(backend, retry=RetryPolicy(max_attempts=1), asking="extraction")
    result = await grader.grade(rubric, TRUTH, diagnosis)
    assert result.status == "unscored", {a.question_id: a.answer for a in result.answers}
    assert result.unscored_reason == "unparseable_reply"
    assert "origin_component must be a string" in (result.detail or "")


async def test_code_answers_are_never_inverted_by_positive_asking(rubric: Rubric) -> None:
    # the other questions with a positive wording are asked so (the judge says "no":
    # nothing of the kind); D1-Q3 is answered in code, in the rubric's polarity
    rest = []
    for q in rubric.questions:
        if q.id not in CODED:
            rest.append(answer(q.id, rubric, yes=not q.positive_text))
    with running_judge_server(replies=[claims(), *rest]) as server:
        backend = OpenAIBackend(
            "m", base_url=server.openai_url, limits=StreamLimits(5, 5, None), logprobs=False
        )
        try:
            grader = Grader(backend, retry=FAST, asking="extraction", ask_as="positive")
            result = await grader.grade(rubric, TRUTH, DIAGNOSIS)
        finally:
            await backend.aclose()
    assert all(a.answer for a in result.answers), result.answers


async def test_a_kind_named_as_origin_is_read_from_the_causes_beside_it(rubric: Rubric) -> None:
    """A 1.5B judge wrote origin_component "Deployment" and put "the bad USER_PORT on
    deployment/user-service" under other_causes: the origin is read from there."""
    diagnosis = DIAGNOSIS + " Cause: the bad USER_PORT on deployment/user-service."
    reply = claims(
        origin_component="Deployment", other_causes=["the bad USER_PORT on deployment/user-service"]
    )
    result, _ = await _grade(rubric, [reply, *_rest(rubric)], diagnosis=diagnosis)
    answers = {a.question_id: a.answer for a in result.answers}
    assert answers["D1-Q1"] is True and answers["D1-Q3"] is True


async def test_a_cause_that_names_no_component_blames_none(rubric: Rubric) -> None:
    diagnosis = DIAGNOSIS + " The container limit is too low and the tag is non-existent."
    reply = claims(other_causes=["container limit is too low", "non-existent"])
    result, _ = await _grade(rubric, [reply, *_rest(rubric)], diagnosis=diagnosis)
    assert {a.question_id: a.answer for a in result.answers}["D1-Q3"] is True


async def test_a_namespace_as_origin_and_another_service_blamed_answers_no(
    rubric: Rubric,
) -> None:
    diagnosis = "Everything in hotel is slow; cartservice overloads the cluster."
    reply = claims(origin_component="hotel", other_causes=["cartservice"], values=[])
    result, _ = await _grade(rubric, [reply, *_rest(rubric)], diagnosis=diagnosis)
    answers = {a.question_id: a.answer for a in result.answers}
    assert answers["D1-Q1"] is False and answers["D1-Q3"] is False


SCALED_TRUTH = (
    "[fault_spec] component=deployment/geo; namespace=hotel || "
    "The geo deployment was scaled down to zero replicas."
)
OOM_DIAGNOSIS = (
    "The geo deployment in hotel is the origin. Its memory limit of 128Mi is too low, "
    "so its pods are OOMKilled and search requests fail."
)


def _no(request: JudgeRequest) -> str:
    return scripted_reply(request, yes=set())


async def test_extraction_does_not_count_any_value_as_the_ground_truths_when_it_has_none(
    rubric: Rubric,
) -> None:
    """Labelled (LABELLING.md), D2-Q2: the truth scaled geo to zero replicas, the
    diagnosis blames an OOM at a memory limit of 128Mi: no value of the truth, no. A
    header with no value to compare with counted every claimed value as its own (yes);
    the judge is asked D2-Q2 then (one call more)."""
    reply = claims(
        origin_component="geo",
        origin_namespace="hotel",
        fault_kind="memory limit too low, OOMKilled",
        values=["128Mi"],
        symptoms=["search requests fail"],
    )
    backend = ScriptedBackend([reply, *[_no] * 7])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, SCALED_TRUTH, OOM_DIAGNOSIS
    )
    assert result.status == "graded"
    d2q2 = next(a for a in result.answers if a.question_id == "D2-Q2")
    # 128Mi is not a value of a ground truth that changed the replica count
    assert d2q2.answer is False, (d2q2.reasoning, d2q2.evidence, d2q2.grounding)


# Labelled case, D1-Q1: the ground truth names the Service user-service (its targetPort
# was changed); the diagnosis designates the Deployment of the same name as the origin.
# LABELLING.md: "blaming the Deployment when the ground truth names the Service of the
# same name is no".
SERVICE_TRUTH = (
    "[fault_spec] component=service/user-service; namespace=hotel || "
    "The targetPort of the user-service Service was changed from 8080 to 9090."
)
DEPLOYMENT_DIAGNOSIS = (
    "The origin is deployment/user-service in hotel: its pods crash on start, "
    "so the frontend gets connection refused."
)


async def test_extraction_origin_of_another_kind_with_the_same_name_is_no(
    rubric: Rubric,
) -> None:
    reply = claims(
        origin_component="deployment/user-service",
        origin_namespace="hotel",
        fault_kind="pods crash on start",
        symptoms=["connection refused"],
        affected=["frontend"],
    )
    backend = ScriptedBackend([reply, *[_no] * 6])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, SERVICE_TRUTH, DEPLOYMENT_DIAGNOSIS
    )
    d1q1 = next(a for a in result.answers if a.question_id == "D1-Q1")
    assert d1q1.answer is False, (d1q1.reasoning, d1q1.evidence)


# Labelled case, D1-Q1 and D1-Q3: the ground truth's origin is the geo Deployment (bad
# image tag); the diagnosis designates mongodb-geo (another component of the same
# application, which the ground truth does not implicate) as the origin and names geo
# only as affected. LABELLING.md: D1-Q1 no (the ground truth's component is not the
# designated origin), D1-Q3 no (a component the ground truth does not implicate is named
# as origin).
GEO_TRUTH = (
    "[fault_spec] component=deployment/geo; namespace=hotel-reservation || "
    "The image of the geo deployment was changed to the non-existent tag geo:v9.9."
)
MONGO_DIAGNOSIS = (
    "The origin is mongodb-geo in hotel-reservation: the database is down, so geo cannot "
    "read its data and search requests fail."
)


async def test_extraction_origin_that_only_contains_the_name_is_another_component(
    rubric: Rubric,
) -> None:
    reply = claims(
        origin_component="mongodb-geo",
        origin_namespace="hotel-reservation",
        fault_kind="the database is down",
        symptoms=["search requests fail"],
        affected=["geo"],
    )
    backend = ScriptedBackend([reply, *[_no] * 6])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, GEO_TRUTH, MONGO_DIAGNOSIS
    )
    answers = {a.question_id: a for a in result.answers}
    assert answers["D1-Q1"].answer is False, answers["D1-Q1"].reasoning
    assert answers["D1-Q3"].answer is False, answers["D1-Q3"].reasoning


# Labelled case, D1-Q3: same ground truth (geo's bad image tag); the diagnosis names
# redis, a component the ground truth does not implicate and that is not described as
# affected, as the origin. LABELLING.md D1-Q3: "no if a component that the ground truth
# ... does not implicate at all, is named as origin or co-origin".
REDIS_DIAGNOSIS = (
    "The root cause is redis in hotel-reservation: it ran out of memory and evicted "
    "every key, so search requests fail."
)


async def test_extraction_a_one_word_component_named_as_origin_is_blamed(
    rubric: Rubric,
) -> None:
    reply = claims(
        origin_component="redis",
        origin_namespace="hotel-reservation",
        fault_kind="ran out of memory",
        symptoms=["search requests fail"],
    )
    backend = ScriptedBackend([reply, *[_no] * 6])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, GEO_TRUTH, REDIS_DIAGNOSIS
    )
    answers = {a.question_id: a for a in result.answers}
    assert answers["D1-Q1"].answer is False
    assert answers["D1-Q3"].answer is False, answers["D1-Q3"].reasoning


# Labelled case, D1-Q1 and D1-Q3: same ground truth (geo's bad image tag); the diagnosis
# designates a pod of the geo Deployment, as kubectl lists it, as the origin and gives the
# bad tag. LABELLING.md: D1-Q1 yes (a pod of a workload is the workload's), D1-Q3 yes (no
# other component is blamed). Kubernetes spells pod-template-hashes and pod suffixes in
# "bcdfghjklmnpqrstvwxz2456789", so about one pod in four has a last part with no digit.
@pytest.mark.parametrize(
    "pod",
    [
        "geo-5f7b9c8d4-kzmxq",  # a random part of letters only
        "geo-bcdfghjkl-wxqzt",  # both parts letters only
    ],
)
async def test_extraction_a_pod_of_the_ground_truths_deployment_is_its_component(
    rubric: Rubric, pod: str
) -> None:
    """A pod named by its full name, whatever letters its hash suffix has, is its
    Deployment as origin."""
    diagnosis = (
        f"The origin is pod {pod} in hotel-reservation: its image geo:v9.9 does not "
        "exist, so it is stuck in ImagePullBackOff and search requests fail."
    )
    reply = claims(
        origin_component=pod,
        origin_namespace="hotel-reservation",
        fault_kind="image pull failure",
        values=["geo:v9.9"],
        symptoms=["ImagePullBackOff"],
        affected=[],
    )
    backend = ScriptedBackend([reply, *[_no] * 6])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, GEO_TRUTH, diagnosis
    )
    answers = {a.question_id: a for a in result.answers}
    assert answers["D1-Q1"].answer is True, answers["D1-Q1"].reasoning
    assert answers["D1-Q3"].answer is True, answers["D1-Q3"].reasoning


@pytest.mark.parametrize("other", ["geo-proxy", "geo-cache", "geo-https"])
async def test_extraction_a_longer_name_after_the_components_is_another_component(
    rubric: Rubric, other: str
) -> None:
    """A name that continues the component's with a word (even one spelt without vowels)
    is not one of its pods."""
    diagnosis = (
        f"The origin is {other} in hotel-reservation: it rejects every call, so search "
        "requests fail."
    )
    reply = claims(
        origin_component=other,
        origin_namespace="hotel-reservation",
        fault_kind="rejects every call",
        values=[],
        symptoms=["search requests fail"],
        affected=[],
    )
    backend = ScriptedBackend([reply, *[_no] * 6])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, GEO_TRUTH, diagnosis
    )
    answers = {a.question_id: a for a in result.answers}
    assert answers["D1-Q1"].answer is False, answers["D1-Q1"].reasoning
    assert answers["D1-Q3"].answer is False, answers["D1-Q3"].reasoning


# Labelled case, D2-Q2: the ground truth's mutated value is a CPU limit of 500m (half a
# core); the diagnosis gives a memory limit of 500M (500 megabytes). LABELLING.md D2-Q2:
# "A value counts only if it matches the ground truth after reading units" (1G is not
# 1Gi): 500M of memory is not 500m of CPU, so D2-Q2 is no.
CPU_TRUTH = (
    "[fault_spec] component=deployment/geo; namespace=hotel-reservation || "
    "The CPU limit of the geo container was set to 500m."
)
MEMORY_DIAGNOSIS = (
    "The origin is the geo deployment in hotel-reservation. Its memory limit of 500M is "
    "too low, so its pods are OOMKilled and search requests fail."
)


async def test_extraction_a_megabyte_value_is_not_the_ground_truths_millicores(
    rubric: Rubric,
) -> None:
    reply = claims(
        origin_component="geo",
        origin_namespace="hotel-reservation",
        fault_kind="memory limit too low",
        values=["500M"],
        symptoms=["search requests fail"],
    )
    backend = ScriptedBackend([reply, *[_no] * 6])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(
        rubric, CPU_TRUTH, MEMORY_DIAGNOSIS
    )
    d2q2 = next(a for a in result.answers if a.question_id == "D2-Q2")
    assert d2q2.answer is False, (d2q2.reasoning, d2q2.grounding)


#: a correct diagnosis written with no-break spaces between some words (as model
#: outputs and web copies often are); the judge sees it normalized, with plain spaces
NBSP_DIAGNOSIS = (
    "The user-service\u00a0deployment in hotel sets USER_PORT\u00a0to 9999. "
    "The frontend fails to reach it and reservations error out."
)


def _copying_judge(request: JudgeRequest) -> str:
    """The claims as the judge saw them (plain spaces); a yes to each question asked."""
    if asked_question(request) is None:
        return claims(origin_component="user-service deployment", values=["USER_PORT to 9999"])
    return json.dumps(
        {"reasoning": "r", "evidence": "sets USER_PORT", "answer": "yes", "confidence": "high"}
    )


async def test_a_coded_yes_is_backed_by_its_sentence_when_the_diagnosis_has_no_break_spaces(
    rubric: Rubric,
) -> None:
    """A question answered in code from the claims has as evidence the diagnosis'
    sentence with the claim, found in the diagnosis as the judge saw it: a no-break space
    inside the claim leaves the yes backed, not evidence_unverified."""
    backend = ScriptedBackend([_copying_judge] * 12)
    result = await Grader(backend, retry=RetryPolicy(max_attempts=1), asking="extraction").grade(
        rubric, TRUTH, NBSP_DIAGNOSIS
    )
    assert result.status == "graded", result.detail
    answers = {a.question_id: a for a in result.answers}
    for qid in ("D1-Q1", "D2-Q2"):  # the origin and the value, each from the claims
        assert answers[qid].judge_answer is True
        assert answers[qid].evidence.startswith("The user-service deployment in hotel sets")
        assert answers[qid].evidence_verified is True
    assert "evidence_unverified" not in result.review_reasons, result.detail
    assert result.passed is True


@pytest.mark.parametrize(
    ("diagnosis_hyphen", "claim_hyphen"),
    [
        # the agent wrote U+2011; the judge copies the name with a Unicode hyphen
        ("\u2011", "\u2010"),
        # the agent wrote "-"; the judge's reply writes a non-breaking hyphen
        ("-", "\u2011"),
    ],
    ids=["agent-wrote-U+2011", "judge-wrote-U+2011"],
)
async def test_an_extracted_origin_with_a_unicode_hyphen_is_the_component(
    rubric: Rubric, diagnosis_hyphen: str, claim_hyphen: str
) -> None:
    """A Unicode hyphen is ``-`` in the claims as in the diagnosis: an origin claimed
    as "user‑service", by the agent or by the judge, is the ground truth's component."""
    backend = ScriptedBackend(
        [
            claims(origin_component=f"user{claim_hyphen}service"),
            *[answer("D1-Q2", rubric, False)] * 6,
        ]
    )
    grader = Grader(backend, retry=FAST, asking="extraction")
    diagnosis = DIAGNOSIS.replace("user-service", f"user{diagnosis_hyphen}service")
    result = await grader.grade(rubric, TRUTH, diagnosis)
    assert result.status == "graded", result.detail
    assert {a.question_id: a for a in result.answers}["D1-Q1"].answer is True


async def _grade_as_labelled(rubric: Rubric, case: dict[str, Any], values: list[str]) -> Any:
    """Extraction asking with a faithful extractor (the origin, the ``values`` given) and
    every asked question answered as the case's labels say."""
    yes = {q for q, a in case["answers"].items() if a == "yes"}
    component = case["ground_truth"].split("component=", 1)[1].split(";", 1)[0].split("/")[-1]

    def reply(request: JudgeRequest) -> str:
        if asked_question(request) is None:
            return claims(
                origin_component=component,
                origin_namespace="",
                fault_kind="",
                values=values,
                symptoms=[],
                affected=[],
            )
        return scripted_reply(request, yes=yes)

    grader = Grader(ScriptedBackend([reply] * 12), retry=FAST, asking="extraction")
    return await grader.grade(rubric, case["ground_truth"], case["diagnosis"])


@pytest.mark.parametrize(
    ("case_id", "values"),
    [
        # only 8081, the container port the ground truth lists as healthy (unchanged)
        ("port-borderline", ["8081"]),
        # 512Mi is the old side of "lowered from 512Mi to 256Mi"
        ("oom-wrong", ["512Mi", "1Gi"]),
        # 2 cores is the old side of "lowered from 2 cores to 200m"
        ("cpu-wrong", ["2 cores"]),
        # geo's usual port: "all traffic to geo on port 8083 is dropped" follows the change
        ("netpol-borderline", ["8083"]),
        # the port frontend-proxy serves the replaced certificate on, not what was replaced
        ("cert-borderline", ["8443"]),
        # the unchanged connection timeout (30000ms in the error that followed), not the
        # pool size that was set
        ("pool-borderline", ["30s"]),
    ],
)
async def test_extraction_does_not_count_an_unchanged_or_old_value_as_mutated(
    rubric: Rubric, case_id: str, values: list[str]
) -> None:
    """Labelled (LABELLING.md), D2-Q2: a mutated value stated correctly counts; "a normal
    value of a field that was not changed does not count", nor the value a change
    replaced. The calibration set's label is no, and so is the answer made in code."""
    case = calibration_case(case_id)
    assert case["answers"]["D2-Q2"] == "no"
    assert all(value.casefold() in case["diagnosis"].casefold() for value in values)
    result = await _grade_as_labelled(rubric, case, values)
    d2q2 = next(a for a in result.answers if a.question_id == "D2-Q2")
    assert d2q2.answer is False, d2q2.reasoning


@pytest.mark.parametrize(
    ("case_id", "values"),
    [("port-correct", ["8082"]), ("oom-correct", ["256Mi"]), ("cpu-borderline", ["0.2 cores"])],
)
async def test_extraction_counts_the_new_value_of_a_change(
    rubric: Rubric, case_id: str, values: list[str]
) -> None:
    """The value the fault set, as the diagnosis writes it (``0.2 cores`` for ``200m``),
    answers D2-Q2 yes, as labelled."""
    case = calibration_case(case_id)
    assert case["answers"]["D2-Q2"] == "yes"
    result = await _grade_as_labelled(rubric, case, values)
    d2q2 = next(a for a in result.answers if a.question_id == "D2-Q2")
    assert d2q2.answer is True, d2q2.reasoning


async def test_extraction_fails_the_port_borderline_case_as_labelled(rubric: Rubric) -> None:
    """port-borderline's labels make it a fail (6 yes, decided by D2-Q2: only the unchanged
    port 8081 is given); answered as labelled with extraction, it fails too."""
    case = calibration_case("port-borderline")
    result = await _grade_as_labelled(rubric, case, ["8081"])
    assert result.outcome.passed is False, result.outcome


def _only(**given: Any) -> str:
    """Claims with nothing but ``given``."""
    empty: dict[str, Any] = {"origin_namespace": "", "fault_kind": "", "values": []}
    return claims(**{**empty, "symptoms": [], "affected": [], **given})


async def _extraction_answers(rubric: Rubric, truth: str, diagnosis: str, reply: str) -> Any:
    """Extraction asking with the claims ``reply`` and a no to every asked question."""
    backend = ScriptedBackend([reply, *[_no] * 9])
    result = await Grader(backend, retry=FAST, asking="extraction").grade(rubric, truth, diagnosis)
    assert result.status == "graded", result.detail
    return {a.question_id: a for a in result.answers}


@pytest.mark.parametrize(
    ("case_id", "origin", "kind"),
    [
        # "payment is broken after the latest payment image (1.12.0) ... Roll back payment."
        ("flag-wrong", "payment", "bad image release"),
        # "frontend-proxy (Envoy) is presenting an expired certificate on 8443"
        ("cert-borderline", "frontend-proxy", "old cert"),
        # "Root cause: the nginx-thrift deployment is misconfigured"
        ("configmap-borderline", "nginx-thrift", "misconfigured"),
    ],
)
async def test_an_affected_component_named_as_origin_is_not_a_healthy_one(
    rubric: Rubric, case_id: str, origin: str, kind: str
) -> None:
    """Labelled (LABELLING.md), D1-Q3: a component the ground truth lists under
    ``Affected:`` fails but is not healthy, so naming it as the origin keeps D1-Q3 yes
    (D1-Q2 carries that error); answered in code from the claims, it is yes too."""
    case = calibration_case(case_id)
    assert case["answers"]["D1-Q3"] == "yes"
    reply = _only(origin_component=origin, fault_kind=kind, other_causes=[])
    answers = await _extraction_answers(rubric, case["ground_truth"], case["diagnosis"], reply)
    assert answers["D1-Q3"].answer is True, answers["D1-Q3"].reasoning


async def test_an_unlisted_component_named_as_origin_still_answers_no(rubric: Rubric) -> None:
    """An origin the ground truth neither blames nor lists as affected (checkout for a
    bad image of geo) is still a wrong origin for D1-Q3."""
    truth = calibration_case("image-correct")["ground_truth"]
    diagnosis = "checkout is the origin: its pods crash, so geo lookups fail."
    answers = await _extraction_answers(
        rubric, truth, diagnosis, _only(origin_component="checkout")
    )
    assert answers["D1-Q3"].answer is False, answers["D1-Q3"].reasoning


#: geo's image tag v9.9.9 does not exist; the ground truth says "Healthy: rate, profile,
#: mongodb-geo"
ONE_WORD_DIAGNOSIS = (
    "The geo deployment's image was changed to the tag v9.9.9, which does not exist, so "
    "geo has no ready pod. On top of that rate keeps crashing, which is a second cause "
    "of the failing searches."
)


async def test_a_healthy_one_word_component_blamed_as_co_origin_answers_no(
    rubric: Rubric,
) -> None:
    """Labelled (LABELLING.md), D1-Q3: "no if a component that the ground truth says is
    healthy ... is named as origin or co-origin", a one-word name (``rate``) as well as
    ``mongodb-geo``; a one-word cause the ground truth does not list ("memory") still
    blames no component."""
    truth = calibration_case("image-correct")["ground_truth"]
    assert "Healthy: rate" in truth
    blamed = _only(
        origin_component="geo",
        fault_kind="image tag does not exist",
        values=["v9.9.9"],
        other_causes=["rate"],
    )
    answers = await _extraction_answers(rubric, truth, ONE_WORD_DIAGNOSIS, blamed)
    assert answers["D1-Q3"].answer is False, answers["D1-Q3"].reasoning
    diagnosis = ONE_WORD_DIAGNOSIS + " Memory is tight as well."
    thing = _only(origin_component="geo", other_causes=["memory"])
    answers = await _extraction_answers(rubric, truth, diagnosis, thing)
    assert answers["D1-Q3"].answer is True, answers["D1-Q3"].reasoning
