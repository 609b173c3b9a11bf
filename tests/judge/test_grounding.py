"""Deterministic grounding: a judge "yes" must be possible given what the diagnosis says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.errors import RubricError
from judge.grader import Grader
from judge.grounding import check_condition, facts_of
from judge.rubric import DEFAULT_RUBRIC_DIR, Rubric, load_rubric, load_rubric_dir
from tests.support.calibration_cases import calibration_case
from tests.support.rubrics import rubric_checking_values

TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
    "The USER_PORT env var of user-service is set to 9999 while its Service targets 8086."
)
RIGHT = "user-service in hotel-reservation listens on 9999 (USER_PORT); its Service targets 8086."
#: names the component but none of the values
VAGUE = "The user-service deployment has a bad configuration, so the frontend fails."
#: blames another component and gives no value of the fault
WRONG = "The mongodb-rate database ran out of memory; reservations time out."


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


async def _grade(rubric: Rubric, truth: str, diagnosis: str) -> Any:
    grader = Grader(ScriptedBackend([scripted_reply]))  # yes to all, quoting the diagnosis
    return await grader.grade(rubric, truth, diagnosis)


@pytest.mark.parametrize(
    ("truth", "values"),
    [
        (TRUTH, ("USER_PORT", "9999", "8086")),
        (
            "[fault_spec] component=deployment/geo; namespace=hotel || The memory limit of "
            "geo is 128Mi and its CPU limit 500m, so it restarts every 30s.",
            ("128Mi", "500m", "30s"),
        ),
        (
            "[fault_spec] component=deployment/frontend; namespace=shop || The image is "
            "ghcr.io/acme/frontend:1.11.1-broken, which crashes on start.",
            ("ghcr.io/acme/frontend:1.11.1-broken", "1.11.1", "1.11.1-broken"),
        ),
        (
            "[fault_spec] component=service/cart; namespace=shop || The selector is "
            "app=cart-v2, so /api/cart has no endpoints.",
            ("app=cart-v2", "/api/cart"),
        ),
    ],
)
def test_values_come_from_the_description(truth: str, values: tuple[str, ...]) -> None:
    facts = facts_of(truth)
    assert facts is not None
    assert facts.values == values
    assert facts.components == (truth.split("/", 1)[1].split(";")[0],)


@pytest.mark.parametrize("truth", ["", "The user-service crashed.", "component=x || y"])
def test_no_header_no_facts(truth: str) -> None:
    assert facts_of(truth) is None


@pytest.mark.parametrize(
    ("diagnosis", "named"),
    [
        ("user-service crashed", True),
        ("the User_Service pods restart", True),
        ("pod user-service-7d9f8c6b5-xk2lp is in CrashLoopBackOff", True),
        ("deployment/user-service is misconfigured", True),
        ("the users service", False),
        ("the service of the user", False),
    ],
)
def test_component_condition(diagnosis: str, named: bool) -> None:
    facts = facts_of(TRUTH)
    assert facts is not None
    assert (check_condition("component", facts, diagnosis) is None) is named


@pytest.mark.parametrize(
    ("truth", "diagnosis", "points"),
    [
        (TRUTH, "user-service crashed", True),
        ("[fault_spec] component=deployment/mongodb-geo; namespace=n || x", "geo's MongoDB", True),
        ("[fault_spec] component=deployment/mongodb-geo; namespace=n || x", "MongoDB", False),
        (
            "[fault_spec] component=networkpolicy/deny-geo; namespace=n || x",
            "probably a NetworkPolicy blocking ingress to geo",
            True,
        ),
        (
            "[fault_spec] component=persistentvolumeclaim/user-pvc; namespace=n || x",
            "the PVC is stuck Pending",
            True,
        ),
        # a generic kind points at nothing: a wrong diagnosis says "deployment" too
        (TRUTH, "the mongodb-rate deployment ran out of disk", False),
        (TRUTH, "the geo service had high latency", False),
    ],
)
def test_origin_consistent_condition(truth: str, diagnosis: str, points: bool) -> None:
    facts = facts_of(truth)
    assert facts is not None
    assert (check_condition("origin_consistent", facts, diagnosis) is None) is points


@pytest.mark.parametrize(
    ("truth_values", "diagnosis", "named"),
    [
        ("USER_PORT=9999", "the port 9999 is wrong", True),
        ("USER_PORT=9999", "port 99999 is wrong", False),
        ("limit 128Mi", "a limit of 128 Mi", True),
        ("limit 128Mi", "a limit of 128MiB", True),
        ("limit 128Mi", "a limit of 1280Mi", False),
        ("limit 128Mi", "a tight memory limit", False),
        ("limit 128Mi", "a limit of 128mi", True),  # case aside
        # milli is not mega: 500m of CPU is no 500M or 500MB of memory, and back
        ("a CPU limit of 500m", "a memory limit of 500M", False),
        ("a CPU limit of 500m", "a memory limit of 500MB", False),
        ("a CPU limit of 500m", "a CPU limit of 500 m", True),
        ("a memory limit of 500M", "a limit of 500m", False),
        ("a memory limit of 500M", "a limit of 500MB", True),
    ],
)
def test_values_condition(truth_values: str, diagnosis: str, named: bool) -> None:
    facts = facts_of(f"[fault_spec] component=deployment/x; namespace=n || {truth_values}")
    assert facts is not None
    assert (check_condition("values", facts, diagnosis) is None) is named


def test_the_default_rubric_declares_its_conditions_as_data(rubric: Rubric) -> None:
    grounded = {q.id: q.grounding for q in rubric.questions if q.grounding}
    assert grounded == {
        "D1-Q1": "component",
        "D1-Q2": "origin_consistent",
        "D2-Q2": "values",
    }  # a wrong value of the right fault type is D2-Q2's error alone, not D2-Q3's
    assert rubric.grounding_failure == "veto"


async def test_a_right_diagnosis_passes_every_condition(rubric: Rubric) -> None:
    result = await _grade(rubric, TRUTH, RIGHT)
    assert result.outcome.passed
    assert {a.question_id: a.grounding for a in result.answers if a.grounding} == {
        "D1-Q1": "passed: component",
        "D1-Q2": "passed: origin_consistent",
        "D2-Q2": "passed: values",
    }
    assert result.review_reasons == ()


async def test_a_yes_that_fails_its_condition_is_vetoed(rubric: Rubric) -> None:
    result = await _grade(rubric, TRUTH, WRONG)
    vetoed = {a.question_id: a for a in result.answers if not a.answer}
    assert set(vetoed) == {"D1-Q1", "D1-Q2", "D2-Q2"}
    assert all(a.judge_answer for a in vetoed.values())
    assert vetoed["D1-Q1"].grounding == "vetoed: component user-service not named"
    assert vetoed["D2-Q2"].grounding.startswith("vetoed: none of the ground truth's values")
    assert result.judge_outcome.passed and not result.outcome.passed
    assert "grounding vetoed D1-Q1: component user-service not named" in result.detail
    assert "grounding_failed" not in result.review_reasons
    assert result.answers[0].grounding == "vetoed: component user-service not named"


async def test_a_veto_names_its_check_and_what_it_looked_for(rubric: Rubric) -> None:
    result = await _grade(rubric, TRUTH, WRONG)
    vetoes = {a.question_id: a.veto for a in result.answers if a.veto}
    assert set(vetoes) == {"D1-Q1", "D1-Q2", "D2-Q2"}
    assert vetoes["D1-Q1"].model_dump() == {
        "check": "grounding.component",
        "effect": "vetoed",
        "reason": "the diagnosis does not name deployment/user-service",
    }
    assert vetoes["D1-Q2"].check == "grounding.origin_consistent"
    assert vetoes["D1-Q2"].reason.startswith("nothing in the diagnosis points at deployment/")
    assert vetoes["D2-Q2"].check == "grounding.values"
    assert "USER_PORT" in vetoes["D2-Q2"].reason and "9999" in vetoes["D2-Q2"].reason
    passed = await _grade(rubric, TRUTH, RIGHT)
    assert all(a.veto is None for a in passed.answers)


async def test_a_contradicted_value_veto_shows_both_values() -> None:
    truth = (
        "[fault_spec] component=deployment/geo; namespace=hotel || "
        "The CPU request of deployment/geo was set to 2.00 cores, so no node can schedule it."
    )
    diagnosis = "The geo deployment in hotel is unschedulable: its cpu request is 200m."
    result = await _grade(rubric_checking_values("D2-Q3"), truth, diagnosis)
    veto = next(a.veto for a in result.answers if a.question_id == "D2-Q3")
    assert veto is not None and veto.check == "grounding.consistent_values"
    assert veto.reason.startswith("the diagnosis contradicts the ground truth")
    assert '"200m"' in veto.reason and "2.00" in veto.reason


async def test_naming_the_component_without_values_vetoes_only_the_details(
    rubric: Rubric,
) -> None:
    result = await _grade(rubric, TRUTH, VAGUE)
    assert [a.question_id for a in result.answers if not a.answer] == ["D2-Q2"]
    assert result.outcome.passed  # 8 of 9: the conditions are necessary, not sufficient


async def test_flag_mode_keeps_the_yes_and_asks_for_review(rubric: Rubric) -> None:
    flagging = rubric.model_copy(update={"grounding_failure": "flag"})
    result = await _grade(flagging, TRUTH, WRONG)
    assert all(a.answer for a in result.answers)
    assert result.outcome.passed
    assert "grounding_failed" in result.review_reasons
    assert next(a for a in result.answers if a.question_id == "D1-Q1").grounding == (
        "flagged: component user-service not named"
    )
    flag = next(a.veto for a in result.answers if a.question_id == "D1-Q1")
    assert flag is not None and (flag.check, flag.effect) == ("grounding.component", "flagged")


@pytest.mark.parametrize("truth", ["", "Free text: the user-service port is wrong."])
async def test_control_scenarios_and_headerless_truths_have_no_conditions(
    rubric: Rubric, truth: str
) -> None:
    result = await _grade(rubric, truth, WRONG)
    assert all(a.answer and a.grounding is None for a in result.answers)


def _rubric_file(tmp_path: Path, mutate: Any) -> Path:
    data = yaml.safe_load((DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text())
    mutate(data)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def test_conditions_follow_the_rubric_not_question_ids(tmp_path: Path) -> None:
    def move(data: dict[str, Any]) -> None:
        for dimension in data["dimensions"]:
            for question in dimension["questions"]:
                question.pop("grounding", None)
        data["dimensions"][2]["questions"][0]["grounding"] = "component"

    rubric = load_rubric(_rubric_file(tmp_path, move))
    result = await _grade(rubric, TRUTH, WRONG)
    assert [a.question_id for a in result.answers if not a.answer] == ["D3-Q1"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["dimensions"][0]["questions"][0].update(grounding="namespace"),
            "dimensions.0.questions.0.grounding",
        ),
        (lambda d: d.update(grounding_failure="ignore"), "grounding_failure"),
    ],
)
def test_bad_grounding_keys_are_rejected(tmp_path: Path, mutate: Any, message: str) -> None:
    with pytest.raises(RubricError, match=message):
        load_rubric(_rubric_file(tmp_path, mutate))


@pytest.mark.parametrize(
    ("description", "mutated"),
    [
        # the old side of a change, what follows "Affected:" or "Healthy:", status codes
        (
            "The targetPort of the profile Service was changed from 8081 to 8082; nothing "
            "listens on 8082. Affected: frontend (hotel detail requests return 500). "
            "Healthy: the profile pods (Running, listening on 8081).",
            ("8082",),
        ),
        (
            "The memory limit of ad was lowered from 512Mi to 256Mi; the JVM is OOMKilled "
            "(exit code 137).",
            ("256Mi",),
        ),
        # a default or usual value; the request path of a symptom; a one-digit value set
        (
            "The env var POOL_SIZE was set to 2 (default 10); requests take 3 s instead of "
            "about 40 ms and /api/orders returns 504.",
            ("POOL_SIZE", "2"),
        ),
        # what followed the change, in a clause of its own: the port traffic is dropped
        # on, the port a certificate is served on, the timeout of the errors that followed
        (
            "A NetworkPolicy selecting app=geo with an empty ingress rule list was added; "
            "all traffic to geo on port 8083 is dropped.",
            ("app=geo",),
        ),
        (
            "The TLS certificate was replaced by one whose notAfter is 2026-11-30; the proxy "
            "serves it on port 8443 and clients fail the handshake.",
            ("2026", "11", "30"),
        ),
        (
            "POOL_SIZE was set to 2; under load requests fail with Connection is not "
            "available, request timed out after 30000ms.",
            ("POOL_SIZE", "2"),
        ),
        # a key=value whose value is written nowhere else names the setting alone too
        (
            "A nodeSelector disktype=nvme-gen5 was added; no node carries that label.",
            ("disktype=nvme-gen5", "nvme-gen5"),
        ),
        # a probe's path is what was set, its status code what followed
        (
            "The livenessProbe was changed to an HTTP GET on path /healthz-v2 port 8080, "
            "which is not served (404).",
            ("/healthz-v2", "8080"),
        ),
    ],
)
def test_the_mutated_values_are_those_the_fault_set(
    description: str, mutated: tuple[str, ...]
) -> None:
    """The values a diagnosis must give are those of the change itself: the labelling
    guide's "a normal value of a field that was not changed does not count"."""
    facts = facts_of("[fault_spec] component=deployment/x; namespace=n || " + description)
    assert facts is not None
    assert facts.mutated == mutated


