"""A judge is its name and the model behind it: a changed digest is seen and acted on.

The real ``ollama`` and ``openai`` clients talk to a test judge server whose model
digest (Ollama's ``/api/tags``) or ``system_fingerprint`` (OpenAI) the test changes, as
a model replaced behind the same name: the old model's cached replies no longer reach a
live grading, the judge's qualification turns provisional, ``judge.changed`` is
delivered to a webhook, counted in ``/metrics`` and shown by ``/readyz``. A judge that
reports no digest has its cached replies reused only under
``SRE_JUDGE_CACHE_UNVERIFIED_JUDGE``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlmodel import col

import storage.judge_digests as judge_digests
from api.judges.calibration import calibrate
from api.judges.identity import record_digest
from api.service.grader_factory import asking_choice
from api.service.qualification import Qualifications
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends import OllamaBackend, OpenAIBackend, ScriptedBackend
from judge.cache import FINGERPRINT, DigestKeyedCache, MemoryJudgeCache
from judge.calls import Completion, JudgeRequest
from judge.identity import DigestChange, DigestTracker, panel_digest
from storage import Store
from storage.engine import make_engine
from storage.judge_digests import JudgeDigestRecord
from storage.keys import ServiceKey
from storage.tables import AuditRecord, GradingRecord
from tests.storage.helpers import sregym_rubric
from tests.support.judge_server import running_judge_server, sregym_reply
from tests.support.keys import session_key
from tests.support.qualification import qualify
from tests.support.submissions import DIAGNOSIS, TRUTH
from tests.support.webhook_receiver import Receiver, receiving
from tests.web.conftest import sign_in

#: the engine matters here (digests and canary runs are stored): PostgreSQL too under --db all
pytestmark = pytest.mark.postgres

#: every answer no: a well-formed failing verdict, whatever the diagnosis
REPLY = sregym_reply(set())
#: a small gold set (``sre-judge calibrate``)
GOLD = Path(__file__).parents[1] / "fixtures" / "gold-small.jsonl"
FAST = {
    "webhook_allow_hosts": "127.0.0.1",
    "webhook_retry_seconds": 0.02,
    "judge_digest_seconds": 0,
}


async def _submit(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    """The same diagnosis each time: byte-identical judge requests."""
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    response = await client.post("/v1/submissions?wait=10", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _register(client: Any, admin: dict[str, str], receiver: Receiver) -> None:
    body = {"url": receiver.url, "events": ["judge.changed"]}
    response = await client.post("/v1/webhooks", json=body, headers=admin)
    assert response.status_code == 201, response.text
    receiver.secret = response.json()["secret"]


def test_a_panel_digest_keeps_its_members_digests_while_they_fit() -> None:
    """A panel's digest names its members' digests in the panel's order (``?`` for one
    unknown); when they would be longer than a grading keeps (512 characters) it is the
    sha256 of them instead, ``panel:sha256:...``."""
    assert panel_digest(["props:sha256:1", None]) == "props:sha256:1,?"
    assert panel_digest([None, None]) is None
    long = ["sha256:" + "a" * 249, "sha256:" + "b" * 249]
    hashed = hashlib.sha256(",".join(long).encode()).hexdigest()
    assert panel_digest(long) == f"panel:sha256:{hashed}"


async def test_a_panel_of_judges_with_full_length_digests_is_graded_and_stored(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A panel of two judges each reporting a digest of the full 256 characters grades
    and stores its gradings on SQLite and PostgreSQL alike, keeping the sha256 of its
    members' digests (``panel:sha256:...``)."""
    first, second = "scripted:pass", "openai:other-pass@http://127.0.0.1:9/v1"
    digests = ("sha256:" + "a" * 249, "sha256:" + "b" * 249)
    backends = {
        first: ScriptedBackend(model="pass", digest=digests[0]),
        second: ScriptedBackend(model="pass", base_url="http://127.0.0.1:9/v1", digest=digests[1]),
    }
    async with api_client(judge=first, panel=f"{first},{second}", backends=backends) as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=await tokens("submitter"),
        )
    assert response.status_code == 201, response.text
    grading = response.json()
    assert grading["status"] == "graded", grading
    with Session(engine) as session:
        stored = session.execute(
            select(GradingRecord.judge_digest).where(col(GradingRecord.id) == grading["id"])
        ).scalar_one()
    hashed = hashlib.sha256(",".join(digests).encode()).hexdigest()
    assert stored == f"panel:sha256:{hashed}"


