"""The failure-tag vocabulary file: ``tag: description`` per line of YAML."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from judge.errors import JudgeError
from judge.yaml_text import load_yaml

__all__ = ["VocabularyError", "load_vocabulary"]

_TAG = re.compile(r"^[a-z0-9][a-z0-9-]{1,63}$")


class VocabularyError(JudgeError):
    """The vocabulary file is invalid; the message names the file and the fault."""


def load_vocabulary(path: str | Path) -> dict[str, str]:
    """Tags and their descriptions; raise VocabularyError on a bad file."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise VocabularyError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise VocabularyError(f"{path}: expected a mapping of tag: description")
    for tag, description in data.items():
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise VocabularyError(f"{path}: tag {tag!r} must be lower-case words joined by -")
        if not isinstance(description, str) or not description.strip():
            raise VocabularyError(f"{path}: tag {tag!r} needs a description")
    return {str(k): str(v).strip() for k, v in data.items()}