@pytest.mark.parametrize(
    ("reference", "named"),
    [
        ("secret/mongodb-profile-auth", True),
        ("networkpolicy/deny-geo-ingress", True),
        ("configmap/flagd-config", True),
        ("deployment/mongodb-profile-auth", False),  # a Deployment's name is the component
    ],
)
def test_the_name_of_a_configuration_object_is_a_mutated_value(reference: str, named: bool) -> None:
    """The name of a deleted Secret or an added NetworkPolicy is a mutated key (the
    labelling guide's "policy name"); a Deployment's name is only the component."""
    facts = facts_of(
        f"[fault_spec] component={reference}; namespace=n || It was deleted; MONGO_PASSWORD "
        "is no longer set."
    )
    assert facts is not None
    diagnosis = f"the object {reference.split('/')[1]} is gone"
    assert (check_condition("values", facts, diagnosis) is None) is named


@pytest.mark.parametrize(
    ("diagnosis", "named"),
    [
        ("the profile pods listen on 8081", False),  # unchanged, listed as healthy
        ("the targetPort was 8081 before", False),  # the old side of the change
        ("frontend returns 500", False),  # a status code of a symptom
        ("the Service forwards to 8082", True),
    ],
)
def test_only_a_mutated_value_meets_the_values_condition(diagnosis: str, named: bool) -> None:
    """D2-Q2 of the labelling guide: a value counts only if the fault set it."""
    facts = facts_of(
        "[fault_spec] component=service/profile; namespace=hotel || The targetPort of the "
        "profile Service was changed from 8081 to 8082. Affected: frontend (requests return "
        "500). Healthy: the profile pods (listening on 8081)."
    )
    assert facts is not None
    assert (check_condition("values", facts, diagnosis) is None) is named


