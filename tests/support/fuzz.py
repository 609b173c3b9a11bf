"""Property-based runs of every route with schemathesis, in process over ASGI.

Schemathesis reads the app's own OpenAPI document (``/schema/openapi.json``), generates
requests for every operation (boundary values of its coverage phase, Hypothesis data
that fits the document and data that does not, and with ``stateful`` chains that feed
one answer's ids to the next request) and sends them to the app through its ASGI
client. :func:`run_fuzz` tallies what came back; a 5xx is a defect unless it is one the
contract promises (``/readyz`` not ready, a 503 with ``Retry-After`` from a limit).
"""

from __future__ import annotations

import inspect
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from litestar import Litestar
from schemathesis.engine import events
from schemathesis.engine import from_schema as engine_for
from schemathesis.engine.recorder import ScenarioRecorder
from schemathesis.python import asgi as schemathesis_asgi

__all__ = [
    "FuzzFigures",
    "all_operations",
    "run_fuzz",
    "stop_fuzzed_apps",
    "submitter_operations",
]

#: a fixed seed, so a CI run is repeatable; pass another to explore further
DEFAULT_SEED = 19
#: the repository's schemathesis.toml: the few rules an OpenAPI schema cannot state
#: (stored data, several fields at once), per operation; ``st run`` reads it too
PROJECT_CONFIG = Path(__file__).resolve().parents[2] / "schemathesis.toml"


@dataclass
class FuzzFigures:
    """What one run sent and what came back."""

    cases: Counter[str] = field(default_factory=Counter)  # by phase
    statuses: Counter[int] = field(default_factory=Counter)
    operations: set[str] = field(default_factory=set)
    server_errors: list[str] = field(default_factory=list)  # 5xx the contract does not allow
    allowed_5xx: int = 0  # /readyz not ready, 503 with Retry-After
    failures: list[str] = field(default_factory=list)  # schema checks, engine errors
    seconds: float = 0.0
    stop_reason: str = ""

    @property
    def total(self) -> int:
        """Cases generated and sent, every phase together."""
        return sum(self.cases.values())

    def summary(self) -> str:
        """One line for the test log."""
        return (
            f"{self.total} cases ({dict(self.cases)}) over {len(self.operations)} operations "
            f"in {self.seconds:.1f} s; statuses {dict(sorted(self.statuses.items()))}; "
            f"5xx {len(self.server_errors)} (+{self.allowed_5xx} allowed 503); "
            f"check failures {len(self.failures)}; stopped: {self.stop_reason}"
        )


def _config(token: str, *, max_examples: int, phases: set[str], seed: int) -> Any:
    """Every check (``st run --checks all``), the project's per-operation rules."""
    project = tomllib.loads(PROJECT_CONFIG.read_text(encoding="utf-8"))
    return schemathesis.Config.from_dict(
        {
            **project,
            "seed": seed,
            "workers": 1,
            "continue-on-failure": True,
            "suppress-health-check": ["all"],
            "headers": {"Authorization": f"Bearer {token}"},
            "generation": {"mode": "all", "max-examples": max_examples, "database": "none"},
            "checks": {"enabled": True},
            "phases": {
                "examples": {"enabled": "examples" in phases},
                # methods no route serves only ever meet Litestar's 405 (the st run of
                # docs/api.md probes them; test_openapi_rules checks OPTIONS' Allow)
                "coverage": {"enabled": "coverage" in phases, "unexpected-methods": []},
                "fuzzing": {"enabled": "fuzzing" in phases},
                "stateful": {"enabled": "stateful" in phases, "max-steps": 6},
            },
        }
    )


def _allowed_5xx(method: str, uri: str, status: int, headers: dict[str, Any]) -> bool:
    """A 503 the contract promises: not ready, or a limit with Retry-After."""
    if status != 503:
        return False
    retry_after = any(name.lower() == "retry-after" for name in headers)
    return uri.split("?", 1)[0].endswith("/readyz") or retry_after


def _tally(figures: FuzzFigures, phase: str, recorder: ScenarioRecorder) -> None:
    figures.cases[phase] += len(recorder.cases)
    if phase != "stateful":  # its scenarios are chains of operations, not one
        figures.operations.add(recorder.label)
    for case_id, interaction in recorder.interactions.items():
        response = interaction.response
        if response is None:
            continue
        figures.statuses[response.status_code] += 1
        if response.status_code < 500:
            continue
        request = interaction.request
        if _allowed_5xx(request.method, request.uri, response.status_code, response.headers):
            figures.allowed_5xx += 1
            continue
        curl = recorder.cases[case_id].value.as_curl_command() if case_id in recorder.cases else ""
        figures.server_errors.append(f"{response.status_code} {recorder.label}: {curl}")
    for checks in recorder.checks.values():
        for check in checks:
            if check.failure_info is not None:
                failure = check.failure_info.failure
                figures.failures.append(f"{recorder.label} {check.name}: {failure.title}")


def run_fuzz(
    app: Litestar,
    token: str,
    *,
    max_examples: int,
    phases: set[str],
    operation_ids: set[str] | None = None,
    seed: int = DEFAULT_SEED,
) -> FuzzFigures:
    """Generate and send requests for every operation (or ``operation_ids``) as ``token``."""
    config = _config(token, max_examples=max_examples, phases=phases, seed=seed)
    schema = schemathesis.openapi.from_asgi("/schema/openapi.json", app, config=config)
    if operation_ids is not None:
        schema = schema.include(operation_id=sorted(operation_ids))
    figures = FuzzFigures()
    for event in engine_for(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _tally(figures, str(event.phase), event.recorder)
        elif isinstance(event, events.NonFatalError):
            figures.failures.append(f"{event.label}: {event.value!r}")
        elif isinstance(event, events.FatalError):
            raise event.exception
        elif isinstance(event, events.EngineFinished):
            figures.seconds, figures.stop_reason = event.running_time, str(event.stop_reason)
    return figures


def stop_fuzzed_apps() -> None:
    """End the lifespans schemathesis started (it keeps apps running until exit)."""
    schemathesis_asgi.shutdown_lifespans()


def _guard_roles(handler: Any) -> set[str]:
    roles = set()
    for guard in handler.guards or ():
        role = inspect.getclosurevars(guard).nonlocals.get("role")
        if isinstance(role, str):
            roles.add(role)
    return roles


def _handlers(app: Litestar) -> Iterator[tuple[str, Any]]:
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            operation_id = getattr(handler, "operation_id", None)
            if isinstance(operation_id, str):
                yield operation_id, handler


def all_operations(app: Litestar) -> set[str]:
    """Every operation id the app serves."""
    return {operation_id for operation_id, _ in _handlers(app)}


def submitter_operations(app: Litestar) -> set[str]:
    """Operation ids a submitter token may call: guarded by ``require("submitter")`` or
    not guarded at all."""
    return {
        operation_id
        for operation_id, handler in _handlers(app)
        if _guard_roles(handler) <= {"submitter"}
    }
