"""Dependencies point one way, as the import contracts in pyproject.toml say.

api -> storage -> judge; judge knows no web or database and has no import cycle; the
application layer (api.service) knows neither litestar nor click; the command line does
not import the HTTP edge, except ``sre-judge serve``, which runs it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the product's code (the migrations are history, not design)
PRODUCT = ("judge", "api", "storage", "client")
#: past these a module or a function says why in its docstring ("Why this ... is long")
MODULE_LINES, FUNCTION_LINES = 500, 80


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 8 kept, 0 broken" in done.stdout


@pytest.mark.slow
def test_the_product_type_checks_strictly(tmp_path: Path) -> None:
    """The product (``judge/``, ``api/``, ``storage/`` and the client) is mypy-clean in
    strict mode (pyproject's ``[tool.mypy]``); the house style asks it of ``judge/`` at
    least. About 14 s from a cold cache, so in the full suite only."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _product_modules() -> Iterator[Path]:
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _outer_functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions and methods, not those nested in a function (its docstring covers them)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _outer_functions(node)


def test_a_long_module_or_function_says_why_it_is_long() -> None:
    """No size cap, but length is a choice: a module over 500 lines or a function over 80
    says why in its docstring, so a reader knows it is one concept, not a heap."""
    unexplained = []
    for path in _product_modules():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        name = path.relative_to(ROOT)
        if len(text.splitlines()) > MODULE_LINES and "is long" not in (
            ast.get_docstring(tree) or ""
        ):
            unexplained.append(f"{name}: {len(text.splitlines())} lines")
        for node in _outer_functions(tree):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > FUNCTION_LINES and "is long" not in (ast.get_docstring(node) or ""):
                unexplained.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not unexplained, "say why in the docstring (Why this ... is long):\n" + "\n".join(
        unexplained
    )
