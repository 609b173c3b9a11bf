"""Numbers and units (issue 18, item 6): equal quantities compare equal however they are
written, and a diagnosis value that contradicts the ground truth's value of the same
thing turns a "yes" on "avoids contradicting claims" into a no (or a flag), showing both.

The seed study's agent read a CPU request of 2.00 cores as 200m. False contradictions
would fail right diagnoses, so most cases below are texts that must NOT contradict.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calibration import DEFAULT_GOLD
from judge.contradictions import contradictions
from judge.grader import Grader
from judge.grounding import check_condition, facts_of
from judge.quantities import parse_quantity, quantities_in
from judge.rubric import Rubric
from tests.support.rubrics import rubric_checking_values


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("CPU request of 2.00 cores", "cpu", "2"),
        ("the cpu request is 2000m", "cpu", "2"),
        ("cpu limit: 200m", "cpu", "0.2"),
        ("cpu: 2", "cpu", "2"),
        ("memory limit 512Mi", "memory", "536870912"),
        ("memory limit of 0.5Gi", "memory", "536870912"),
        ("512MiB of memory", "memory", "536870912"),
        ("readiness probe timeout 30s", "duration", "30"),
        ("a timeout of 30000ms", "duration", "30"),
        ("timeoutSeconds: 30", "duration", "30"),
        ("an initial delay of 2 minutes", "duration", "120"),
        ("error rate 50%", "percent", "50"),
        ("the deployment was scaled to zero", "replicas", "0"),
        ("replicas: 3", "replicas", "3"),
        ("targetPort 9999", "port", "9999"),
        # Go's compound durations are read whole (not as their last part)
        ("the probe timeout is 1m30s", "duration", "90"),
        ("a timeout of 1h30m", "duration", "5400"),
        # thousands separated, and a leading point (Kubernetes' grammar takes .5)
        ("memory limit is 1,024Mi", "memory", "1073741824"),
        ("cpu limit .5 cores", "cpu", "0.5"),
        # Kubernetes' documentation reads m as millicpu ("100m ... one hundred millicpu")
        ("a CPU limit of 200 millicpu", "cpu", "0.2"),
        ("100 milliCPU", "cpu", "0.1"),
    ],
)
def test_quantities_are_normalized(text: str, kind: str, value: str) -> None:
    (found,) = quantities_in(text)
    assert found.kind == kind and found.value == Decimal(value)


@pytest.mark.parametrize(
    "text",
    [
        "0/3 replicas ready",
        "1 of 3 replicas available",
        "image tag 1.5.2",
        "5M requests per second",
        "it took 500m",  # 500m of what?
        "upgrade to v2",
        "HTTP 503 errors",
        "memory limit 1,5Gi",  # a decimal comma: not read as 5Gi
    ],
)
def test_numbers_no_word_explains_are_not_read(text: str) -> None:
    assert quantities_in(text) == []


#: (text, the Decimal Kubernetes' Python client's parse_quantity gave it, as ``str``:
#: digit for digit, so ``2000m`` is ``2.000``), recorded from kubernetes 37.0.2
KUBERNETES_VALUES = [
    # numbers: signed, with or without a decimal point, with a decimal exponent
    ("2", "2"), ("2.00", "2.00"), ("0", "0"), ("-0", "-0"), ("007", "7"), ("1.5", "1.5"),
    ("-1", "-1"), ("+1", "1"), (".5", "0.5"), ("5.", "5"), ("1e3", "1E+3"),
    ("1E-3", "0.001"), ("12E6", "1.2E+7"), ("1e9999999", "1E+9999999"),
    ("12345678901234567890123456789", "12345678901234567890123456789"),
    # decimal suffixes
    ("100n", "1.00E-7"), ("0.000000001n", "1E-18"), ("100u", "0.000100"),
    ("2000m", "2.000"), ("200m", "0.200"), ("1.5m", "0.0015"), ("1k", "1000"),
    ("1K", "1000"), ("1M", "1000000"), ("512M", "512000000"), ("1G", "1000000000"),
    ("1T", "1000000000000"), ("1P", "1000000000000000"), ("1E", "1000000000000000000"),
    # binary suffixes
    ("1Ki", "1024"), ("1Mi", "1048576"), ("512Mi", "536870912"), ("1Gi", "1073741824"),
    ("0.5Gi", "536870912.0"), ("0.1Gi", "107374182.4"), ("-2Gi", "-2147483648"),
    ("1Ti", "1099511627776"), ("1Pi", "1125899906842624"), ("1Ei", "1152921504606846976"),
    # an exponent and a suffix; digits that are not ASCII (what \d lets through)
    ("+.5e-3Ki", "0.5120"), ("1e3k", "1.000E+6"), ("1E3Mi", "1.048576E+9"),
    ("1e-3m", "0.000001"), ("\u0661\u0662m", "0.012"), ("\u0660.\u0665Gi", "536870912.0"),
    # rounded to the decimal context's 28 digits, as that client rounds
    ("1234567890123456789012345678.9Ki", "1.264197519486419751948641975E+30"),
]  # fmt: skip
#: what that client refuses too: not a number, a suffix Kubernetes does not have, an
#: exponent out of range
KUBERNETES_REFUSES = [
    "", "abc", "1.2.3", "1..5", "--1", "+", "-", ".", "e3", "1e", "1e+", "1e3.5", "0x10",
    "1,5", "\u00bd", "nan", "2 cores", "m", "Mi", "Ki1", "1i", "1ei", "1mi", "1ki", "1ni",
    "1ui", "1Mii", "1KiB", "1MB", "1e999999E", "1e99999999999999999999",
    "1e-99999999999999999999",
]  # fmt: skip
#: what that client takes only because ``Decimal()`` does (spaces, ``_`` between digits,
#: NaN, Infinity) and Kubernetes refuses, with that client's value: refused here
DECIMAL_ONLY = [
    (" 1", "1"), ("1 ", "1"), ("1 Mi", "1048576"), (" 512Mi", "536870912"), ("1\n", "1"),
    ("1_000", "1000"), ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"),
    ("inf", "Infinity"), ("NaNk", "NaN"), ("sNaN", "sNaN"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), KUBERNETES_VALUES)
def test_a_quantity_has_the_value_kubernetes_gives_it(text: str, value: str) -> None:
    assert str(parse_quantity(text)) == value


@pytest.mark.parametrize("text", KUBERNETES_REFUSES + [text for text, _ in DECIMAL_ONLY])
def test_what_kubernetes_refuses_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Kubernetes quantity"):
        parse_quantity(text)


CPU = "The CPU request of deployment/geo was set to 2.00 cores, so no node can schedule it."
MEMORY = "The memory limit of cart was lowered to 64Mi; the pods are OOMKilled."
PROBE = "The readiness probe of frontend has timeoutSeconds: 1, too short for its 3s start."
SCALE = "deployment/payment was scaled to 0 replicas."
PORT = "The Service's targetPort was changed from 8080 to 9999."
LOSS = "50% packet loss was injected on the ratings pods."
THROTTLE = "The CPU limit of deployment/geo was set to 10m, causing throttling."
PERIOD = "The liveness probe has initialDelaySeconds: 0 and periodSeconds: 1."
OOM = "A memory limit of 50Mi on mongodb leads to OOMKilled."


@pytest.mark.parametrize(
    ("truth", "diagnosis", "shown"),
    [
        (
            CPU,
            "The cpu request is 200m, far too low.",
            ('"200m" (= 0.2 cores)', '"2.00 cores" (= 2 cores)'),
        ),
        (MEMORY, "The memory limit is 256Mi and the pods get OOMKilled.", ('"256Mi"', '"64Mi"')),
        (PROBE, "The readiness probe timeout of 5s is too long.", ('"5s" (= 5 s)', "(= 1 s)")),
        (SCALE, "Its replicas were set to 3 but none start.", ("(= 3)", "(= 0)")),
        (PORT, "The targetPort is 8081 instead of the container's port.", ("8081",)),
        (LOSS, "There is a packet loss of 20% on ratings.", ('"20%" (= 20 %)', '"50%"')),
        # "throttling" holds "ttl": words, not letters, say a 10m is a duration
        (THROTTLE, "geo is CPU throttled; its CPU limit is 100m.", ('"100m"', '"10m"')),
        (PERIOD, "The liveness probe period is 10 seconds.", ("(= 10 s)", "(= 1 s)")),
    ],
)
def test_a_contradicting_value_is_found_with_both_values(
    truth: str, diagnosis: str, shown: tuple[str, ...]
) -> None:
    (found,) = contradictions(truth, diagnosis)
    text = found.describe()
    assert all(part in text for part in shown), text


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (CPU, "The CPU request is 2000m, more than any node offers."),  # equal, written otherwise
        (CPU, "The CPU request was changed from 2 cores to 200m."),  # the true value is named
        (CPU, "The CPU limit is 500m."),  # a limit is not a request
        (CPU, "Lower the CPU request: it should be 500m."),  # advice, not a report
        (CPU, "The node has 4 cores and 80% CPU use."),  # other things
        (MEMORY, "The memory limit of 0.0625Gi is too small."),
        (MEMORY, "The memory limit of 64MB is too small."),  # MB for Mi: within 10 %
        (MEMORY, "The memory request is 256Mi."),  # a request is not a limit
        (MEMORY, "The memory limit must be raised to 512Mi."),
        (MEMORY, "The node has 16Gi of memory; cart's limit is 64Mi."),
        (PROBE, "The probe timeout of 1000ms is too short."),
        (PROBE, "Requests take 3s, latency is high."),  # a latency is not a timeout
        (SCALE, "The deployment has 0/3 replicas ready."),
        (SCALE, "payment was scaled to zero."),
        (SCALE, "It runs 1 of 3 replicas."),
        (PORT, "The targetPort is 9999 while the app listens on 8080."),
        (PORT, "Clients call port 80 and get connection refused."),  # an unqualified port
        (LOSS, "The error rate is 30%."),  # an error rate is not a packet loss
        (LOSS, "All traffic (100%) reaches ratings."),
        (THROTTLE, "CPU limit of 10 millicores throttles geo."),
        (THROTTLE, "CPU limits are very low (10m), while requests are 100m."),
        (PERIOD, "The probe fails after 1 second and the pod restarts every 30s."),
        (OOM, "mongodb memory usage at 48Mi, close to the 50Mi limit."),
        (OOM, "mongodb was OOMKilled: memory usage hit 48Mi."),
        (SCALE, "Scaled to 0; the HPA wants 3 replicas."),
        ("CPU limit 100m; CPU throttled 95% of the time.", "CPU usage is at 100% of its limit."),
        (LOSS, "Ratings lost 50% of its packets; 50 % loss."),
        ("Env var USER_PORT is set to 9999.", "USER_PORT is 9999, timeout 30s."),  # no quantity
        ("", "The cpu request is 200m."),
        ("readiness probe timeout set to 90s", "The readiness probe timeout is 1m30s, too short."),
        ("memory limit 1Gi", "The memory limit is 1,024Mi."),
        ("cpu limit 500m", "The cpu limit is .5 cores."),
        (THROTTLE, "The CPU limit of geo is 10 millicpu, so geo is throttled."),
    ],
)
def test_no_false_contradictions(truth: str, diagnosis: str) -> None:
    assert contradictions(truth, diagnosis) == []


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    """The default rubric with the value check on D2-Q3 (the default leaves it off)."""
    return rubric_checking_values("D2-Q3")


async def _grade(rubric: Rubric, truth: str, diagnosis: str) -> Any:
    grader = Grader(ScriptedBackend([scripted_reply]))  # yes to all, quoting the diagnosis
    return await grader.grade(rubric, truth, diagnosis)


HEADER = "[fault_spec] component=deployment/geo; namespace=hotel || "


async def test_a_contradicting_value_vetoes_avoids_contradicting_claims(rubric: Rubric) -> None:
    diagnosis = "The geo deployment in hotel is unschedulable: its cpu request is 200m."
    result = await _grade(rubric, HEADER + CPU, diagnosis)
    d2q3 = next(a for a in result.answers if a.question_id == "D2-Q3")
    assert d2q3.judge_answer is True and d2q3.answer is False
    assert d2q3.grounding == (
        'vetoed: contradicts the ground truth: cpu request: the diagnosis gives "200m" '
        '(= 0.2 cores), the ground truth "2.00 cores" (= 2 cores)'
    )
    assert "grounding vetoed D2-Q3" in result.detail


async def test_the_rubric_may_flag_instead(rubric: Rubric) -> None:
    flagging = rubric.model_copy(update={"grounding_failure": "flag"})
    diagnosis = "The geo deployment in hotel is unschedulable: its cpu request is 200m."
    result = await _grade(flagging, HEADER + CPU, diagnosis)
    d2q3 = next(a for a in result.answers if a.question_id == "D2-Q3")
    assert d2q3.answer is True and d2q3.grounding.startswith("flagged: contradicts")
    assert "grounding_failed" in result.review_reasons


async def test_the_true_value_written_otherwise_passes(rubric: Rubric) -> None:
    diagnosis = "The geo deployment in hotel is unschedulable: its cpu request is 2000m."
    result = await _grade(rubric, HEADER + CPU, diagnosis)
    grounding = {a.question_id: a.grounding for a in result.answers}
    assert grounding["D2-Q3"] == "passed: consistent_values"
    assert grounding["D2-Q2"] == "passed: values"  # 2000m names the 2.00 cores of the truth


# Labelled case, D2-Q2: the ground truth's mutated value is a CPU limit of 200m; the
# diagnosis gives 200 millicpu, the same value after reading units (LABELLING.md: "A
# value counts only if it matches the ground truth after reading units"), so D2-Q2 is yes.
async def test_a_cpu_value_in_millicpu_is_the_ground_truths_millicores(rubric: Rubric) -> None:
    """200 millicpu names the ground truth's 200m and contradicts nothing."""
    truth = HEADER + "The CPU limit of the geo container was set to 200m."
    diagnosis = (
        "The CPU limit of the geo deployment is 200 millicpu, so geo is throttled and "
        "search requests time out."
    )
    result = await _grade(rubric, truth, diagnosis)
    answers = {a.question_id: a for a in result.answers}
    assert answers["D2-Q2"].judge_answer is True
    assert answers["D2-Q2"].answer is True, answers["D2-Q2"].grounding
    assert answers["D2-Q2"].grounding == "passed: values"
    assert answers["D2-Q3"].grounding == "passed: consistent_values"


