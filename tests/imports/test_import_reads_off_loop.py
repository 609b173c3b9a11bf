"""An import reads its rows (parsing, checks, redaction: about 1.5 ms an SREGym row with a
trace) in worker threads, never on the event loop the graders and requests share; and a
job's total is counted exactly without reading the rows twice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.imports import jobs, use_cases
from api.imports.jsonl import count_jsonl_items, read_jsonl
from api.imports.problems import ImportProblem
from api.imports.sregym import read_sregym_folder, sregym_outline
from tests.imports.jobs import finished, tar_gz
from tests.support.sregym_results import PROBLEMS, write_sregym_results

IMPORTS = "/v1/imports"


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def on_loop(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each row an import reads and each whole-file pass it makes: whether it ran in
    a thread that runs an event loop."""
    noted: list[bool] = []

    def rows(read: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def watched(*args: Any, **kwargs: Any) -> Iterator[Any]:
            for item in read(*args, **kwargs):
                noted.append(_on_a_loop())
                yield item

        return watched

    def whole(read: Callable[..., Any]) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            noted.append(_on_a_loop())
            return read(*args, **kwargs)

        return watched

    monkeypatch.setattr(use_cases, "read_sregym_folder", rows(read_sregym_folder))
    monkeypatch.setattr(use_cases, "read_jsonl", rows(read_jsonl))
    for name in ("sregym_outline", "count_jsonl_items", "read_problems"):
        monkeypatch.setattr(jobs, name, whole(getattr(jobs, name)))
    return noted


def _archive(tmp_path: Path, *, with_problems: bool) -> bytes:
    fixture = write_sregym_results(tmp_path, traces=True)
    root = fixture.root
    entries = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}
    if with_problems:
        entries["problems.jsonl"] = fixture.problems_file.read_bytes()
    return tar_gz(entries)


async def test_archives_and_json_lines_are_read_off_the_event_loop(
    api_client: Any, tokens: Any, tmp_path: Path, on_loop: list[bool]
) -> None:
    admin = await tokens("admin")
    good = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}
    lines = f"{json.dumps(good)}\nnot json\n{json.dumps({**good, 'agent': 'b'})}\n".encode()
    uploads = [
        ({"Content-Type": "application/gzip"}, _archive(tmp_path / "a", with_problems=True)),
        ({"Content-Type": "application/x-ndjson"}, lines),
        ({"Content-Type": "application/x-ndjson"}, lines),  # strict: one batch of every line
    ]
    async with api_client(judge="scripted:pass") as client:
        for problem_id, truth in PROBLEMS.items():  # the archive without a problems file
            body = {"id": problem_id, "ground_truth": truth or "[control] no fault"}
            assert (await client.post("/v1/scenarios", json=body, headers=admin)).is_success
        uploads.append(
            ({"Content-Type": "application/gzip"}, _archive(tmp_path / "b", with_problems=False))
        )
        done = []
        for n, (kind, body) in enumerate(uploads):
            params = {"strict": "true"} if n == 2 else {}
            created = await client.post(
                IMPORTS, content=body, params=params, headers={**admin, **kind}
            )
            assert created.status_code == 202, created.text
            done.append(await finished(client, created.headers["location"], admin))
    assert [job["state"] for job in done] == ["done", "done", "failed", "done"], done
    assert [job["total"] for job in done] == [45, 3, 3, 45]
    # 45 + 3 + 3 + 45 rows, and the passes: an outline or a count each, the problems file
    assert len(on_loop) >= 96 + 4 + 1, len(on_loop)
    assert not any(on_loop), f"{sum(on_loop)} of {len(on_loop)} reads ran on an event loop"


def test_a_folder_s_count_and_problem_ids_match_what_its_read_yields(tmp_path: Path) -> None:
    fixture = write_sregym_results(tmp_path, traces=True)
    run = fixture.root / "2025-06-02_12-00-00" / "agent-x"
    (run / "p1").mkdir(parents=True)
    # a row without a problem id, a row refused for its figures, then a file that stops
    # being UTF-8 after one row: each is one item of the read, as the count says
    (run / "p1" / "results.csv").write_text(
        "problem_id,attempt,TTL\n,1,3\nbroken_problem-1,2,1e999\n", encoding="utf-8"
    )
    (run / "p2").mkdir()
    (run / "p2" / "results.csv").write_bytes(
        b"problem_id,attempt\nlate_problem-1,1\nlate_problem-1,2\xff\xfe\n"
    )
    items = list(read_sregym_folder(fixture.root))
    outline = sregym_outline(fixture.root)
    assert outline.items == len(items) > 45
    named = {item.problem_id for item in items if hasattr(item, "problem_id")}
    assert named <= outline.problem_ids
    assert set(PROBLEMS) | {"broken_problem-1"} <= outline.problem_ids


def test_a_json_lines_count_matches_what_its_read_yields(tmp_path: Path) -> None:
    good = json.dumps({"diagnosis": "d" * 100, "ground_truth": "g"})
    plain, faulty = tmp_path / "plain.jsonl", tmp_path / "faulty.jsonl"
    plain.write_text(f"\ufeff{good}\n\n   \nnot json\n{good}\n[1, 2]", encoding="utf-8")
    # a line that is not UTF-8 is refused alone: the lines around it are read
    faulty.write_bytes(f"{good}\n".encode() * 100 + b"\xff\xfe\n{}\n")
    assert count_jsonl_items(plain) == len(list(read_jsonl(plain))) == 4
    items = list(read_jsonl(faulty))
    assert count_jsonl_items(faulty) == len(items) == 102
    refused = items[100]
    assert isinstance(refused, ImportProblem) and refused.where == "line 101"
    assert "not valid UTF-8" in refused.message