@pytest.mark.parametrize(
    ("diagnosis", "named"),
    [
        ("its memory limit is 0.5Gi", False),  # the old 512Mi, written otherwise
        ("its memory limit is 0.25Gi", True),  # the new 256Mi, written otherwise
        ("its CPU limit is 2 cores", False),
        ("its CPU limit is 0.2 cores", True),
    ],
)
def test_an_equal_quantity_names_only_the_new_side_of_a_change(diagnosis: str, named: bool) -> None:
    facts = facts_of(
        "[fault_spec] component=deployment/ad; namespace=shop || The memory limit of ad was "
        "lowered from 512Mi to 256Mi and its CPU limit from 2 cores to 200m."
    )
    assert facts is not None
    assert (check_condition("values", facts, diagnosis) is None) is named


@pytest.mark.parametrize(
    ("description", "mutated"),
    [
        # what was replaced: the object of "replace", the subject of "was replaced by"
        ("CITY=Zurich replaced CITY=Geneva in the ConfigMap.", ("CITY=Zurich",)),
        ("An operator replaced CITY=Geneva with CITY=Zurich.", ("CITY=Zurich",)),
        ("CITY=Geneva was replaced by CITY=Zurich.", ("CITY=Zurich",)),
        ("The image nginx:1.24 was replaced with nginx:1.25.", ("nginx:1.25", "1.25")),
        ("The image nginx:1.24 replaced by nginx:1.25 crashes.", ("nginx:1.25", "1.25")),
        (
            "The fault replaced the geo container image nginx:1.24 with nginx:broken.",
            ("nginx:broken", "broken"),
        ),
        # a former value: "(was X)", "previously X", "formerly X"
        ("The ConfigMap was changed to set CITY=Zurich (was CITY=Geneva).", ("CITY=Zurich",)),
        ("POOL_SIZE, previously 20, was set to 5.", ("POOL_SIZE", "5")),
        ("The image was changed to nginx:1.25, formerly nginx:1.24.", ("nginx:1.25", "1.25")),
        # what the replaced value belonged to is no old side: the key stays
        ("Someone replaced the value of CACHE_TTL with 5s.", ("CACHE_TTL", "5s")),
        ("The value of CACHE_TTL was replaced by 5s.", ("CACHE_TTL", "5s")),
        # a value the replacement itself gives stays: what replaced the certificate
        (
            "The certificate was replaced by one whose notAfter is 2026-11-30.",
            ("2026", "11", "30"),
        ),
    ],
)
def test_the_old_side_of_a_replacement_is_not_a_mutated_value(
    description: str, mutated: tuple[str, ...]
) -> None:
    """The value a replacement or a former value names ("replaced X with Y", "X was
    replaced by Y", "(was X)", "previously X") is a normal value of the field before the
    fault: only the value the fault set is one a diagnosis must give."""
    facts = facts_of("[fault_spec] component=deployment/x; namespace=n || " + description)
    assert facts is not None
    assert facts.mutated == mutated