def test_an_equal_quantity_counts_as_naming_a_value() -> None:
    facts = facts_of(HEADER + "The memory limit was set to 512Mi.")
    assert facts is not None
    assert check_condition("values", facts, "cart's memory limit is 0.5Gi") is None
    assert check_condition("values", facts, "cart's memory limit is 1Gi") is not None


@pytest.mark.parametrize("given", ["950Mi", "1100Mi", "1G", "1.07Gi"])
def test_a_close_memory_value_does_not_name_the_ground_truths(given: str) -> None:
    """The labelling guide: a value counts only if it matches after reading units, and
    1G is not 1Gi. Close is another value (the contradiction check stays lenient)."""
    facts = facts_of(HEADER + "The memory limit was lowered to 1Gi.")
    assert facts is not None
    assert check_condition("values", facts, f"cart's memory limit is {given}") is not None
    assert check_condition("values", facts, "cart's memory limit is 1024Mi") is None


def test_a_bare_cpu_value_ending_a_sentence_is_read() -> None:
    """A bare CPU value that ends its sentence ("its CPU request was set to 2.") is read,
    as it is before a comma, so a diagnosis that states the ground truth's value so
    names it."""
    assert [str(q.value) for q in quantities_in("The CPU request of geo is 2.")] == ["2"]
    assert [str(q.value) for q in quantities_in("cpu: 2.5.1")] == []  # a version, not 2.5
    facts = facts_of(HEADER + CPU)
    assert facts is not None
    diagnosis = "geo cannot be scheduled: its CPU request was set to 2."
    assert check_condition("values", facts, diagnosis) is None


