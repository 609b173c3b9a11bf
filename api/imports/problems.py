"""Import problems and the ground truths of SREGym problems (``--problems FILE``).

The problems file maps problem ids to ground truths: JSON lines or YAML of
``{problem_id, root_cause}`` (a YAML list of such mappings, or one mapping of
``problem_id: root_cause``). An empty ``root_cause`` is a healthy-cluster control, and so
is a null one (SREGym's problems have ``root_cause = None`` until one is written); an
entry without ``root_cause``, or with a key besides these two, is refused, never read as
a control. A key given twice in one entry is refused in either format.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from judge.errors import InputError
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, RepeatedKey, check_text, json_lines, load_json
from judge.yaml_text import load_yaml
from storage.scenarios import scenario_id_problem
from storage.storable import printable

__all__ = ["ImportFileError", "ImportProblem", "read_problems"]

#: the keys of an entry of a problems file
_KEYS = frozenset({"problem_id", "root_cause"})


@dataclass(frozen=True)
class ImportProblem:
    """Something that could not be imported: where (``file:line``), why, and the field
    (a CSV column, a JSON field's path) when one is to blame."""

    where: str
    message: str
    field: str | None = None

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class ImportFileError(ValueError):
    """An input that cannot be imported at all (e.g. an unreadable problems file)."""


def _entries_from_yaml(data: Any, source: str) -> list[tuple[str, Any]]:
    if isinstance(data, dict) and "problem_id" not in data:
        return [
            (f"{source}: key {key!r}", {"problem_id": key, "root_cause": v})
            for key, v in data.items()
        ]
    items = data if isinstance(data, list) else [data]
    return [(f"{source}: entry {n}", item) for n, item in enumerate(items, start=1)]


def _entries(path: Path, text: str) -> list[tuple[str, Any]]:
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            return _entries_from_yaml(load_yaml(text), path.name)
        except yaml.YAMLError as exc:
            raise ImportFileError(f"{path}: not valid YAML: {exc}") from None
    entries = []
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            entries.append((where, load_json(line)))
        except RepeatedKey as exc:
            raise ImportFileError(f"{where}: the key {exc.args[0]!r} is given twice") from None
        except ValueError as exc:  # a JSONDecodeError, or a number of too many digits
            raise ImportFileError(f"{where}: not valid JSON: {getattr(exc, 'msg', exc)}") from None
        except RecursionError:
            raise ImportFileError(f"{where}: not valid JSON: nested too deeply") from None
    return entries


def read_problems(path: Path, *, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> dict[str, str]:
    """``problem_id -> root_cause``; raises ImportFileError naming the file and entry.

    A problem id is taken without surrounding spaces (so ``" p1 "`` is ``p1``); a root
    cause must be a ground truth a submission could send (``check_text``: no NUL, valid
    UTF-8, at most ``max_bytes``), since it becomes one for every attempt of its problem.
    An entry must give ``root_cause`` (empty or null for a healthy-cluster control) and
    nothing but it and ``problem_id``: a misspelt or missing key refuses the file.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark is no part of it
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFileError(f"{path}: cannot read: {exc}") from None
    problems: dict[str, str] = {}
    for where, entry in _entries(path, text):
        if not isinstance(entry, dict):
            raise ImportFileError(f"{where}: expected a mapping with problem_id and root_cause")
        unknown = [printable(str(key)) for key in entry if key not in _KEYS]
        if unknown:
            keys = ("unknown key " if len(unknown) == 1 else "unknown keys ") + ", ".join(
                repr(key) for key in unknown
            )
            raise ImportFileError(f"{where}: {keys}: an entry has problem_id and root_cause only")
        problem_id, root_cause = entry.get("problem_id"), entry.get("root_cause")
        if not isinstance(problem_id, str) or not problem_id.strip():
            raise ImportFileError(f"{where}: problem_id must be a non-empty string")
        if "root_cause" not in entry:
            raise ImportFileError(
                f'{where}: root_cause is missing ("" or null for a healthy-cluster control)'
            )
        if root_cause is None:  # as SREGym leaves a problem's root_cause unwritten
            root_cause = ""
        if not isinstance(root_cause, str):
            raise ImportFileError(f"{where}: root_cause must be a string")
        try:
            check_text(problem_id, field="problem_id", max_bytes=max_bytes)
            check_text(root_cause, field="root_cause", max_bytes=max_bytes)
        except InputError as exc:
            raise ImportFileError(f"{where}: {exc}") from None
        problem_id = problem_id.strip()
        refused = scenario_id_problem(problem_id)
        if refused is not None:  # each problem is registered as a scenario of that id
            raise ImportFileError(f"{where}: problem_id {problem_id!r}: {refused}")
        if problem_id in problems and problems[problem_id] != root_cause:
            raise ImportFileError(f"{where}: problem {problem_id!r} is given twice, differently")
        problems[problem_id] = root_cause
    return problems