@pytest.mark.parametrize(
    ("description", "mutated"),
    [
        ("The memory limit was originally set to 64Mi by the fault.", ("64Mi",)),
        ("The memory limit was previously set to 64Mi by the chaos run.", ("64Mi",)),
        ("The memory limit was originally set to 64Mi.", ("64Mi",)),
        # a former value beside the change the description states is still none
        ("The memory limit, originally set to 512Mi, was lowered to 64Mi.", ("64Mi",)),
        ("The memory limit was previously 512Mi and was lowered to 64Mi.", ("64Mi",)),
        (
            "The cart container's memory limit was previously set to 512Mi; the fault lowered "
            "it to 64Mi.",
            ("64Mi",),
        ),
        (
            "The cart container's memory limit, which was originally set to 512Mi, was "
            "lowered to 64Mi.",
            ("64Mi",),
        ),
        ("The memory limit was previously set to 512Mi. The fault lowered it to 64Mi.", ("64Mi",)),
    ],
)
def test_a_value_a_clause_says_was_set_is_a_mutated_value(
    description: str, mutated: tuple[str, ...]
) -> None:
    """A value the description says was set ("was originally set to 64Mi by the
    fault", or "was originally set to 64Mi" as the only change it states) is a value the
    fault set, whatever word of time comes with it; a value it gives as the setting's
    before another change ("was previously set to 512Mi; the fault lowered it to 64Mi")
    is not."""
    facts = facts_of("[fault_spec] component=deployment/x; namespace=n || " + description)
    assert facts is not None
    assert facts.mutated == mutated