def test_a_ground_truth_cpu_value_ending_its_sentence_is_compared() -> None:
    """A ground truth's bare CPU value at the end of its sentence ("lowered to 0.2.") is
    read, so the diagnosis' equal ``200m`` names it."""
    facts = facts_of(HEADER + "The cpu limit of geo was lowered to 0.2.")
    assert facts is not None
    assert check_condition("values", facts, "geo is throttled; its cpu limit is 200m") is None


def test_a_bare_cpu_value_keeps_its_limit_or_request_subject() -> None:
    """A bare CPU value is about the limit or request its own words name ("its cpu limit
    is 4"), so a wrong bare limit contradicts the ground truth's limit as "4 cores"
    does."""
    (found,) = quantities_in("its cpu limit is 4")
    assert found.subject == ("limit",)
    truth = "The CPU limit of geo was lowered to 200m; geo is throttled."
    assert contradictions(truth, "geo is throttled; its cpu limit is 4 cores")
    assert contradictions(truth, "geo is throttled; its cpu limit is 4")


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("the memory limit is 1e3Mi", "memory", 1000 * 1024**2),
        ("the cpu limit is 2e-1 cores", "cpu", Decimal("0.2")),
        ("a memory limit of 1E3Mi", "memory", 1000 * 1024**2),
    ],
)
def test_a_value_with_an_exponent_is_read_whole(text: str, kind: str, value: Decimal) -> None:
    """A value with a decimal exponent (``1e3Mi``, a form Kubernetes takes) is read
    whole, never as the digits after its ``e`` (``3Mi``), so a correct value written so
    contradicts nothing."""
    (found,) = quantities_in(text)
    assert (found.kind, found.value) == (kind, value)
    truth = "The memory limit of cart was lowered to 1000Mi."
    assert contradictions(truth, "cart's memory limit is 1e3Mi, so it is OOMKilled") == []
    assert quantities_in("the probe timeout is 1e3ms") == []  # Go's durations take no exponent


