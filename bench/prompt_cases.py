"""Ground truths and diagnoses of typical length for the prompt-token benchmark.

Written for the benchmark in SREGym's ground-truth format (``[fault_spec]
component=<kind/name>; namespace=<ns> || <description>``); the diagnoses are of the
length and style AI SRE agents submit, right and wrong ones alike.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CASES", "Case"]


@dataclass(frozen=True)
class Case:
    """One input of a grading."""

    truth: str
    diagnosis: str


CASES = [
    Case(
        "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
        "The USER_PORT env var of user-service is set to 9999 while its Service targets 8086.",
        "Root cause: the user-service deployment in the hotel-reservation namespace was "
        "redeployed with USER_PORT=9999, but the user Service still forwards to targetPort "
        "8086. The pods are Running and pass their TCP check on 9999, yet every call from "
        "frontend to user-service gets 'connection refused', so logins and reservations "
        "fail with HTTP 500. Other services (geo, rate, profile) are healthy. Fix: set "
        "USER_PORT back to 8086 or point the Service's targetPort at 9999.",
    ),
    Case(
        "[fault_spec] component=deployment/checkout; namespace=astronomy-shop || The "
        "checkout container's memory limit was lowered to 64Mi; it is OOMKilled under load.",
        "The checkout deployment (astronomy-shop) keeps restarting: kubectl describe shows "
        "Last State Terminated, Reason OOMKilled, exit code 137, and the container's memory "
        "limit is 64Mi while its working set reaches ~180Mi during order placement. Each "
        "restart drops in-flight PlaceOrder calls, so the frontend shows checkout errors and "
        "the payment and email services see no traffic. Raising the limit to 256Mi should "
        "resolve it; I found no issue in the payment service itself.",
    ),
    Case(
        "[fault_spec] component=service/ts-route-service; namespace=train-ticket || The "
        "Service selector of ts-route-service was changed to app=ts-route-svc, matching no pod.",
        "Investigation: ts-travel-service and ts-basic-service log timeouts calling "
        "ts-route-service. The ts-route-service pods are healthy and ready, but `kubectl get "
        "endpoints ts-route-service -n train-ticket` is empty. Its Service selector is "
        "app=ts-route-svc while the pods carry app=ts-route-service, so the Service has no "
        "endpoints and all route queries fail, which breaks ticket search end to end. "
        "Restoring the selector to app=ts-route-service fixes the endpoints.",
    ),
    Case(
        "[fault_spec] component=deployment/geo; namespace=hotel-reservation || The geo "
        "deployment's image was changed to a tag that does not exist (geo:v9.9.9).",
        "The search feature is down. I believe the root cause is the mongodb-geo database: "
        "its PVC is nearly full and queries are slow, which makes the geo service time out. "
        "The frontend returns 500 for nearby searches. Recommend expanding the volume.",
    ),
    Case(
        "",
        "After checking every deployment, pod and service in the namespace I found nothing "
        "wrong: all pods are Running with zero restarts, endpoints are populated, error rates "
        "in the logs are at their normal background level and latency is within its usual "
        "range. The cluster appears healthy; no fault is present.",
    ),
]
