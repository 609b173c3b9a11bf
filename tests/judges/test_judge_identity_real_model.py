"""Two real llama.cpp servers, one after the other at one address, with different model
files: the service sees the change behind the judge's name.

llama-cpp-python's server answers any model name with its one model and lists that
model under its file's path (``/v1/models``), which is the digest here; the second
"model file" is a copy of the SmolLM2 GGUF under another path. The judge is
``openai:smollm2@<address>`` both times.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from api.service.qualification import identity_of
from api.service.settings import Settings
from judge.backends import OpenAIBackend
from storage import JudgeCallRecord, Store
from storage.quality_tables import CalibrationRunRecord
from tests.storage.helpers import sregym_rubric
from tests.support.keys import session_key
from tests.support.llama_server import (
    missing_requirements,
    running_llama_server,
    smollm2_gguf,
)
from tests.support.service_process import free_port
from tests.support.submissions import DIAGNOSIS, TRUTH
from tests.support.webhook_receiver import receiving

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

SETTINGS = {
    "judge_digest_seconds": 0,
    "judge_max_tokens": 1024,
    "judge_max_attempts": 2,
    "judge_timeout": 900,
    "judge_first_token_seconds": 900,
    "judge_idle_seconds": 120,
    "judge_concurrency": 1,
    "judge_reply_format": "compact",
    "judge_asking": "single",
    "webhook_allow_hosts": "127.0.0.1",
    "webhook_retry_seconds": 0.05,
}


async def _graded(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    response = await client.post("/v1/submissions?wait=1", json=body, headers=headers)
    assert response.status_code in (201, 202), response.text
    grading_id = response.json()["id"]
    for _ in range(1800):
        grading = (await client.get(f"/v1/gradings/{grading_id}", headers=headers)).json()
        if grading["status"] != "pending":
            return dict(grading)
        await asyncio.sleep(1)
    raise AssertionError("the grading is still pending after 30 minutes")


def _calls(engine: Engine, grading_id: str) -> list[bool]:
    """Whether each judge call of a grading was answered from the cache."""
    query = select(JudgeCallRecord.cached).where(JudgeCallRecord.grading_id == grading_id)
    with engine.connect() as connection:
        return [bool(cached) for (cached,) in connection.execute(query)]


async def _qualify(engine: Engine, settings: Settings, digest: str | None) -> None:
    """A qualifying calibration run of the service's judge identity that measured ``digest``."""
    rubric = sregym_rubric()
    identity = identity_of(settings, settings.judge, rubric)
    run = CalibrationRunRecord(
        **identity, rubric_id=rubric.id, gold_name="gold.jsonl", gold_sha256="0" * 64,
        n=73, verdict_kappa=0.9, false_pass_rate=0.0, qualified=True, judge_digest=digest,
    )  # fmt: skip
    await Store(engine, key=session_key()).calibration.add_run(run)


async def _digest(url: str) -> str | None:
    backend = OpenAIBackend("smollm2", base_url=url)
    try:
        return await backend.model_digest()
    finally:
        await backend.aclose()


async def test_another_model_file_at_the_same_address_is_a_changed_judge(
    api_client: Any, tokens: Any, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)
    original = smollm2_gguf()
    assert original is not None
    copy = tmp_path / "models" / "replacement.gguf"
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    port = free_port()
    spec = f"openai:smollm2@http://127.0.0.1:{port}/v1"
    with receiving() as receiver:
        (tmp_path / "a").mkdir()
        with running_llama_server(tmp_path / "a", port=port) as server:
            first_digest = await _digest(server.base_url)
            assert first_digest is not None and first_digest.startswith("models:sha256:")
            settings = Settings(judge=spec, database_url=database_url, **SETTINGS)
            await _qualify(engine, settings, first_digest)
            async with api_client(judge=spec, **SETTINGS) as client:
                agent, admin = await tokens("submitter"), await tokens("admin")
                hook = {"url": receiver.url, "events": ["judge.changed"]}
                created = await client.post("/v1/webhooks", json=hook, headers=admin)
                receiver.secret = created.json()["secret"]
                first = await _graded(client, agent)
                assert first["status"] == "graded", first
                assert first["provisional"] is False
                assert _calls(engine, first["id"]) == [False]
                again = await _graded(client, agent)
                assert _calls(engine, again["id"]) == [True]  # the same model: reused
        (tmp_path / "b").mkdir()
        with running_llama_server(tmp_path / "b", port=port, model_path=copy) as server:
            second_digest = await _digest(server.base_url)
            assert second_digest not in (None, first_digest)
            async with api_client(judge=spec, **SETTINGS) as client:
                agent = await tokens("submitter")
                changed = await _graded(client, agent)
                # asked of the new model, not answered with the old one's cached reply
                calls = _calls(engine, changed["id"])
                assert calls and True not in calls
                assert changed["provisional"] is True
                [event] = await asyncio.to_thread(receiver.wait_for, 1, 60)
                assert event["type"] == "judge.changed"
                assert event["data"]["previous_digest"] == first_digest
                assert event["data"]["digest"] == second_digest