def _calibration_truth(case_id: str) -> str:
    """The ground truth of a case of the calibration set that ships with the package."""
    cases = map(json.loads, DEFAULT_GOLD.read_text(encoding="utf-8").splitlines())
    return str(next(c["ground_truth"] for c in cases if c["id"] == case_id))


def test_a_value_takes_its_subject_from_its_own_clause() -> None:
    """The words that say what a value is are read in its clause: in the calibration
    set's cpu-throttling ground truth ("about 90% of CFS periods are throttled and
    compose requests take 3 to 5 s instead of about 40 ms") the latencies are no
    periods, so a correct diagnosis that mentions the standard 100ms CFS period
    contradicts nothing."""
    facts = facts_of(_calibration_truth("cpu-borderline"))
    assert facts is not None
    subjects = {q.text: q.subject for q in quantities_in(facts.description)}
    assert subjects["5 s"] == subjects["40 ms"] == ()
    diagnosis = (
        "The CPU limit of compose-post-service was lowered from 2 cores to 200m, so it is "
        "throttled in about 90% of its 100ms CFS periods; nginx-thrift returns 504 for "
        "compose."
    )
    assert check_condition("consistent_values", facts, diagnosis) is None


def test_a_subject_word_after_a_value_is_not_taken_from_the_next_clause() -> None:
    """A word after a value says what it is only in the value's clause: in "the JVM
    needs about 300Mi of heap but the memory limit was lowered", 300Mi is heap, not the
    limit, so this correct diagnosis (no limit value given) contradicts nothing."""
    facts = facts_of(_calibration_truth("oom-borderline"))
    assert facts is not None
    diagnosis = (
        "ad is OOMKilled (exit 137): the JVM needs about 300Mi of heap but the memory "
        "limit was lowered. The frontend shows no ads."
    )
    assert check_condition("consistent_values", facts, diagnosis) is None


@pytest.mark.parametrize(
    ("text", "subjects"),
    [
        # the two sides of a change share their words
        (
            "The memory limit of ad was lowered from 512Mi to 256Mi.",
            [("memory", "limit"), ("memory", "limit")],
        ),
        ("CPU limit lowered from 2 cores to 200m", [("limit",), ("limit",)]),
        # a value in parentheses right after its words
        ("its memory limit (256Mi) is too low", [("memory", "limit")]),
        # the words before another value are that value's
        ("memory limit 512Mi with 300Mi of heap", [("memory", "limit"), ("memory",)]),
        ("CPU limits are very low (10m), while requests are 100m.", [("limit",), ("request",)]),
        # a value the setting is compared with is not the setting's
        ("its memory limit is below the 300Mi the JVM needs", [()]),
        ("its CPU request exceeds the 4 cores a node has", [()]),
        # ... also where determiners or a possessive stand before that value
        ("its memory limit is far below the JVM's 300Mi heap", [("memory",)]),
        ("its CPU request exceeds each node's 4 cores", [()]),
    ],
)
def test_subjects_stay_with_their_values(text: str, subjects: list[tuple[str, ...]]) -> None:
    assert [q.subject for q in quantities_in(text)] == subjects


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (
            PORT,
            "The user Service's targetPort was misconfigured, leading to 500 errors for callers.",
        ),
        (PORT, "The user Service's targetPort was changed, so traffic to 8443 is refused."),
        (PORT, "The user Service's targetPort was misconfigured leading to 500 errors."),
        (SCALE, "The payment deployment was scaled down, leading to 503 errors in checkout."),
        (SCALE, "payment was scaled down: its replicas, usually spread to 2 nodes, are gone."),
        (SCALE, "The payment deployment was scaled down leading to 503 errors."),
        (SCALE, "The payment deployment was scaled down leading to 503 failing requests."),
        (
            SCALE,
            "The payment deployment was scaled down leading to 503 failing checkout requests.",
        ),
    ],
)
def test_a_to_n_of_another_clause_or_count_is_no_port_or_replica_count(
    truth: str, diagnosis: str
) -> None:
    """A port or replica count given as "to N" is read only in the clause of its word and
    only when N counts nothing else: "targetPort was misconfigured, leading to 500 errors"
    gives no targetPort, "spread to 2 nodes" no replica count, nor "leading to 503 failing
    checkout requests", whose participle qualifies the requests counted."""
    assert contradictions(truth, diagnosis) == []