@pytest.mark.parametrize(
    "description",
    [
        "The cart container's memory limit was previously set to 512Mi; the fault lowered it"
        " to 64Mi.",
        "The cart container's memory limit, which was originally set to 512Mi, was lowered to"
        " 64Mi.",
    ],
)
def test_a_diagnosis_that_gives_only_the_former_setting_does_not_meet_the_values_condition(
    description: str,
) -> None:
    """D2-Q2: the value a setting had before the fault changed it ("was previously set to
    512Mi") is no value the fault set, so a diagnosis that gives only that one fails."""
    facts = facts_of("[fault_spec] component=deployment/cart; namespace=shop || " + description)
    assert facts is not None
    diagnosis = "cart's memory limit is 512Mi, too small for its heap, so the pods are OOMKilled."
    assert check_condition("values", facts, diagnosis) is not None
    assert check_condition("values", facts, "cart's memory limit is 64Mi") is None


@pytest.mark.parametrize(
    ("diagnosis", "named"),
    [
        ("weather reads CITY=Geneva", False),  # the value before the fault
        ("the image is nginx:1.24", False),
        ("weather now reads CITY=Zurich", True),
        ("the image is nginx:1.25", True),
    ],
)
def test_a_diagnosis_that_names_only_the_replaced_value_does_not_meet_the_values_condition(
    diagnosis: str, named: bool
) -> None:
    """D2-Q2 of the labelling guide: the value a fault replaced is no value it set."""
    facts = facts_of(
        "[fault_spec] component=deployment/weather; namespace=n || CITY=Geneva was replaced "
        "by CITY=Zurich in the env of weather, and its image nginx:1.24 was replaced with "
        "nginx:1.25."
    )
    assert facts is not None
    assert (check_condition("values", facts, diagnosis) is None) is named