class _SlowToTell(ScriptedBackend):
    """Tells its digest at once, then (``slow``) only after 8 s."""

    slow = False

    async def model_digest(self) -> str | None:
        if self.slow:
            await asyncio.sleep(8)
        return await super().model_digest()


async def test_readyz_keeps_the_known_digest_while_the_server_is_slow_to_tell(
    api_client: Any,
) -> None:
    """``/readyz`` shows the digest known while the judge's server is too slow to tell it
    again (over 5 s): a slow answer is no change of model, and ``digest`` stays the
    model's instead of turning to null."""
    spec = "openai:m@http://127.0.0.1:9/v1"
    judge = _SlowToTell(model="pass", base_url="http://127.0.0.1:9/v1", digest="models:sha256:abc")
    async with api_client(judge=spec, backends={spec: judge}, judge_digest_seconds=0) as client:
        first = (await client.get("/readyz")).json()["judge"]
        judge.slow = True
        second = (await client.get("/readyz")).json()["judge"]
    assert first["digest"] == "models:sha256:abc"
    assert second["ok"] is True
    assert second["digest"] == "models:sha256:abc", second


async def test_an_ollama_model_replaced_behind_its_tag_is_a_new_judge(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    with running_judge_server(default=REPLY) as server, receiving() as receiver:
        server.ollama_tag = "m:latest"
        spec = f"ollama:m@{server.ollama_url}"
        settings = Settings(judge=spec, database_url=database_url)
        await qualify(engine, settings, sregym_rubric(), judge_digest="abc123")
        async with api_client(judge=spec, **FAST) as client:
            agent, admin = await tokens("submitter"), await tokens("admin")
            await _register(client, admin, receiver)
            first = await _submit(client, agent)
            again = await _submit(client, agent)
            # the digest reported is the one measured: qualified, and the reply reused
            assert (first["provisional"], again["provisional"]) == (False, False)
            assert len(server.requests) == 1
            server.ollama_digest = "def456"  # another model file behind the tag
            changed = await _submit(client, agent)
            assert len(server.requests) == 2, "a cached reply of the old model was reused"
            assert changed["provisional"] is True
            [event] = await asyncio.to_thread(receiver.wait_for, 1)
            assert event["type"] == "judge.changed"
            assert event["data"] == {
                "judge": "ollama:m",
                "previous_digest": "abc123",
                "digest": "def456",
            }
            metrics = (await client.get("/metrics")).text
            assert 'sre_judge_judge_changes_total{judge="ollama:m"} 1.0' in metrics
            ready = (await client.get("/readyz")).json()["judge"]
            assert ready["digest"] == "def456"
            assert ready["changed"]["previous_digest"] == "abc123"
            # the new model's replies are cached in turn
            await _submit(client, agent)
            assert len(server.requests) == 2


async def test_a_new_system_fingerprint_is_a_new_judge(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    with running_judge_server(default=REPLY) as server, receiving() as receiver:
        spec = f"openai:m@{server.openai_url}"
        settings = Settings(judge=spec, database_url=database_url)
        await qualify(engine, settings, sregym_rubric(), judge_digest="fingerprint:fp_a")
        server.fingerprint = "fp_a"
        async with api_client(judge=spec, **FAST) as client:
            agent, admin = await tokens("submitter"), await tokens("admin")
            await _register(client, admin, receiver)
            first = await _submit(client, agent)
            assert first["provisional"] is False
            server.fingerprint = "fp_b"  # the cloud model was updated behind its id
            changed = await _submit(client, agent)
            # known by fingerprints only: every live grading asks the judge
            assert len(server.requests) == 2
            assert changed["provisional"] is True
            [event] = await asyncio.to_thread(receiver.wait_for, 1)
            assert event["data"]["previous_digest"] == "fingerprint:fp_a"
            assert event["data"]["digest"] == "fingerprint:fp_b"
    current = await Store(engine, key=session_key()).judge_digests.current("openai:m")
    assert current is not None and current.changed


@pytest.mark.parametrize(("allowed", "calls"), [(False, 2), (True, 1)])
async def test_a_judge_without_digest_is_asked_again_unless_allowed(
    api_client: Any, tokens: Any, allowed: bool, calls: int
) -> None:
    judge = ScriptedBackend(model="fail")  # reports no digest, no fingerprint
    async with api_client(
        judge="scripted:fail", backends={"scripted:fail": judge}, cache_unverified_judge=allowed
    ) as client:
        agent = await tokens("submitter")
        await _submit(client, agent)
        await _submit(client, agent)
    assert len(judge.requests) == calls


async def test_the_ollama_backend_asks_the_digest_anew() -> None:
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag = "m:latest"
        backend = OllamaBackend("m", base_url=server.ollama_url)
        tracker = DigestTracker(refresh_seconds=0)
        assert await tracker.current(backend) == "abc123"
        server.ollama_digest = "def456"
        assert await tracker.current(backend) == "def456"
        assert await backend.digest() == "def456"  # the completions' fingerprint follows
        await backend.aclose()


async def test_a_digest_longer_than_is_stored_is_known_by_its_sha256() -> None:
    """Every digest fits the 256 characters its tables hold: an Ollama digest or a
    fingerprint's that would be longer is the sha256 of what it names; one that fits is
    kept as reported."""
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag = "m:latest"
        server.ollama_digest = "sha256:" + "d" * 300
        backend = OllamaBackend("m", base_url=server.ollama_url)
        tracker = DigestTracker(refresh_seconds=0)
        hashed = hashlib.sha256(server.ollama_digest.encode()).hexdigest()
        assert await tracker.current(backend) == f"sha256:{hashed}"
        server.ollama_digest = "def456"
        assert await tracker.current(backend) == "def456"
        await backend.aclose()
    fits, long = "f" * (256 - len(FINGERPRINT)), "f" * 256
    judge = ScriptedBackend(model="pass")
    tracker.observe(judge, fits)
    assert await tracker.current(judge) == FINGERPRINT + fits
    tracker.observe(judge, long)
    hashed = hashlib.sha256(long.encode()).hexdigest()
    assert await tracker.current(judge) == f"{FINGERPRINT}sha256:{hashed}"


async def test_an_openai_server_naming_its_model_file_has_a_digest() -> None:
    """llama-cpp-python lists its one model under the file's path and answers any name."""
    with running_judge_server(default=REPLY) as server:
        backend = OpenAIBackend("smollm2", base_url=server.openai_url)
        assert await backend.model_digest() is None  # no /props, no listing: nothing
        await backend.aclose()


async def test_a_stale_tracker_keeps_nothing_of_a_changed_model() -> None:
    judge = ScriptedBackend(model="fail", fingerprint="fp_a")
    tracker = DigestTracker(refresh_seconds=3600)
    inner = MemoryJudgeCache()
    cache = DigestKeyedCache(inner, tracker.of(judge), unverified=True, namespace=None)
    assert await cache.get("k") is None
    await cache.put("k", Completion(text="a", model="m", fingerprint="fp_a"))
    assert len(inner.entries) == 1  # kept (under the plain key: nothing known yet)
    assert await tracker.current(judge) == FINGERPRINT + "fp_a"
    assert await cache.get("k2") is None
    # the reply came from another model than the one looked up: not kept, and learned
    await cache.put("k2", Completion(text="b", model="m", fingerprint="fp_b"))
    assert len(inner.entries) == 1
    assert tracker.known(judge) == FINGERPRINT + "fp_b"


async def _digest_from_models_listing(backend: OpenAIBackend, model_id: str) -> str | None:
    """The digest of a server without ``/props`` whose ``/v1/models`` lists ``model_id``."""
    with respx.mock(assert_all_called=True) as router:
        router.get("http://llama.test/props").respond(404)
        entry = {"id": model_id, "object": "model", "created": 1, "owned_by": "me"}
        router.get("http://llama.test/v1/models").respond(
            200, json={"object": "list", "data": [entry]}
        )
        return await backend.model_digest()


async def test_a_llama_cpp_server_names_its_model_file_in_props() -> None:
    """``GET /props`` at the server's root: ``model_path`` is the digest's source."""
    backend = OpenAIBackend("smollm2", base_url="http://llama.test/v1", api_key="k")
    try:
        with respx.mock(assert_all_called=True) as router:
            props = router.get("http://llama.test/props")
            props.return_value = httpx.Response(200, json={"model_path": "/m/a.gguf"})
            first = await backend.model_digest()
            props.return_value = httpx.Response(200, json={"model_path": "/m/b.gguf"})
            second = await backend.model_digest()
        listed = await _digest_from_models_listing(backend, "/m/a.gguf")
        nothing = await _digest_from_models_listing(backend, "smollm2")
    finally:
        await backend.aclose()
    assert first is not None and first.startswith("props:sha256:")
    assert second is not None and second != first
    assert listed is not None and listed.startswith("models:sha256:")
    assert nothing is None  # the name asked, and nothing more: no digest


def _vllm_entry(root: str, permission_id: str, created: int) -> dict[str, Any]:
    """vLLM's ``/v1/models`` entry: a new permission (random id, the time) every listing."""
    permission = {"id": permission_id, "object": "model_permission", "created": created}
    listed = {"id": "qwen", "object": "model", "created": created, "owned_by": "vllm"}
    return {**listed, "root": root, "max_model_len": 32768, "permission": [permission]}


async def test_a_vllm_model_keeps_its_digest_from_one_listing_to_the_next() -> None:
    """Every listing of one model had another digest (its permission's id and time were
    hashed): a ``judge.changed`` at each refresh, no cache hit, qualification lost. The
    model behind the name changing still changes it."""
    backend = OpenAIBackend("qwen", base_url="http://vllm.test/v1", api_key="k")
    digests = []
    try:
        with respx.mock(assert_all_called=False) as router:
            router.get("http://vllm.test/props").respond(404)
            models = router.get("http://vllm.test/v1/models")
            for root, permission, created in [
                ("/models/Qwen2.5-7B", "modelperm-aaa", 1),
                ("/models/Qwen2.5-7B", "modelperm-bbb", 2),
                ("/models/Qwen2.5-14B", "modelperm-ccc", 3),
            ]:
                entry = _vllm_entry(root, permission, created)
                models.return_value = httpx.Response(200, json={"data": [entry]})
                digests.append(await backend.model_digest())
    finally:
        await backend.aclose()
    assert digests[0] is not None and digests[0] == digests[1] != digests[2]


async def test_the_judges_page_says_the_model_changed(
    api_client: Any, tokens: Any, engine: Engine, database_url: str, service_key: Any
) -> None:
    settings = Settings(judge="ollama:m", database_url=database_url)
    await qualify(engine, settings, sregym_rubric(), judge_digest="abc123")
    store = Store(engine, key=service_key)
    await store.judge_digests.learn("ollama:m", "abc123", actor="test")
    async with api_client() as client:
        await sign_in(client, await tokens("adjudicator", "Ada"))
        assert 'data-testid="judge-changed"' not in (await client.get("/judges")).text
        await store.judge_digests.learn("ollama:m", "def456", actor="test")
        page = (await client.get("/judges")).text
    assert 'data-testid="judge-changed"' in page
    assert "<code>abc123</code>" in page and "<code>def456</code>" in page


async def test_a_sampled_judge_replaced_behind_its_tag_is_seen_too(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """At a temperature above 0 nothing is cached, and the change is still seen."""
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag = "m:latest"
        spec = f"ollama:m@{server.ollama_url}"
        settings = Settings(judge=spec, database_url=database_url, judge_temperature=0.7)
        await qualify(engine, settings, sregym_rubric(), judge_digest="abc123")
        async with api_client(judge=spec, judge_temperature=0.7, **FAST) as client:
            agent = await tokens("submitter")
            assert (await _submit(client, agent))["provisional"] is False
            server.ollama_digest = "def456"
            assert (await _submit(client, agent))["provisional"] is True
            assert len(server.requests) == 2
    current = await Store(engine, key=session_key()).judge_digests.current("ollama:m")
    assert current is not None and current.previous_digest == "abc123"


@pytest.mark.parametrize("failures", [1, 1000], ids=["once", "every_time"])
async def test_a_model_replaced_while_its_digest_cannot_be_stored_is_provisional(
    api_client: Any,
    tokens: Any,
    engine: Engine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    failures: int,
) -> None:
    """Once another model answers behind a qualified judge's name, its gradings are
    provisional even while the database cannot store the new digest (a busy database):
    the digest is stored at a later use, and until then qualification goes by the
    digest the service learned."""
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag = "m:latest"
        spec = f"ollama:m@{server.ollama_url}"
        settings = Settings(judge=spec, database_url=database_url)
        await qualify(engine, settings, sregym_rubric(), judge_digest="abc123")
        real_learn = judge_digests.JudgeDigestRepository.learn
        left = {"failures": 0}

        async def busy_learn(
            self: judge_digests.JudgeDigestRepository, *args: Any, **kwargs: Any
        ) -> Any:
            if left["failures"]:
                left["failures"] -= 1
                raise OperationalError("INSERT", {}, Exception("database is locked"))
            return await real_learn(self, *args, **kwargs)

        monkeypatch.setattr(judge_digests.JudgeDigestRepository, "learn", busy_learn)
        async with api_client(judge=spec, **FAST) as client:
            agent = await tokens("submitter")
            assert (await _submit(client, agent))["provisional"] is False
            server.ollama_digest = "def456"  # another model file behind the tag
            left["failures"] = failures
            gradings = [await _submit(client, agent) for _ in range(3)]
    assert [g["provisional"] for g in gradings] == [True, True, True]
    current = await Store(engine, key=session_key()).judge_digests.current("ollama:m")
    assert current is not None
    assert current.digest == ("def456" if failures == 1 else "abc123")


async def test_a_digest_that_could_not_be_stored_is_told_again() -> None:
    """A new digest whose listener could not take it (the database was busy) is asked,
    and told, again at the next use, as the change from the digest taken before."""
    judge = ScriptedBackend(model="fail", digest="abc123")
    tracker = DigestTracker(refresh_seconds=3600)
    told: list[tuple[str | None, str]] = []
    takes = iter([True, False, True])

    async def listener(change: DigestChange) -> bool:
        told.append((change.previous, change.current))
        return next(takes)

    tracker.listen(listener)
    assert await tracker.current(judge) == "abc123"
    judge.digest = "def456"
    tracker.stale(judge)
    assert await tracker.current(judge) == "def456"  # not taken
    assert await tracker.current(judge) == "def456"  # told again, and taken
    assert await tracker.current(judge) == "def456"  # known now: not asked, nor told
    assert told == [(None, "abc123"), ("abc123", "def456"), ("abc123", "def456")]
    assert tracker.learned("scripted:fail") == "def456"


async def test_a_new_digest_stored_while_a_lookup_ran_is_not_hidden_by_the_cache(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As soon as the service learned a new digest behind a qualified judge's name, the
    judge is not qualified in that process, even for a lookup made while the digest was
    being stored (a busy database): no lookup of the old model is kept in the cache."""
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag = "m:latest"
        spec = f"ollama:m@{server.ollama_url}"
        settings = Settings(judge=spec, database_url=database_url, judge_digest_seconds=0)
        rubric = sregym_rubric()
        await qualify(engine, settings, rubric, judge_digest="abc123")
        real_learn = judge_digests.JudgeDigestRepository.learn
        gate, writing = asyncio.Event(), asyncio.Event()

        async def slow_learn(
            self: judge_digests.JudgeDigestRepository, *args: Any, **kwargs: Any
        ) -> Any:
            writing.set()
            await gate.wait()  # a write that takes a moment
            return await real_learn(self, *args, **kwargs)

        async with Runtime(settings, engine=engine) as runtime:
            services = runtime.services
            tracker = services.backends.digests
            backend = services.backends.get(spec)
            qualifications = Qualifications(
                services.store,
                settings,
                digests=tracker,
                changes=lambda: services.qualification_changes,
            )
            choice = asking_choice(settings, spec, rubric)
            assert await tracker.current(backend) == "abc123"
            assert await qualifications.qualified(spec, rubric.version, choice) is True
            monkeypatch.setattr(judge_digests.JudgeDigestRepository, "learn", slow_learn)
            server.ollama_digest = "def456"
            learning = asyncio.create_task(tracker.current(backend))
            await asyncio.wait_for(writing.wait(), 5)
            meanwhile = await qualifications.qualified(spec, rubric.version, choice)
            gate.set()
            assert await learning == "def456"
            stored = await services.store.judge_digests.current("ollama:m")
            after = await qualifications.qualified(spec, rubric.version, choice)
    assert stored is not None and stored.digest == "def456"
    assert (meanwhile, after) == (False, False)


async def test_reports_tell_apart_the_models_behind_one_name(api_client: Any, tokens: Any) -> None:
    """Each grading keeps the digest of the model that graded it: grouped by judge and
    digest, the gradings before a model was replaced behind its tag and after are two
    groups, while grouped by judge they stay one."""
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag, server.ollama_digest = "m:latest", "abc123"
        spec = f"ollama:m@{server.ollama_url}"
        async with api_client(judge=spec, **FAST) as client:
            agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
            await _submit(client, agent)
            await _submit(client, agent)
            server.ollama_digest = "def456"
            await _submit(client, agent)
            query = "/v1/stats/pass-rates?inline=include&group_by=judge,judge_digest"
            report = (await client.get(query, headers=ada)).json()
            by_name = (
                await client.get("/v1/stats/pass-rates?inline=include&group_by=judge", headers=ada)
            ).json()
    found = {(g["key"]["judge"], g["key"]["judge_digest"]): g["n"] for g in report["groups"]}
    assert found == {("ollama:m", "abc123"): 2, ("ollama:m", "def456"): 1}
    assert [(g["key"]["judge"], g["n"]) for g in by_name["groups"]] == [("ollama:m", 3)]


async def test_a_model_change_behind_a_long_judge_name_is_recorded(
    engine: Engine, database_url: str
) -> None:
    """A judge named by a model file's path (a model name of up to 256 characters) has
    its model change recorded, so qualification holds it against the new model."""
    model = "/models/" + "huggingface-cache/" * 9 + "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    url = "http://127.0.0.1:9/v1"
    spec = f"openai:{model}@{url}"
    settings = Settings(judge=spec, database_url=database_url)
    backend = ScriptedBackend(model="pass")
    async with Runtime(settings, engine=engine, backends={spec: backend}) as runtime:
        services = runtime.services
        first = DigestChange("openai", model, url, None, "models:sha256:aaa")
        second = DigestChange("openai", model, url, "models:sha256:aaa", "models:sha256:bbb")
        assert await record_digest(services, first) is not None
        changed = await record_digest(services, second)
        current = await services.store.judge_digests.current(f"openai:{model}")
    assert changed is not None and changed.changed
    assert current is not None and current.digest == "models:sha256:bbb"


def _count(engine: Engine, query: Any) -> int:
    with Session(engine) as session:
        return int(session.execute(query).scalar_one())


async def test_a_change_learned_by_two_processes_at_once_is_recorded_once(
    engine: Engine, database_url: str, service_key: ServiceKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processes that learn the same new model behind a judge's name together (``serve
    --processes 2``, an extra ``sre-judge worker``) record one change: one row replacing
    the old digest and one ``judge.changed`` event for webhooks."""
    name = "openai:judge-model"
    first = Store(engine, key=service_key)
    await first.judge_digests.learn(name, "models:sha256:old", actor="service")
    other_engine = make_engine(database_url)  # the other process's own connections
    second = Store(other_engine, key=service_key)
    latest = judge_digests._latest

    def slow_latest(session: Session, judge_spec: str) -> JudgeDigestRecord | None:
        found = latest(session, judge_spec)
        time.sleep(0.3)  # both would have read the old digest before either writes
        return found

    monkeypatch.setattr(judge_digests, "_latest", slow_latest)
    try:
        await asyncio.gather(
            first.judge_digests.learn(name, "models:sha256:new", actor="service"),
            second.judge_digests.learn(name, "models:sha256:new", actor="service"),
        )
    finally:
        other_engine.dispose()
    changes = select(func.count()).where(
        col(JudgeDigestRecord.judge_spec) == name, col(JudgeDigestRecord.changed).is_(True)
    )
    events = select(func.count()).where(col(AuditRecord.event) == "judge.changed")
    assert (_count(engine, changes), _count(engine, events)) == (1, 1)


async def _submit_waiting(client: Any, headers: dict[str, str], diagnosis: str, wait: float) -> int:
    body = {"diagnosis": diagnosis, "ground_truth": TRUTH}
    response = await client.post(f"/v1/submissions?wait={wait}", json=body, headers=headers)
    assert response.status_code in (201, 202), response.text
    return response.status_code


async def test_an_unreachable_ollama_judge_is_not_recorded_as_a_changed_model(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A judge server away for a moment (a restart) has not changed model: nothing is
    recorded, announced or made provisional while its digest cannot be read."""
    running = running_judge_server(default=sregym_reply(set()))
    server = running.__enter__()
    try:
        server.ollama_tag = "m:latest"
        spec = f"ollama:m@{server.ollama_url}"
        # the default digest refresh (30 s): a failed call makes the next use ask again
        settings: dict[str, Any] = {"judge_max_attempts": 1, "judge_retry_seconds": 0.2}
        async with api_client(judge=spec, **settings) as client:
            admin = await tokens("admin")
            await _submit_waiting(client, admin, DIAGNOSIS, 10)
            store = Store(engine, key=session_key())
            before = [(r.digest, r.changed) for r in await store.judge_digests.recent()]
            running.__exit__(None, None, None)  # the judge server goes away (same model)
            running = None
            await _submit_waiting(client, admin, DIAGNOSIS + " Also the probe fails.", 1)
            await asyncio.sleep(1.5)  # its retries (the server still away)
            after = [(r.digest, r.changed) for r in await store.judge_digests.recent()]
    finally:
        if running is not None:
            running.__exit__(None, None, None)
    assert before == [("abc123", False)]
    # nothing new is known of the model while the server cannot be asked
    assert after == before, f"an unreachable server was recorded as a changed model: {after}"


class TagsAwayAfterCalls(OllamaBackend):
    """The real Ollama client; once it has answered a call, ``/api/tags`` cannot be read
    for a moment (``model_digest`` says None, as it does for a server it cannot ask)."""

    tags_away = False

    async def model_digest(self) -> str | None:
        if self.tags_away:
            return None
        return await super().model_digest()

    async def complete(self, request: JudgeRequest) -> Completion:
        completion = await super().complete(request)
        self.tags_away = True
        return completion


async def test_an_ollama_digest_unreadable_for_a_moment_is_not_a_changed_model(
    engine: Engine, database_url: str
) -> None:
    """The model behind ``ollama:m`` is the one stored (digest ``abc123``). ``sre-judge
    calibrate`` grades its set (each completion carrying that digest, read from
    ``/api/tags``); the look-up after the calls finds ``/api/tags`` unreadable for a
    moment. Nothing changed behind the name: no change is recorded, the stored digest
    stands, and the run records the model known (none in this process yet), never the
    completions' digest as a fingerprint of another model."""
    with running_judge_server(default=REPLY) as server:
        server.ollama_tag = "m:latest"
        spec = f"ollama:m@{server.ollama_url}"
        store = Store(engine, key=session_key())
        await store.judge_digests.learn("ollama:m", "abc123", actor="service")
        backend = TagsAwayAfterCalls("m", base_url=server.ollama_url)
        settings = Settings(judge=spec, database_url=database_url, canary_budget=1)
        try:
            async with Runtime(settings, engine=engine, backends={spec: backend}) as runtime:
                outcome = await calibrate(runtime.services, GOLD.read_bytes(), gold_name=GOLD.name)
        finally:
            await backend.aclose()
    changes = _count(engine, select(func.count()).where(col(AuditRecord.event) == "judge.changed"))
    current = await store.judge_digests.current("ollama:m")
    assert backend.tags_away
    assert changes == 0, f"a moment without /api/tags recorded {changes} change(s) of model"
    assert outcome.run.judge_digest is None, outcome.run.judge_digest
    assert current is not None and current.digest == "abc123", current


async def test_a_llama_cpp_server_whose_props_cannot_be_read_has_not_changed_model() -> None:
    """A llama.cpp server known by ``/props``: a completion's ``system_fingerprint`` (its
    build) is noted; ``/props`` and ``/v1/models`` then cannot be read for a moment: the
    digest learned from ``/props`` stands, and no change of model is told (the replies'
    fingerprint stands in only for a judge that reports no digest at all)."""
    told: list[DigestChange] = []

    async def listener(change: DigestChange) -> bool:
        told.append(change)
        return True

    backend = OpenAIBackend("smollm2", base_url="http://llama.test/v1", api_key="k")
    tracker = DigestTracker(refresh_seconds=0)
    tracker.listen(listener)
    try:
        with respx.mock(assert_all_called=False) as router:
            props = router.get("http://llama.test/props")
            models = router.get("http://llama.test/v1/models")
            props.return_value = httpx.Response(200, json={"model_path": "/m/a.gguf"})
            first = await tracker.current(backend)
            tracker.observe(backend, "b5123-8c2a1f")  # a completion's system_fingerprint
            props.side_effect = httpx.ConnectError("connection refused")
            models.side_effect = httpx.ConnectError("connection refused")
            during = await tracker.current(backend)
            props.side_effect = None
            models.side_effect = None
            after = await tracker.current(backend)
    finally:
        await backend.aclose()
    assert first is not None and first.startswith("props:sha256:")
    assert after == first
    assert [(c.previous, c.current) for c in told] == [(None, first)], (
        f"an unreadable /props was told as changes of model: {during=}, "
        f"{[(c.previous, c.current) for c in told]}"
    )


async def test_a_llama_cpp_server_loading_its_model_again_has_not_changed_model() -> None:
    """A llama.cpp server known by ``/props`` restarts with the same model file: while it
    loads, ``/props`` answers 503 and its listing (``/v1/models``) answers. No change of
    model is told, and the digest stays the ``props:`` one throughout."""
    told: list[DigestChange] = []

    async def listener(change: DigestChange) -> bool:
        told.append(change)
        return True

    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    path = "/models/qwen2.5-coder-1.5b-q4_k_m.gguf"
    entry = {"id": path, "object": "model", "created": 1, "owned_by": "llamacpp"}
    listing = {"object": "list", "data": [{**entry, "meta": {"n_ctx_train": 32768}}]}
    backend = OpenAIBackend("qwen", base_url="http://llama.test/v1", api_key="k")
    tracker = DigestTracker(refresh_seconds=0)
    tracker.listen(listener)
    try:
        with respx.mock(assert_all_called=False) as router:
            props = router.get("http://llama.test/props")
            router.get("http://llama.test/v1/models").respond(200, json=listing)
            props.return_value = httpx.Response(200, json={"model_path": path})
            before = await tracker.current(backend)
            props.return_value = httpx.Response(503, json=loading)
            during = await tracker.current(backend)
            props.return_value = httpx.Response(200, json={"model_path": path})
            after = await tracker.current(backend)
    finally:
        await backend.aclose()
    assert before is not None and before.startswith("props:sha256:")
    assert (during, after) == (before, before)
    assert [(c.previous, c.current) for c in told] == [(None, before)]
