"""The Python client of sre-judge: submit diagnoses, read and correct gradings.

``Client`` and ``AsyncClient`` have the same methods, and the same ``scenarios`` (list,
bulk load, versions, update) and ``imports`` (upload, follow a job) calls;
``sre_judge_client.sregym`` holds a drop-in replacement for SREGym's ``LLMAsAJudgeOracle``.
"""

from __future__ import annotations

from sre_judge_client._core import idempotency_key
from sre_judge_client.async_client import AsyncClient
from sre_judge_client.client import Client
from sre_judge_client.errors import (
    ApiError,
    Conflict,
    Forbidden,
    GroundTruthConflict,
    InvalidRequest,
    NotFound,
    PreconditionFailed,
    Unauthorized,
    Unavailable,
)
from sre_judge_client.models import (
    Answer,
    Dimension,
    Grading,
    GradingPage,
    ImportJob,
    ImportRowError,
    Override,
    RegradeJob,
    Scenario,
    ScenarioLoadItem,
    ScenarioLoadReport,
    ScenarioPage,
    ScenarioVersion,
    ScenarioVersions,
    Submission,
    Tag,
    Vote,
)

__all__ = [
    "Answer",
    "ApiError",
    "AsyncClient",
    "Client",
    "Conflict",
    "Dimension",
    "Forbidden",
    "Grading",
    "GradingPage",
    "GroundTruthConflict",
    "ImportJob",
    "ImportRowError",
    "InvalidRequest",
    "NotFound",
    "Override",
    "PreconditionFailed",
    "RegradeJob",
    "Scenario",
    "ScenarioLoadItem",
    "ScenarioLoadReport",
    "ScenarioPage",
    "ScenarioVersion",
    "ScenarioVersions",
    "Submission",
    "Tag",
    "Unauthorized",
    "Unavailable",
    "Vote",
    "idempotency_key",
]
