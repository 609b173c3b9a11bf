"""Reading YAML text: the safe loader, through libyaml when PyYAML has it.

Every YAML the service reads goes through :func:`load_yaml`: rubrics, the failure-tag
vocabulary, scenario loads and the problems file of an import. PyYAML's wheels carry
libyaml, whose safe loader builds the same values about ten times faster than the pure
Python one (``bench/yaml_loads.py``: a 2.8 MB scenario load parsed in 127 ms instead of
1,735 ms); where a build of PyYAML lacks it, the pure Python safe loader reads the same
documents.
Both raise ``yaml.YAMLError`` naming the line and column at fault; a document nested
past what the loader takes is one too (libyaml stops at 1,000 levels; the pure Python
loader ran out of stack below that, a ``RecursionError`` that no caller expected).
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["LOADER", "load_yaml"]

#: the safe loader: libyaml's when PyYAML was built with it
LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)


def load_yaml(text: str) -> Any:
    """The value of the one YAML document in ``text`` (None when empty); plain data
    only: mappings, lists, strings, numbers, booleans, null, dates. Raises
    ``yaml.YAMLError``."""
    try:
        return yaml.load(text, Loader=LOADER)
    except RecursionError:
        raise yaml.YAMLError("the document is nested too deeply") from None