def test_a_port_or_replica_count_given_as_to_n_is_still_read() -> None:
    """A port or replica count written "to N" in its word's clause, with nothing else
    counted after it, is read, so a wrong one still contradicts."""
    assert contradictions(SCALE, "payment's replicas were then scaled to 3 by the HPA.")
    assert contradictions(SCALE, "payment's replicas were then scaled to 3 pods.")
    assert contradictions(PORT, "The targetPort was quietly changed to 8081 on Monday.")


@pytest.mark.parametrize(
    "diagnosis",
    [
        "payment was scaled to 2 causing an outage of checkout.",
        "The payment replicas were set to 2 making checkout fail.",
    ],
)
def test_a_replica_count_followed_by_what_it_caused_is_read(diagnosis: str) -> None:
    """A replica count written "to N" and followed by what it caused ("scaled to 2
    causing an outage") is read, so a wrong one contradicts."""
    assert contradictions(SCALE, diagnosis)


CHECKOUT_SCALE = (
    "[fault_spec] component=deployment/checkout; namespace=shop || The checkout Deployment "
    "was scaled to 0 replicas."
)


@pytest.mark.parametrize(
    "diagnosis",
    [
        "checkout's replicas were scaled to 2 yesterday.",
        "checkout's replicas were scaled down to 2 today.",
        "checkout's replica count was set to 2 overnight.",
        "checkout's replicas are 2 today.",
        "checkout was scaled to 2 last night.",
        "checkout was scaled to 2 silently.",
    ],
)
def test_a_replica_count_followed_by_a_word_of_time_is_read(diagnosis: str) -> None:
    """A word of time or an adverb after a replica count ("scaled to 2 yesterday", "set
    to 2 overnight", "are 2 today") counts nothing, so the count is read and a wrong one
    contradicts the ground truth."""
    facts = facts_of(CHECKOUT_SCALE)
    assert facts is not None
    assert check_condition("consistent_values", facts, diagnosis) is not None


def test_a_port_followed_by_a_word_of_time_is_read() -> None:
    """A port written "to N" a few words after its word, and followed by a word of time,
    is read, so a wrong one contradicts."""
    assert contradictions(PORT, "The targetPort was quietly changed to 8081 yesterday.")


def test_a_ground_truth_replica_count_followed_by_what_it_caused_is_read() -> None:
    """The ground truth's "scaled to 0 causing checkout to fail" gives its replica count,
    so a diagnosis that gives another one contradicts it."""
    truth = "deployment/payment was scaled to 0 causing checkout to fail."
    assert contradictions(truth, "payment runs 3 replicas.")


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (
            _calibration_truth("oom-correct"),
            "ad is OOMKilled (exit 137): its memory limit is below the 300Mi the JVM needs, "
            "so the pod is in CrashLoopBackOff; frontend shows no ads.",
        ),
        (
            _calibration_truth("cpu-correct"),
            "compose-post-service's CPU limit was lowered well below the 1.5 cores it uses "
            "at peak, so it is throttled and nginx-thrift returns 504 for compose.",
        ),
        (HEADER + CPU, "geo is Pending: its CPU request exceeds the 4 cores each node has."),
        (HEADER + CPU, "geo is Pending: its CPU request is more than the 4 cores a node has."),
        # determiners or a possessive between the comparison and the value
        (
            _calibration_truth("oom-correct"),
            "ad's memory limit is far below the JVM's 300Mi heap, so the pod is OOMKilled.",
        ),
        (
            _calibration_truth("oom-correct"),
            "ad's memory limit is smaller than the JVM's 300Mi heap; the pod is OOMKilled.",
        ),
        (HEADER + CPU, "geo's CPU request exceeds each node's 4 cores, so its pods stay Pending."),
    ],
)
def test_a_value_the_setting_is_compared_with_is_not_the_settings_value(
    truth: str, diagnosis: str
) -> None:
    """A value the diagnosis compares the setting with (what the process needs or uses,
    what a node has: "below the JVM's 300Mi heap", "exceeds each node's 4 cores") is not
    the setting's value, so it contradicts nothing."""
    facts = facts_of(truth)
    assert facts is not None
    assert check_condition("consistent_values", facts, diagnosis) is None


def test_a_comparison_word_before_no_value_keeps_the_subject() -> None:
    """A word that compares only where a value follows it ("over", "under"...) does not
    end the clause otherwise: in "lowered over the weekend to 256Mi" the 256Mi is still
    the memory limit, so a wrong one contradicts."""
    diagnosis = "cart's memory limit was lowered over the weekend to 256Mi; pods are OOMKilled."
    assert contradictions(MEMORY, diagnosis)


#: ground truths whose lists of affected and healthy components name the other
#: components a diagnosis may speak of
CART_BESIDE_REDIS = (
    "[fault_spec] component=deployment/cart; namespace=astronomy-shop || "
    + MEMORY
    + " Healthy: redis."
)
PAYMENT_BESIDE_FRONTEND = (
    "[fault_spec] component=deployment/payment; namespace=astronomy-shop || "
    + SCALE
    + " Affected: checkout, frontend (orders fail)."
)
FRONTEND_BEHIND_NGINX = (
    "[fault_spec] component=deployment/frontend; namespace=astronomy-shop || "
    + PROBE
    + " Affected: nginx (504 on every page)."
)


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (
            CART_BESIDE_REDIS,
            "cart's memory limit was lowered so far that it is OOMKilled; redis, whose memory "
            "limit is 1Gi, is fine.",
        ),
        (
            PAYMENT_BESIDE_FRONTEND,
            "payment has no running pods since its deployment was scaled down; frontend "
            "(2 replicas) returns 500 on checkout.",
        ),
        (
            FRONTEND_BEHIND_NGINX,
            "frontend's readiness probe times out before the app is up. nginx then hits its "
            "proxy timeout of 60s.",
        ),
    ],
)
def test_a_value_of_another_listed_component_contradicts_nothing(
    truth: str, diagnosis: str
) -> None:
    """A sentence that names a component the ground truth lists as affected or healthy,
    and not the ground truth's own, speaks of that component's settings: its values are
    not compared with the faulty component's."""
    facts = facts_of(truth)
    assert facts is not None
    assert check_condition("consistent_values", facts, diagnosis) is None