@pytest.mark.parametrize(
    ("case_id", "diagnosis"),
    [
        # nodeSelector disktype=nvme-gen5 was added
        (
            "nodeselector-correct",
            "Someone added a nodeSelector disktype: nvme-gen5 to deployment/search; no node "
            "carries that label, so the search pod stays Pending.",
        ),
        ("nodeselector-correct", "search's nodeSelector asks for disktype nvme-gen5."),
        ("nodeselector-correct", "search now needs a node labelled nvme-gen5."),
        # the selector was changed from app=ts-route-service to app=ts-route-svc
        (
            "selector-correct",
            "The selector of Service ts-route-service was changed to app: ts-route-svc, "
            "which matches no pod, so it has no endpoints.",
        ),
        ("selector-correct", "The Service now selects ts-route-svc, which no pod carries."),
        # SPRING_DATASOURCE_HIKARI_MAXIMUM_POOL_SIZE was set to 2 (default 10)
        (
            "pool-correct",
            "ts-order-service's Hikari maximum pool size was set to 2, so requests wait for "
            "a database connection and time out.",
        ),
        ("pool-correct", "The Hikari pool size was lowered from 10 to 2."),
        ("pool-correct", "ts-order-service runs with a maximum pool size of 2."),
    ],
)
def test_a_correctly_stated_mutated_value_is_not_vetoed(case_id: str, diagnosis: str) -> None:
    """Labelled (LABELLING.md), D2-Q2: a mutated value stated correctly counts, written
    as kubectl and YAML print a setting (``disktype: nvme-gen5``), with a space, as its
    value alone where that names it, and a one-digit value as set ("set to 2")."""
    facts = facts_of(calibration_case(case_id)["ground_truth"])
    assert facts is not None
    assert check_condition("values", facts, diagnosis) is None


@pytest.mark.parametrize(
    ("case_id", "diagnosis"),
    [
        # a digit that is no setting: replica and pod counts, an exit code, a longer number
        ("pool-correct", "ts-order-service has 2 replicas; one exited with code 2."),
        ("pool-correct", "0/3 nodes are busy and 2 requests are pending."),
        ("pool-correct", "the pool size was set to 20"),
        ("pool-correct", "its timeout was set to 2 s"),
        # a value of a selector that the ground truth writes elsewhere names no setting
        ("netpol-correct", "traffic to geo is dropped on port 8083"),
        ("netpol-correct", "ingress to geo is blocked"),
        # the port the expired certificate is served on was not changed
        ("cert-correct", "frontend-proxy serves an expired certificate on 8443"),
    ],
)
def test_a_value_the_fault_did_not_set_does_not_meet_the_values_condition(
    case_id: str, diagnosis: str
) -> None:
    """D2-Q2 of the labelling guide: "a normal value of a field that was not changed does
    not count", and a digit counts only as the value a change set."""
    facts = facts_of(calibration_case(case_id)["ground_truth"])
    assert facts is not None
    assert check_condition("values", facts, diagnosis) is not None


