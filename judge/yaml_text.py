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
A mapping that gives one key twice is refused (:class:`RepeatedYamlKey`, a
``yaml.YAMLError``), where PyYAML would keep the key's last value, as JSON handed in is
(:func:`judge.inputs.no_repeated_keys`); a key merged in with ``<<`` and given again is
an override, not a repetition.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from judge.inputs import RepeatedKey

__all__ = ["LOADER", "RepeatedYamlKey", "load_yaml"]

_MERGE = "tag:yaml.org,2002:merge"


class RepeatedYamlKey(ConstructorError, RepeatedKey):
    """A YAML mapping gives one key twice: ``args[0]`` is the key, ``path`` where the
    mapping is (as :class:`judge.inputs.RepeatedKey`'s), ``problem_mark`` the line and
    column of the second."""

    def __init__(self, key: Any, mark: Mark | None, mapping: Node) -> None:
        ConstructorError.__init__(
            self, problem=f"the key {key!r} is given twice in one mapping", problem_mark=mark
        )
        self.args = (key,)
        self.mapping = mapping


class _OneValuePerKey(SafeConstructor):
    """What a safe loader adds to refuse a mapping that gives one key twice: each
    mapping's own keys are compared when it is first flattened (before any ``<<`` merges
    keys into it; a merged mapping is flattened again, already merged)."""

    _checked: set[Node]

    def construct_document(self, node: Node) -> Any:
        """The document's value; a repeated key also names where its mapping is."""
        self._checked = set()
        try:
            return super().construct_document(node)
        except RepeatedYamlKey as exc:
            exc.path = _place(node, exc.mapping)
            raise

    def flatten_mapping(self, node: MappingNode) -> None:
        """Refuse a key the mapping gives twice, then merge as the safe loader does."""
        if node not in self._checked:
            self._checked.add(node)
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE:
                    key = self.construct_object(key_node)
                    if key in seen:
                        raise RepeatedYamlKey(key, key_node.start_mark, node)
                    seen.add(key)
        super().flatten_mapping(node)


class _PureLoader(_OneValuePerKey, yaml.SafeLoader):
    """The pure Python safe loader, one value per key."""


#: the safe loader, one value per key: libyaml's when PyYAML was built with it
LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = _PureLoader
if yaml.__with_libyaml__:

    class _LibyamlLoader(_OneValuePerKey, yaml.CSafeLoader):
        """libyaml's safe loader, one value per key."""

    LOADER = _LibyamlLoader


def _place(document: Node, target: Node) -> tuple[str | int, ...]:
    """The keys (as written) and list positions that lead from ``document`` to the node
    ``target``: each node visited once, however many aliases name it (a document of
    aliases of aliases names exponentially many places), without recursion."""
    stack: list[tuple[Node, tuple[str | int, ...]]] = [(document, ())]
    visited: set[Node] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if node in visited:
            continue
        visited.add(node)
        if isinstance(node, SequenceNode):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(node.value))))
        elif isinstance(node, MappingNode):
            pairs = [(k.value, v) for k, v in node.value if isinstance(k, ScalarNode)]
            stack.extend((v, (*path, k)) for k, v in reversed(pairs))
    return ()


def load_yaml(text: str) -> Any:
    """The value of the one YAML document in ``text`` (None when empty); plain data
    only: mappings, lists, strings, numbers, booleans, null, dates. Raises
    ``yaml.YAMLError``."""
    try:
        return yaml.load(text, Loader=LOADER)
    except RecursionError:
        raise yaml.YAMLError("the document is nested too deeply") from None
