"""``client.scenarios`` and ``client.imports`` against a real ``sre-judge serve``.

Scenarios: a bulk load (a file, text, a list; again changes nothing), pages with filters
and cursors, a fixed ground truth as a new version with If-Match, the old version still
readable, a stale version refused. Imports: an SREGym folder and a JSONL file uploaded,
the jobs followed to their end, a strict job failing on a bad line.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sre_judge_client import (
    AsyncClient,
    Client,
    Forbidden,
    InvalidRequest,
    NotFound,
    PreconditionFailed,
)

from tests.client.conftest import Served
from tests.support.sregym_results import write_sregym_results

pytestmark = pytest.mark.slow


def _load(prefix: str, n: int) -> list[dict[str, object]]:
    return [
        {"id": f"{prefix}/p{i}", "ground_truth": f"fault {i}", "set": "held-out" if i % 2 else None}
        for i in range(n)
    ]


def test_scenarios_load_list_by_page_version_and_update(
    serve: Callable[[str], Served], tmp_path: Path
) -> None:
    served, prefix = serve("pass"), f"ds-{uuid.uuid4().hex[:8]}"
    items = [{k: v for k, v in item.items() if v is not None} for item in _load(prefix, 5)]
    jsonl = tmp_path / "scenarios.jsonl"
    jsonl.write_text("".join(json.dumps(item) + "\n" for item in items[:3]))
    with Client(served.url, served.admin) as admin:
        first = admin.scenarios.load(jsonl)
        assert [i.outcome for i in first.items] == ["created"] * 3
        yaml_text = "".join(
            f"- id: {i['id']}\n  ground_truth: {i['ground_truth']}\n"
            f"  set: {i.get('set', 'default')}\n"
            for i in items[3:]
        )
        assert admin.scenarios.load(yaml_text, format="yaml").counts == {"created": 2}
        again = admin.scenarios.load(items)
        assert {i.outcome for i in again.items} == {"unchanged"}
        with pytest.raises(ValueError, match="format="):
            admin.scenarios.load("id: x")

        pages = list(admin.scenarios.pages(id_prefix=prefix, page_size=2))
        assert [len(p.items) for p in pages] == [2, 2, 1] and pages[-1].next_cursor is None
        ids = [s.id for s in admin.scenarios.list(id_prefix=prefix, page_size=2)]
        assert ids == sorted(i["id"] for i in items)
        held = [s.id for s in admin.scenarios.list(id_prefix=prefix, scenario_set="held-out")]
        assert held == [f"{prefix}/p1", f"{prefix}/p3"]
        resumed = next(
            admin.scenarios.pages(id_prefix=prefix, page_size=2, cursor=pages[0].next_cursor)
        )
        assert resumed.items == pages[1].items

        target = f"{prefix}/p0"
        read = admin.scenarios.get(target)
        assert (read.version, read.ground_truth) == (1, "fault 0")
        fixed = admin.scenarios.update(target, ground_truth="fault zero", revision=read.revision,
                                       note="typo")  # fmt: skip
        assert (fixed.outcome, fixed.version, fixed.revision) == ("new_version", 2, 2)
        with pytest.raises(PreconditionFailed):
            admin.scenarios.update(target, ground_truth="fault nought", revision=1)
        titled = admin.scenarios.update(target, title="Port typo")  # reads the revision first
        assert (titled.outcome, titled.changed, titled.version) == ("updated", ["title"], 2)
        assert titled.revision == 3  # a change in place moves the revision, not the version
        with pytest.raises(PreconditionFailed):  # read before the title: stale
            admin.scenarios.update(target, ground_truth="fault nought", revision=2)
        with pytest.raises(PreconditionFailed):  # an older client's version: stale too
            admin.scenarios.update(target, ground_truth="fault nought", version=2)
        versions = admin.scenarios.versions(target)
        assert versions.current_version == 2
        assert [(v.version, v.ground_truth, v.note) for v in versions.items] == [
            (1, "fault 0", ""),
            (2, "fault zero", "typo"),
        ]
        assert admin.scenarios.version(target, 1).ground_truth == "fault 0"
        with pytest.raises(NotFound):
            admin.scenarios.get(f"{prefix}/nope")
    with Client(served.url, served.submitter) as submitter:
        [mine] = list(submitter.scenarios.list(id_prefix=target))
        assert mine.ground_truth is None and "ground_truth" in mine.withheld
        with pytest.raises(Forbidden):
            submitter.scenarios.load(items)


def test_the_async_client_has_the_same_scenario_calls(serve: Callable[[str], Served]) -> None:
    served, prefix = serve("pass"), f"dsa-{uuid.uuid4().hex[:8]}"
    items = [{k: v for k, v in item.items() if v is not None} for item in _load(prefix, 3)]

    async def main() -> None:
        async with AsyncClient(served.url, served.admin) as admin:
            assert (await admin.scenarios.load(items)).counts == {"created": 3}
            pages = [p async for p in admin.scenarios.pages(id_prefix=prefix, page_size=2)]
            assert [len(p.items) for p in pages] == [2, 1]
            assert [s.id async for s in admin.scenarios.list(id_prefix=prefix)] == [
                i["id"] for i in items
            ]
            done = await admin.scenarios.update(f"{prefix}/p2", ground_truth="changed")
            assert (done.outcome, done.version) == ("new_version", 2)
            assert (await admin.scenarios.version(f"{prefix}/p2", 1)).ground_truth == "fault 2"
            assert len((await admin.scenarios.versions(f"{prefix}/p2")).items) == 2

    asyncio.run(main())


def test_imports_upload_a_folder_or_jsonl_and_follow_the_job(
    serve: Callable[[str], Served], tmp_path: Path
) -> None:
    served = serve("pass")
    fixture = write_sregym_results(tmp_path)
    (fixture.root / "problems.jsonl").write_bytes(fixture.problems_file.read_bytes())
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    good = {"diagnosis": "the pod ran out of memory", "ground_truth": "OOM", "agent": agent}
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps(good) + "\nnot json\n")
    with Client(served.url, served.admin) as admin:
        job = admin.imports.upload(fixture.root)
        assert (job.kind, job.archive, job.state) == ("sregym", "tar.gz", "queued")
        seen = list(admin.imports.follow(job.id, poll=0.1, timeout=60))
        assert seen[-1].state == "done" and all(not j.finished for j in seen[:-1])
        assert (seen[-1].total, seen[-1].report["sregym_verdicts"]) == (45, 42)

        lines = admin.imports.wait(admin.imports.upload(history).id, poll=0.1, timeout=60)
        assert (lines.state, lines.report["submissions"]) == ("done", 1)
        assert [(e.where, "not valid JSON" in e.message) for e in lines.errors] == [
            ("line 2", True)
        ]
        strict = admin.imports.upload(history.read_bytes(), strict=True)
        failed = admin.imports.wait(strict.id, poll=0.1, timeout=60)
        assert (failed.state, failed.strict, len(failed.errors)) == ("failed", True, 1)
        assert failed.error == "strict: 1 problems; nothing imported"
        with pytest.raises(InvalidRequest) as refused:
            admin.imports.upload(fixture.root, strict=True)
        assert refused.value.field == "strict"
        with pytest.raises(NotFound):
            admin.imports.get("nope")

    async def follow() -> str:
        async with AsyncClient(served.url, served.admin) as admin:
            started = await admin.imports.upload(history)
            return (await admin.imports.wait(started.id, poll=0.1, timeout=60)).report[
                "already_imported"
            ]

    assert asyncio.run(follow()) == 1