def test_the_affected_and_healthy_components_are_read_from_their_lists() -> None:
    """The components after ``Affected:`` and ``Healthy:``, each item's name without its
    remarks in parentheses, articles and kind words; an item of words only names none."""
    facts = facts_of(
        "[fault_spec] component=configmap/cfg; namespace=n || The ConfigMap cfg was "
        "deleted. Affected: deployment/nginx-thrift (0/1 ready) and every user request "
        "through it (connection refused), ts-travel-service and ts-basic-service (calls "
        "time out). Healthy: flagd itself (serving flags), the geo pods (Running, Ready), "
        "rate, all nodes."
    )
    assert facts is not None
    assert facts.affected == ("deployment/nginx-thrift", "ts-travel-service", "ts-basic-service")
    assert facts.healthy == ("flagd", "geo", "rate")
    rbac = facts_of(
        "[fault_spec] component=rolebinding/otel; namespace=n || It was deleted. Affected: "
        "deployment/otel (spans lack metadata). No user-facing impact: requests succeed."
    )
    assert rbac is not None
    assert rbac.affected == ("deployment/otel",) and rbac.healthy == ()


#: the hyphens drawn exactly like ``-`` that language models write inside names
#: ("user‑service" with U+2011 is routine for GPT-family models)
HYPHENS = {"U+2011": "\u2011", "U+2010": "\u2010", "U+2212": "\u2212"}


@pytest.mark.parametrize("hyphen", HYPHENS.values(), ids=HYPHENS.keys())
def test_a_component_named_with_a_unicode_hyphen_is_named(hyphen: str) -> None:
    """A component written with a Unicode hyphen ("user‑service") is the component."""
    facts = facts_of(TRUTH)
    assert facts is not None
    diagnosis = RIGHT.replace("-", hyphen)
    assert check_condition("component", facts, diagnosis) is None
    assert check_condition("origin_consistent", facts, diagnosis) is None


@pytest.mark.parametrize("hyphen", HYPHENS.values(), ids=HYPHENS.keys())
def test_a_mutated_value_written_with_a_unicode_hyphen_is_named(hyphen: str) -> None:
    """``app=cart‑v2`` written with a Unicode hyphen is the value ``app=cart-v2``."""
    truth = (
        "[fault_spec] component=service/cart; namespace=shop || The selector was changed "
        "to app=cart-v2, so the Service has no endpoints."
    )
    facts = facts_of(truth)
    assert facts is not None and "app=cart-v2" in facts.mutated
    diagnosis = f"The cart Service selects app=cart{hyphen}v2."
    assert check_condition("values", facts, diagnosis) is None


@pytest.mark.parametrize("hyphen", HYPHENS.values(), ids=HYPHENS.keys())
async def test_a_right_diagnosis_with_unicode_hyphens_is_not_vetoed(
    rubric: Rubric, hyphen: str
) -> None:
    """A correct diagnosis whose hyphens are Unicode hyphens passes as it does with
    ``-``: no yes vetoed, no review for an overruled judge."""
    result = await _grade(rubric, TRUTH, RIGHT.replace("-", hyphen))
    assert result.status == "graded"
    assert [a.question_id for a in result.answers if a.judge_answer and not a.answer] == []
    assert result.outcome.passed
    assert "judge_overruled" not in result.review_reasons