@pytest.mark.parametrize(
    "diagnosis",
    [
        "cart is OOMKilled: cart's memory limit is 1Gi.",
        "cart is OOMKilled while redis is fine: cart's memory limit is 1Gi.",
        "The pods are OOMKilled: the memory limit is 1Gi.",
    ],
)
def test_a_value_of_the_faulty_component_is_still_compared(diagnosis: str) -> None:
    """A sentence that names the ground truth's component, or no component, is compared
    as before, even where it names another one too."""
    facts = facts_of(CART_BESIDE_REDIS)
    assert facts is not None
    assert check_condition("consistent_values", facts, diagnosis) is not None


def test_a_value_followed_by_the_component_it_affects_is_compared() -> None:
    """A component the ground truth lists as affected, named after the value ("its
    deployment was scaled to 2 replicas, so checkout fails"), is what the value led to:
    the value is still the faulty component's and is compared."""
    facts = facts_of(PAYMENT_BESIDE_FRONTEND)
    assert facts is not None
    diagnosis = "payment is down. Its deployment was scaled to 2 replicas, so checkout fails."
    assert check_condition("consistent_values", facts, diagnosis) is not None


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (
            MEMORY,
            "cart's memory limit was 512Mi before someone lowered it; the pods are OOMKilled.",
        ),
        (MEMORY, "cart's memory limit is no longer 512Mi: it was cut, and the pods are OOMKilled."),
        (MEMORY, "cart's memory limit is not 512Mi, as its chart says; the pods are OOMKilled."),
        (SCALE, "payment was scaled down from 3 replicas, so no pod serves checkout."),
        (CPU, "The CPU request of geo was previously 500m; no node can schedule it now."),
        (SCALE, "The payment deployment had 3 replicas before someone scaled it down."),
        (MEMORY, "cart's memory limit was set to 1Gi until someone lowered it last night."),
        (MEMORY, "cart's memory limit was raised to 1Gi before someone lowered it again."),
        (MEMORY, "cart's memory limit was 1Gi before the incident; the pods are OOMKilled."),
        (MEMORY, "cart's memory limit was set to 1Gi until Monday; the pods are OOMKilled."),
    ],
)
def test_a_former_or_denied_value_contradicts_nothing(truth: str, diagnosis: str) -> None:
    """A value the diagnosis gives as one the setting had before ("from 3 replicas",
    "512Mi before someone lowered it", "had 3 replicas before someone scaled it down",
    "set to 1Gi until someone lowered it", "was 1Gi before the incident", "was set to 1Gi
    until Monday") or does not have ("no longer 512Mi") is not the value it reports; so
    is a value a change set that another change followed ("raised to 1Gi before someone
    lowered it")."""
    assert contradictions(truth, diagnosis) == []


CART_AT_256MI = (
    "[fault_spec] component=deployment/cart; namespace=shop || The cart service's memory "
    "limit is 256Mi."
)


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (
            CART_AT_256MI,
            "cart had a memory limit of 1Gi before the deploy, which lowered it to 256Mi.",
        ),
        (
            CART_AT_256MI,
            "The memory limit was configured as 1Gi until yesterday, when it was lowered to 256Mi.",
        ),
        (
            CART_AT_256MI,
            "The memory limit stood at 1Gi until yesterday, when it was lowered to 256Mi.",
        ),
        (CART_AT_256MI, "cart's memory limit was still 1Gi before the rollout."),
        (CART_AT_256MI, "The memory limit of 1Gi before the deploy became 256Mi."),
        (CHECKOUT_SCALE, "checkout was running 3 replicas before the incident."),
        (CHECKOUT_SCALE, "checkout ran 3 replicas until yesterday."),
    ],
)
def test_a_value_followed_by_before_or_until_is_a_former_one(truth: str, diagnosis: str) -> None:
    """A value followed by "before", "earlier" or "until" is one the setting had, however
    the words before it state it ("had a memory limit of 1Gi before the deploy", "stood
    at 1Gi until yesterday", "configured as 1Gi until yesterday", "was running 3 replicas
    before the incident"), so a correct diagnosis that names the old value contradicts
    nothing."""
    assert contradictions(truth, diagnosis) == []


def test_the_current_value_beside_a_former_one_is_compared() -> None:
    """The new side of a change is the value the diagnosis reports."""
    diagnosis = "cart's memory limit was lowered from 512Mi to 256Mi; the pods are OOMKilled."
    (found,) = contradictions(MEMORY, diagnosis)
    assert '"256Mi"' in found.describe()


