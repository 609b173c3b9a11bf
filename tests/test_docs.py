"""The README and the docs site: the site builds offline with no broken link, the README's
links resolve, its first screen is the quick start and the tour, and its two commands
stay as CI and users run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.service_process import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: the quick start's two lines, byte for byte: users copy them and `.ci/run` runs the second
QUICK_START = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/sre-judge serve\n"
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
    ".venv/bin/pytest --db all -n auto --dist loadfile\n"
)
#: how many lines a reader sees before scrolling, about
FIRST_SCREEN_LINES = 60
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: markup that would load something from another host when a page is viewed
_REMOTE_ASSET = re.compile(r"""<(?:script|link|img)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//""")


#: what the tour's script prints last: the grading after the override, as JSON
_TOUR_CHECK = 'curl -s "$API/gradings/$ID" -H "$AUTH"'


def tour_script(port: int) -> str:
    """The README tour's ``sh`` blocks as one script, against ``port``, with this venv."""
    text = README.read_text(encoding="utf-8")
    tour = text.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    blocks = [block.split("```", 1)[0] for block in tour.split("```sh\n")[1:]]
    script = "\n".join(blocks).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    script = script.replace(".venv/bin/sre-judge", str(Path(sys.executable).parent / "sre-judge"))
    serve = next(line for line in script.splitlines() if " serve &" in line)
    started = (
        f"{serve}\nSERVE=$!; trap 'kill $SERVE; wait $SERVE' EXIT\n"
        f"for _ in $(seq 120); do curl -sf -o /dev/null http://127.0.0.1:{port}/healthz "
        "&& break; sleep 0.5; done"
    )
    return "set -euo pipefail\n" + script.replace(serve, started) + f"\necho\n{_TOUR_CHECK}\n"


@pytest.mark.slow
def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRE_JUDGE_")}
    done = subprocess.run(
        ["bash", "-c", tour_script(port)],
        cwd=tmp_path,
        env={**env, "SRE_JUDGE_PORT": str(port)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    grading = json.loads(done.stdout.strip().splitlines()[-1])
    assert grading["passed"] is True and grading["held"] is False
    assert [o["verdict"] for o in grading["overrides"]] == ["pass"]
    assert "Pass rates" in done.stdout or '"pass_rate": 1.0' in done.stdout


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `mkdocs build --strict` writes it (strict: any broken link fails it)."""
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_the_site_builds_strictly_with_every_page(built_site: Path) -> None:
    pages = {p.stem for p in DOCS.glob("*.md")}
    built = {p.stem for p in built_site.glob("*.html")}
    assert pages <= built, f"pages not built: {sorted(pages - built)}"


def test_the_site_loads_nothing_from_another_host(built_site: Path) -> None:
    remote = [
        f"{page.name}: {match.group(0)}"
        for page in built_site.rglob("*.html")
        for match in _REMOTE_ASSET.finditer(page.read_text(encoding="utf-8"))
    ]
    assert not remote, remote


def test_every_screenshot_is_shown_on_a_page() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.glob("*.md"))
    unused = [png.name for png in DOCS.glob("*.png") if f"({png.name})" not in text]
    assert not unused, f"screenshots no page shows: {unused}"


def test_the_readmes_relative_links_resolve() -> None:
    broken = []
    for target in _LINK.findall(README.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (ROOT / target.split("#", 1)[0]).exists():
            broken.append(target)
    assert not broken, f"README links to missing files: {broken}"


def test_the_quick_start_keeps_its_two_commands_and_ci_runs_the_second() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert block == QUICK_START
    test_command = QUICK_START.splitlines()[1].replace("pip install -e", "pip install -q -e")
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_first_screen_is_the_quick_start_and_the_tour() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    headings = [line for line in lines[:FIRST_SCREEN_LINES] if line.startswith("## ")]
    assert headings[:2] == ["## Quick start", "## A five-minute tour"], headings
    tour = lines.index("## A five-minute tour")
    rest = [i for i, line in enumerate(lines) if line.startswith("## ") and i > tour]
    assert rest and rest[0] <= FIRST_SCREEN_LINES, "the tour runs past the first screen"


def test_no_page_speaks_of_issues() -> None:
    pages = [README, *DOCS.glob("*.md")]
    mention = re.compile(r"\bissues?\b[^.\n]{0,30}|#\d+\b", re.IGNORECASE)
    found = [
        f"{page.name}: {m.group(0)}"
        for page in pages
        for m in mention.finditer(page.read_text(encoding="utf-8"))
    ]
    assert not found, found