#: the examples docs/judges.md gives of ``grounding: values``: (description, or a whole
#: ground truth, a diagnosis, whether the diagnosis names a value the fault set)
DOCUMENTED_VALUES = [
    # what followed the change is no value it set
    (
        "A NetworkPolicy selecting app=geo was added; all traffic to geo on port 8083 is dropped.",
        "traffic to geo on port 8083 is dropped",
        False,
    ),
    (
        "POOL_SIZE was set to 2; under load requests time out after 30000ms.",
        "requests time out after 30000ms",
        False,
    ),
    # the old side of a change
    ("The memory limit was lowered from 512Mi to 256Mi.", "its memory limit is 512Mi", False),
    ("The memory limit was lowered from 512Mi to 256Mi.", "its memory limit is 256Mi", True),
    ("nginx:1.24 was replaced by nginx:1.25.", "the image is nginx:1.24", False),
    ("nginx:1.24 was replaced by nginx:1.25.", "the image is nginx:1.25", True),
    ("The fault replaced nginx:1.24 with nginx:1.25.", "the image is nginx:1.24", False),
    ("nginx:1.25 replaced nginx:1.24.", "the image is nginx:1.24", False),
    # a former value
    ("The memory limit was changed to 256Mi (was 512Mi).", "its memory limit is 512Mi", False),
    ("POOL_SIZE, previously 20, was set to 5.", "the pool holds 20 connections", False),
    ("The image was changed to nginx:1.25, formerly nginx:1.24.", "the image is nginx:1.24", False),
    (
        "The memory limit was previously set to 512Mi; the fault lowered it to 64Mi.",
        "its memory limit is 512Mi",
        False,
    ),
    (
        "The memory limit, which was originally set to 512Mi, was lowered to 64Mi.",
        "its memory limit is 512Mi",
        False,
    ),
    ("The memory limit was originally set to 64Mi by the fault.", "its limit is 64Mi", True),
    ("The memory limit was originally set to 64Mi.", "its limit is 64Mi", True),
    # a default or usual value
    ("The env var POOL_SIZE was set to 2 (default 10).", "the pool holds 10 connections", False),
    (
        "The Hikari pool size was set to 2; requests take 3 s instead of about 40 ms.",
        "requests used to take about 40 ms",
        False,
    ),
    # what follows Affected: or Healthy:, a status or exit code, a symptom's request path
    (
        "The targetPort was changed to 8082. Affected: frontend (requests return 500). "
        "Healthy: profile (listening on 8081).",
        "profile listens on 8081",
        False,
    ),
    (
        "The memory limit was lowered to 256Mi; the JVM is OOMKilled (exit code 137).",
        "the pod exits with code 137",
        False,
    ),
    ("The Hikari pool size was set to 2; /hotels returns 500.", "/hotels returns 500", False),
    # the name of a component that is configuration itself
    (
        "[fault_spec] component=secret/mongodb-profile-auth; namespace=n || It was deleted.",
        "the Secret mongodb-profile-auth is gone",
        True,
    ),
    (
        "[fault_spec] component=networkpolicy/deny-geo-ingress; namespace=n || It was added.",
        "the policy deny-geo-ingress drops all ingress",
        True,
    ),
    # an equal quantity written otherwise, not a close one
    ("The memory limit was lowered to 256Mi.", "its memory limit is 0.25Gi", True),
    ("The memory limit was set to 1Gi.", "its memory limit is 1G", False),
    ("The memory limit was set to 1Gi.", "its memory limit is 950Mi", False),
    # a key=value setting as kubectl and YAML print it, with a space, or its value alone
    ("A nodeSelector disktype=nvme-gen5 was added.", "it asks for disktype: nvme-gen5", True),
    ("A nodeSelector disktype=nvme-gen5 was added.", "it asks for disktype nvme-gen5", True),
    ("A nodeSelector disktype=nvme-gen5 was added.", "no node is labelled nvme-gen5", True),
    ("A NetworkPolicy selecting app=geo was added.", "ingress to geo is blocked", False),
    # a one-digit value only as set
    ("The Hikari pool size was set to 2.", "the pool size was set to 2", True),
    ("The Hikari pool size was set to 2.", "it runs with POOL_SIZE=2", True),
    ("The Hikari pool size was set to 2.", "it runs with a pool size of 2", True),
    ("The Hikari pool size was set to 2.", "2 requests are pending", False),
    ("The deployment was scaled to 0.", "it was scaled to 0", True),
]


@pytest.mark.parametrize(("description", "diagnosis", "named"), DOCUMENTED_VALUES)
def test_the_documented_examples_of_the_values_condition_hold(
    description: str, diagnosis: str, named: bool
) -> None:
    """Each example the documentation gives of ``grounding: values`` holds: a value the
    fault set counts, in the forms it lists; a value it did not set does not."""
    truth = description
    if not truth.startswith("[fault_spec]"):
        truth = "[fault_spec] component=deployment/x; namespace=n || " + description
    facts = facts_of(truth)
    assert facts is not None
    assert (check_condition("values", facts, diagnosis) is None) is named
