"""What a text must contain for a regular expression to match it: a cheap, sound prefilter.

The injection screen (``judge.injection``) runs some sixty case-insensitive patterns on
several forms of each diagnosis; Python's ``re`` scans every position of the text for
each of them (a case-insensitive pattern has no literal prefix to jump to). Most
patterns need a word that ordinary diagnoses never hold (``disregard``, ``the
grader``). :func:`required` reads a pattern's parse tree and derives that need, as in
RE2's ``FilteredRE2``: a condition over literal substrings (``all of``, ``any of``),
which the text must meet for the pattern to match. :class:`Prefilter` checks the
conditions of a list of patterns with one scan of the text, and a pattern whose
condition fails is not run: the result is the same, at a fraction of the cost.

The condition is sound for text that is case folded (``str.casefold``), the only text
the screen searches: the literals are lowered, and :func:`prepared` maps the letters
that a case-insensitive pattern still equates with another after folding (``ı`` with
``i``; a test checks every code point). Whatever the tree holds that is not understood
(a back reference, inline flags) counts as "no requirement": the pattern then always
runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

__all__ = [
    "ALWAYS",
    "FOLD_EQUIVALENTS",
    "Condition",
    "Prefilter",
    "clauses",
    "prepared",
    "required",
]

#: a condition: ``ALWAYS`` (no requirement), a substring, or ("all"|"any", conditions)
Condition = str | tuple[str, tuple[Any, ...]] | None
#: no requirement: the pattern may match any text
ALWAYS: Condition = None
#: characters of case-folded text that a case-insensitive pattern equates with another
#: (``re``'s own equivalences that folding leaves): mapped before the substring tests
FOLD_EQUIVALENTS = {"\u0131": "i"}
#: the most strings an "exactly one of" set may hold before it becomes a condition
_EXACT_LIMIT = 64
#: substrings are cut to this many characters: fewer to look for, hardly less selective
#: (a long one gives two, its start and its end)
_ATOM_CHARS = 6
#: clauses with a shorter substring than this are left out when a pattern has others
_STRONG = 3
#: the largest character class read as a set of literals
_CLASS_LIMIT = 32
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


@dataclass(frozen=True)
class _Info:
    """A node's match: exactly one of ``exact`` (when known), else meeting ``condition``."""

    exact: frozenset[str] | None = None
    condition: Condition = field(default=ALWAYS)

    def as_condition(self) -> Condition:
        return _any(self.exact) if self.exact is not None else self.condition


def _any(strings: frozenset[str]) -> Condition:
    """Any of ``strings``; a string holding another adds nothing; "" is always there."""
    if "" in strings:
        return ALWAYS
    kept = sorted(_subsumed(strings))
    return kept[0] if len(kept) == 1 else ("any", tuple(kept))


def _all(conditions: list[Condition]) -> Condition:
    kept = tuple(dict.fromkeys(c for c in conditions if c is not ALWAYS))
    if not kept:
        return ALWAYS
    return kept[0] if len(kept) == 1 else ("all", kept)


def _char(code: int) -> frozenset[str] | None:
    lowered = chr(code).lower()
    return frozenset({lowered}) if len(lowered) == 1 else None


def _class(items: list[tuple[Any, Any]]) -> _Info:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            codes = [av]
        elif op is sre.RANGE and av[1] - av[0] < _CLASS_LIMIT:
            codes = list(range(av[0], av[1] + 1))
        else:  # a category, a negation, a wide range
            return _Info()
        for code in codes:
            one = _char(code)
            if one is None:
                return _Info()
            chars |= one
    return _Info(frozenset(chars)) if len(chars) <= _CLASS_LIMIT else _Info()


def _node(op: Any, av: Any) -> _Info:
    if op is sre.LITERAL:
        one = _char(av)
        return _Info(one) if one is not None else _Info()
    if op is sre.IN:
        return _class(av)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return _Info(frozenset({""}))  # consumes nothing
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        return _sequence(sub) if not (add_flags or del_flags) else _Info()
    if op is sre.ATOMIC_GROUP:
        return _sequence(av)
    if op is sre.BRANCH:
        return _branch([_sequence(sub) for sub in av[1]])
    if op in _REPEATS:
        low, high, sub = av
        inner = _sequence(sub)
        if high == 1 and inner.exact is not None:
            return _Info(inner.exact | ({""} if low == 0 else set()))
        return _Info(condition=inner.as_condition()) if low > 0 else _Info()
    return _Info()  # any character, a negated literal, a back reference...


def _branch(options: list[_Info]) -> _Info:
    if all(o.exact is not None for o in options):
        union = frozenset().union(*(o.exact for o in options if o.exact is not None))
        if len(union) <= _EXACT_LIMIT:
            return _Info(union)
    conditions = [o.as_condition() for o in options]
    if any(c is ALWAYS for c in conditions):
        return _Info()
    return _Info(condition=("any", tuple(dict.fromkeys(conditions))))


def _sequence(items: Any) -> _Info:
    """A concatenation: literals multiplied out while few, else all parts required."""
    exact: frozenset[str] | None = frozenset({""})
    parts: list[Condition] = []
    for op, av in items:
        info = _node(op, av)
        if info.exact is None:
            if exact is not None:
                parts.append(_any(exact))
            parts.append(info.condition)
            exact = None
            continue
        if exact is None:
            exact = info.exact
        elif len(exact) * len(info.exact) <= _EXACT_LIMIT:
            exact = frozenset(a + b for a in exact for b in info.exact)
        else:
            parts.append(_any(exact))
            exact = info.exact
    if not parts:
        return _Info(exact)
    if exact is not None:
        parts.append(_any(exact))
    return _Info(condition=_all(parts))


