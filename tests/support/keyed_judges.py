"""Judges that take their API keys in their base URLs' queries, as some OpenAI-compatible
gateways do (``?api-key=``, ``?key=``): a panel of two, scripted, for the tests that
check every reader of a grading sees where each judge runs and never its key.
"""

from __future__ import annotations

from typing import Any

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import JudgeRequest
from tests.support.app_client import AppClient
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH

__all__ = [
    "CLOUD",
    "CLOUD_SHOWN",
    "KEYS",
    "LOCAL",
    "LOCAL_SHOWN",
    "PANEL_MODEL_SHOWN",
    "graded_by_keyed_panel",
    "keyed_panel",
]

#: the keys, which no answer, page or export may hold
KEYS = ("sk-local-5e3c1a7d", "sk-cloud-9b7f2d4e")
LOCAL = f"openai:local@http://10.0.0.7:9/v1?api-key={KEYS[0]}"
CLOUD = f"openai:cloud@http://10.0.0.8:10/v1?key={KEYS[1]}"
#: each member as adjudicators and admins see it: where it runs, its key masked
LOCAL_SHOWN = "openai:local@http://10.0.0.7:9/v1?api-key=***"
CLOUD_SHOWN = "openai:cloud@http://10.0.0.8:10/v1?key=***"
#: the panel's judge model as shown (its members' specs joined by ``+``)
PANEL_MODEL_SHOWN = f"{LOCAL_SHOWN}+{CLOUD_SHOWN}"


def _answering(yes: set[str], model: str) -> ScriptedBackend:
    def reply(request: JudgeRequest) -> str:
        return scripted_reply(request, yes=yes)

    return ScriptedBackend([reply] * 40, model=model)


def keyed_panel() -> dict[str, Any]:
    """``api_client`` settings: the panel of ``LOCAL`` and ``CLOUD``, split on D2-Q2 (so
    its gradings wait in the review queue)."""
    return {
        "judge": LOCAL,
        "panel": f"{LOCAL},{CLOUD}",
        "backends": {
            LOCAL: _answering(set(IDS), "local"),
            CLOUD: _answering(set(IDS) - {"D2-Q2"}, "cloud"),
        },
    }


async def graded_by_keyed_panel(client: AppClient, headers: dict[str, str]) -> str:
    """Submit a diagnosis with its own ground truth and wait for the panel: its grading id."""
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    response = await client.post("/v1/submissions?wait=10", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
