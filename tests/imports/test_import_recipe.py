"""The HTTP import recipe of docs/imports-regrades.md, run as written:
``tar czf results.tgz -C results .`` on a synthetic SREGym results folder, the archive
posted to ``/v1/imports``.

GNU tar writes that archive's names as ``./`` plus the path, with a ``./`` entry first
(the folder itself); both are inside the archive and accepted, while a ``..`` behind the
prefix is still refused.
"""

from __future__ import annotations

import asyncio
import io
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from api.sregym_archive import UnsafeArchive, check_archive
from tests.support.sregym_results import write_sregym_results

RECIPE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "imports-regrades.md"
CSV = b"problem_id,attempt\np,1\n"


def readme_tar_recipe() -> list[str]:
    """The ``tar czf ...`` line of the docs' "Imports over HTTP" block, comment cut."""
    section = RECIPE_PAGE.read_text(encoding="utf-8").split("### Imports over HTTP", 1)[1]
    line = re.search(r"^tar czf .*$", section, flags=re.MULTILINE)
    assert line is not None, "the docs' import recipe has no tar line"
    return shlex.split(line.group(0).split("#", 1)[0])


def _tar(entries: list[tarfile.TarInfo], data: bytes = CSV) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info in entries:
            if info.isdir():
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


def test_the_archive_folder_and_dot_slash_names_are_inside_the_archive() -> None:
    archive = _tar([_entry(".", tarfile.DIRTYPE), _entry("./run/a/p/results.csv")])
    assert check_archive(archive, "tar.gz") == 1


def test_a_run_folder_named_by_its_time_is_inside_the_archive_and_a_drive_is_not() -> None:
    """A colon is fine in a name (a run folder named by its time), except as a drive,
    ``C:``, for a first folder."""
    assert check_archive(_tar([_entry("2025-06-01T12:00:00/a/p/results.csv")]), "tar.gz") == 1
    with pytest.raises(UnsafeArchive, match="a path on a drive"):
        check_archive(_tar([_entry("C:/a/p/results.csv")]), "tar.gz")


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([_entry("./../evil.csv")], ".."),
        ([_entry("./run/../../evil.csv")], ".."),
        ([_entry(".")], "an empty name"),  # a file needs a name; only the folder is "."
        ([_entry("./")], "an empty name"),
    ],
    ids=["dot-slash-dot-dot", "dot-dot-inside", "file-named-dot", "file-named-dot-slash"],
)
def test_dot_names_that_leave_or_name_nothing_are_still_refused(
    entries: list[tarfile.TarInfo], reason: str
) -> None:
    with pytest.raises(UnsafeArchive, match=re.escape(reason)):
        check_archive(_tar(entries), "tar.gz")


def _run_the_recipe(base: Path) -> bytes:
    """The archive the docs' tar line makes of a results folder under ``base``."""
    fixture = write_sregym_results(base)
    shutil.copy(fixture.problems_file, fixture.root / "problems.jsonl")  # as the docs say
    recipe = readme_tar_recipe()
    assert recipe == ["tar", "czf", "results.tgz", "-C", "results", "."]
    subprocess.run(recipe, cwd=base, check=True, capture_output=True, timeout=60)
    return (base / "results.tgz").read_bytes()


@pytest.mark.skipif(shutil.which("tar") is None, reason="needs the tar command")
async def test_the_readme_recipe_imports_a_results_folder(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    archive = _run_the_recipe(tmp_path)
    with tarfile.open(fileobj=io.BytesIO(archive)) as written:
        assert {n for n in written.getnames() if not n.startswith("./")} == {"."}
    admin = await tokens("admin")
    async with api_client() as client:
        headers = {**admin, "Content-Type": "application/gzip"}
        created = await client.post("/v1/imports", content=archive, headers=headers)
        assert created.status_code == 202, created.text
        for _ in range(300):
            job = (await client.get(created.headers["location"], headers=admin)).json()
            if job["state"] in ("done", "failed"):
                break
            await asyncio.sleep(0.05)
    assert job["state"] == "done" and job["errors"] == [], job
    assert job["total"] == job["done"] == 45
    assert job["report"]["submissions"] == 45