def required(pattern: str) -> Condition:
    """What case-folded text must contain for ``pattern`` (case-insensitive) to match it."""
    return _sequence(_parser.parse(pattern, re.IGNORECASE)).as_condition()


def prepared(folded: str) -> str:
    """``folded`` as the substring tests read it: the fold equivalents mapped."""
    for char, letter in FOLD_EQUIVALENTS.items():
        if char in folded:
            folded = folded.replace(char, letter)
    return folded


def clauses(condition: Condition, *, longest: int = _ATOM_CHARS) -> tuple[frozenset[str], ...]:
    """``condition`` weakened to "each clause has one of its substrings in the text".

    Weakening keeps it sound (whatever meets the condition meets the clauses): a
    substring longer than ``longest`` characters is replaced by its start and its end
    (two clauses: both are in a text that holds it), and "any of" parts that need more
    than one clause each keep their best clause (the one whose shortest substring is
    longest, hence rarest).
    """
    if condition is None:  # ALWAYS
        return ()
    if isinstance(condition, str):
        return _cut({condition}, longest)
    how, parts = condition
    if how == "all":
        found = [clause for part in parts for clause in clauses(part, longest=longest)]
        return tuple(dict.fromkeys(found))
    chosen: set[str] = set()
    for part in parts:
        if isinstance(part, str):
            chosen.add(part)
            continue
        options = clauses(part, longest=longest)
        if not options:
            return ()  # one way to match needs nothing
        chosen |= max(options, key=lambda clause: min(map(len, clause)))
    return _cut(chosen, longest)


def _cut(strings: set[str], longest: int) -> tuple[frozenset[str], ...]:
    """ "Any of ``strings``" as clauses of short substrings: a text holding one of them
    holds its first and its last ``longest`` characters."""
    if all(len(s) <= longest for s in strings):
        return (_subsumed(strings),)
    heads = _subsumed({s[:longest] for s in strings})
    tails = _subsumed({s[-longest:] for s in strings})
    return (heads, tails) if heads != tails else (heads,)


def _subsumed(strings: set[str] | frozenset[str]) -> frozenset[str]:
    """``strings`` without those that hold another (finding it finds the shorter too)."""
    kept: list[str] = []
    for s in sorted(strings, key=len):
        if not any(k in s for k in kept):
            kept.append(s)
    return frozenset(kept)


def _strong(found: tuple[frozenset[str], ...]) -> tuple[frozenset[str], ...]:
    """The clauses worth looking for: those without very short substrings (``it``, ``:``),
    else the best one. Fewer clauses are still sound, and cheaper: a short substring
    is in nearly every text."""
    strong = tuple(clause for clause in found if min(map(len, clause)) >= _STRONG)
    return strong or tuple(sorted(found, key=lambda clause: -min(map(len, clause))))[:1]


def _trie(atoms: set[str]) -> str:
    """A regex matching, at a position, the longest of ``atoms`` that starts there."""
    root: dict[str, Any] = {}
    for atom in atoms:
        node = root
        for char in atom:
            node = node.setdefault(char, {})
        node[""] = {}
    return _branches(root)


def _branches(node: dict[str, Any]) -> str:
    options = [re.escape(char) + _branches(child) for char, child in sorted(node.items()) if char]
    if not options:
        return ""
    body = options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"
    return f"(?:{body}|)" if "" in node else body  # the longer atom first


class Prefilter:
    """Which of a list of case-insensitive patterns may match a folded text.

    Built once: each pattern's clauses, one regex that finds, from each position, the
    longest substring any clause names (a trie: one C scan of the text), and for each
    substring the clauses it meets, with those of its prefixes. A pattern may match a
    text when every one of its clauses met a substring there.
    """

    def __init__(self, patterns: list[str]) -> None:
        self._owner: list[int] = []
        meets: dict[str, set[int]] = {}
        for n, pattern in enumerate(patterns):
            for clause in _strong(clauses(required(pattern))):
                for atom in clause:
                    meets.setdefault(atom, set()).add(len(self._owner))
                self._owner.append(n)
        self._always = {n for n in range(len(patterns)) if n not in self._owner}
        self._clause_count = [self._owner.count(n) for n in range(len(patterns))]
        #: each substring's clauses, with those its prefixes meet (found with it)
        self._meets = {
            atom: frozenset().union(
                *(meets[atom[:k]] for k in range(1, len(atom) + 1) if atom[:k] in meets)
            )
            for atom in meets
        }
        self._scan = re.compile(_trie(set(meets)))

    def candidates(self, folded: str) -> set[int]:
        """The indexes of the patterns that may match ``folded`` (the others cannot)."""
        text = prepared(folded)
        met: set[int] = set()
        at = 0
        while (found := self._scan.search(text, at)) is not None:
            met |= self._meets[found.group()]
            at = found.start() + 1
        counts: dict[int, int] = {}
        for clause in met:
            owner = self._owner[clause]
            counts[owner] = counts.get(owner, 0) + 1
        ready = {n for n, count in counts.items() if count == self._clause_count[n]}
        return ready | self._always