@pytest.mark.parametrize(
    "diagnosis",
    [
        "cart's memory limit was lowered to 256Mi before the incident, so the pods are OOMKilled.",
        "Someone cut cart's memory limit to 256Mi earlier today; the pods are OOMKilled.",
        "cart's memory limit had been set to 256Mi, so the pods are OOMKilled.",
    ],
)
def test_a_value_a_change_set_is_compared_whenever_it_was_set(diagnosis: str) -> None:
    """A value a change set ("lowered to 256Mi before the incident", "had been set to
    256Mi") is the value the setting has since, not a former one, so a wrong one
    contradicts."""
    assert contradictions(MEMORY, diagnosis)


CHECKOUT_MEMORY = (
    "[fault_spec] component=deployment/checkout; namespace=shop || The memory limit of "
    "checkout was lowered from 512Mi to 64Mi."
)


@pytest.mark.parametrize(
    "diagnosis",
    [
        "checkout's memory limit was set to 256Mi before the outage began, so pods are OOMKilled.",
        "checkout's memory limit was set to 256Mi earlier today.",
        "checkout's memory limit is 256Mi until someone fixes it.",
    ],
)
def test_a_value_set_before_the_incident_or_held_until_a_fix_is_compared(
    diagnosis: str,
) -> None:
    """A value "set to" before an event or earlier ("set to 256Mi before the outage
    began", "set to 256Mi earlier today") is the value the setting has since, and one
    it "is" until something happens is the value it has: a wrong one contradicts the
    ground truth, unless another change follows ("set to 1Gi before someone lowered
    it"). Any other value followed by "before", "earlier" or "until" ("was 512Mi before
    the incident", "was set to 1Gi until Monday") is a former value."""
    facts = facts_of(CHECKOUT_MEMORY)
    assert facts is not None
    assert check_condition("consistent_values", facts, diagnosis) is not None


@pytest.mark.parametrize(
    ("truth", "diagnosis"),
    [
        (CHECKOUT_MEMORY, "checkout has a memory limit of 256Mi until someone raises it."),
        (CHECKOUT_MEMORY, "checkout's memory limit remains 256Mi until a fix is deployed."),
        (CHECKOUT_MEMORY, "checkout hit its memory limit of 256Mi before being OOMKilled."),
        (CHECKOUT_SCALE, "checkout has 3 replicas until someone scales it up."),
    ],
)
def test_a_wrong_value_stated_in_the_present_before_until_or_before_is_compared(
    truth: str, diagnosis: str
) -> None:
    """A value the diagnosis states in the present ("has a memory limit of 256Mi until
    someone raises it", "remains 256Mi until a fix is deployed", "hit its memory limit of
    256Mi before being OOMKilled") is the value the setting has now, even when "until" or
    "before" follows: a wrong one contradicts the ground truth."""
    facts = facts_of(truth)
    assert facts is not None
    assert check_condition("consistent_values", facts, diagnosis) is not None


@pytest.mark.parametrize(
    "diagnosis",
    [
        "checkout has 0 replicas until someone scales it up.",
        "The deployment has a memory limit of 256Mi until someone raises it.",
        "The memory limit remains 256Mi until a fix is deployed.",
        "cart stays at 256Mi until someone raises the limit.",
        "The cart pod hit its memory limit of 256Mi before being OOMKilled.",
    ],
)
def test_a_value_stated_in_the_present_before_until_or_before_is_current(
    diagnosis: str,
) -> None:
    """A value stated with a present verb ("has", "remains", "stays at", "hit its memory
    limit of") and followed by "until" or "before" is read as the value the setting has,
    not a former one."""
    [quantity] = quantities_in(diagnosis)
    assert quantity.former is False


@pytest.mark.parametrize(
    "diagnosis",
    [
        "checkout has been 1Gi until yesterday.",
        "checkout used to have 3 replicas until yesterday.",
        "checkout was configured as 1Gi until Monday.",
    ],
)
def test_a_value_stated_in_a_past_form_before_until_is_former(diagnosis: str) -> None:
    """A value stated in a past form ("has been 1Gi until yesterday", "used to have 3
    replicas until yesterday", "was configured as 1Gi until Monday") and followed by
    "until" is one the setting had."""
    [quantity] = quantities_in(diagnosis)
    assert quantity.former is True


@pytest.mark.parametrize(
    ("diagnosis", "contradicts"),
    [
        ("Packet loss of 40-60% was injected on the ratings pods.", False),
        ("Packet loss between 40% and 60% was injected on the ratings pods.", False),
        ("Packet loss of 50-70% was injected on the ratings pods.", False),
        ("Packet loss of 10-20% was injected on the ratings pods.", True),
        ("Packet loss between 60% and 80% was injected on the ratings pods.", True),
    ],
)
def test_a_range_contradicts_only_a_value_outside_it(diagnosis: str, contradicts: bool) -> None:
    """A range ("40-60%", "between 40% and 60%") is read with both ends: it contradicts
    the ground truth only when the true value lies outside it."""
    assert bool(contradictions(LOSS, diagnosis)) is contradicts


@pytest.mark.parametrize(
    "text",
    [
        "The grace period is 30s.",
        "The termination grace period is 30s.",
        "terminationGracePeriodSeconds: 30",
    ],
)
def test_a_grace_period_is_not_the_probes_period(text: str) -> None:
    """A pod's (termination) grace period is its own subject, not a probe's period."""
    (found,) = quantities_in(text)
    assert found.subject == ("graceperiod",)
    diagnosis = (
        "The liveness probe checks every second with no initial delay, so the pod is killed "
        f"before it starts. {text}"
    )
    assert contradictions(PERIOD, diagnosis) == []


