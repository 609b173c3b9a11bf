"""MkDocs hooks of the docs site (mkdocs.yml names this file).

The pages are written for GitHub too, whose tables need a pipe inside code escaped
(`a\\|b`); Python-Markdown's tables keep pipes inside code spans apart already and would
show the backslash, so the site's copy of a table row drops it.
"""

from __future__ import annotations

from typing import Any


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page's Markdown with ``\\|`` unescaped on table rows (lines starting with ``|``)."""
    return "\n".join(
        line.replace("\\|", "|") if line.lstrip().startswith("|") else line
        for line in markdown.split("\n")
    )