def test_a_wrong_target_port_contradicts_the_calibration_port_truth() -> None:
    """The port ground truth of the calibration set ("The targetPort of the profile
    Service was changed from 8081 to 8082") gives its targetPort values, so a diagnosis
    that gives another targetPort contradicts it."""
    facts = facts_of(_calibration_truth("port-correct"))
    assert facts is not None
    diagnosis = "The profile Service's targetPort is 9090, where nothing listens."
    assert check_condition("consistent_values", facts, diagnosis) is not None
    assert check_condition("consistent_values", facts, "its targetPort is 8082") is None


#: the examples docs/judges.md gives of numbers and of ``consistent_values``: (ground
#: truth, diagnosis, whether the diagnosis contradicts it)
DOCUMENTED_EXAMPLES = [
    # equal however written; a decimal comma is not read
    ("The CPU request is 2.00 cores.", "its CPU request is 2000m", False),
    ("The CPU limit is 200m.", "its CPU limit is 200 millicpu", False),
    ("The memory limit is 512Mi.", "its memory limit is 0.5Gi", False),
    ("The memory limit is 1Gi.", "its memory limit is 1,024Mi", False),
    ("The memory limit is 512Mi.", "its memory limit is 1,5Gi", False),
    ("The probe timeout is 30s.", "its probe timeout is 30000ms", False),
    ("The probe timeout is 90s.", "its probe timeout is 1m30s", False),
    ("The probe timeout is 30s.", "its probe has timeoutSeconds: 30", False),
    ("The memory limit is 1000Mi.", "its memory limit is 1e3Mi", False),
    # a subject only from the value's own clause, never across a comparison with a value
    (PERIOD, "About 90% of CFS periods are throttled and requests take 5 s.", False),
    (MEMORY, "cart is OOMKilled: its memory limit is below the 300Mi the JVM needs.", False),
    (MEMORY, "cart is OOMKilled: its memory limit is far below the JVM's 300Mi heap.", False),
    (CPU, "geo is Pending: its CPU request exceeds each node's 4 cores.", False),
    (MEMORY, "cart's memory limit was lowered over the weekend to 256Mi.", True),
    (MEMORY, "cart's memory limit was lowered from 512Mi to 256Mi.", True),
    # a port or replica count "to N" only in its clause, and counting nothing else
    (PORT, "The targetPort was misconfigured, leading to 500 errors.", False),
    (SCALE, "payment was scaled down: its replicas, usually spread to 2 nodes, are gone.", False),
    (SCALE, "payment was scaled down leading to 500 failing requests.", False),
    (SCALE, "payment was scaled down leading to 503 failing checkout requests.", False),
    (SCALE, "payment was scaled to 2 causing an outage.", True),
    (SCALE, "payment was scaled to 2 yesterday.", True),
    # a bare CPU value ending its sentence, a range with both its ends
    (THROTTLE, "geo is throttled: its CPU limit is 2.", True),
    (LOSS, "Packet loss of 40-60% hits the ratings pods.", False),
    (LOSS, "Packet loss between 40% and 60% hits the ratings pods.", False),
    # reported, not proposed, nor one the setting had or does not have
    (CPU, "The cpu request is 200m, far too low.", True),
    (MEMORY, "cart's memory limit should be raised to 1Gi.", False),
    (SCALE, "payment was scaled down from 3 replicas.", False),
    (MEMORY, "cart's memory limit was 512Mi before someone lowered it.", False),
    (MEMORY, "cart's memory limit was 512Mi before the incident.", False),
    (MEMORY, "cart had a memory limit of 1Gi before the deploy.", False),
    (MEMORY, "cart's memory limit stood at 1Gi until yesterday.", False),
    (SCALE, "The payment deployment had 3 replicas before someone scaled it down.", False),
    (MEMORY, "cart's memory limit was set to 1Gi until someone lowered it.", False),
    (MEMORY, "cart's memory limit is no longer 512Mi.", False),
    (MEMORY, "cart's memory limit was lowered to 256Mi before the incident.", True),
    (MEMORY, "cart's memory limit was set to 256Mi before the outage began.", True),
    (MEMORY, "cart's memory limit was set to 256Mi earlier today.", True),
    (MEMORY, "cart's memory limit is 256Mi until someone fixes it.", True),
    (MEMORY, "cart has a memory limit of 256Mi until someone raises it.", True),
    (MEMORY, "cart's memory limit remains 256Mi until a fix is deployed.", True),
    (MEMORY, "cart hit its memory limit of 256Mi before being OOMKilled.", True),
    (MEMORY, "cart's memory limit had been set to 256Mi.", True),
    (MEMORY, "cart's memory limit was raised to 1Gi before someone lowered it.", False),
    # another component's value; what the value led to
    (CART_BESIDE_REDIS, "cart is OOMKilled; redis, whose memory limit is 1Gi, is fine.", False),
    (
        PAYMENT_BESIDE_FRONTEND,
        "payment is down. Its replicas were scaled to 2, so checkout fails.",
        True,
    ),
    # a value no word qualifies, but a replica count; a loose unit
    (CPU, "geo asks for 200m of CPU.", False),
    (SCALE, "payment runs 3 replicas.", True),
    (MEMORY, "cart's memory limit of 64MB is too small.", False),
]


@pytest.mark.parametrize(("truth", "diagnosis", "contradicts"), DOCUMENTED_EXAMPLES)
def test_the_documented_examples_of_values_read_as_documented(
    truth: str, diagnosis: str, contradicts: bool
) -> None:
    """Each example the documentation gives of how values are read and compared holds:
    the value it says is the setting's contradicts a wrong ground truth, the one it says
    is not contradicts nothing."""
    facts = facts_of(truth if truth.startswith("[fault_spec]") else HEADER + truth)
    assert facts is not None
    assert (check_condition("consistent_values", facts, diagnosis) is not None) is contradicts
