"""Deterministic grounding: necessary conditions for a "yes", derived from the ground truth.

A ground truth with a header, ``[fault_spec] component=<kind>/<name>; namespace=<ns> ||
<description>``, says what a correct diagnosis must mention. Two conditions are derived,
and a rubric question opts into one with ``grounding: component`` or ``grounding:
values``:

- ``component``: the diagnosis names the component (``user-service``; separators may
  differ: ``user_service``, ``user service``; a pod name such as ``user-service-7d9f``
  counts);
- ``origin_consistent``: the diagnosis points at the component, named or not: it names
  it, or every part of its name (``mongodb-geo`` as "geo's MongoDB"), or its kind where
  the kind is specific (a NetworkPolicy, a PVC; not a Deployment or a Service);
- ``values``: the diagnosis gives at least one concrete value of the change the
  description states: an environment variable name, a port or other number of two
  digits or more, a one-digit value as set ("set to 2", "scaled to 0", "the pool size
  was lowered to 2"; in the diagnosis only so, or as ``KEY=2``, "a pool size of 2"), a
  quantity with its unit (``128Mi``, ``500m``, ``30s``, ``90%``; an equal quantity
  written otherwise counts too: ``0.125Gi``, ``0.5 cores``), an image reference or tag,
  a ``key=value`` selector or setting (also written ``key: value`` or ``key value``,
  and as its value alone where the description writes that value nowhere else:
  ``nvme-gen5``, not the ``geo`` of ``app=geo``), a path, a quoted string. Values the
  fault did not set do not count (the labelling guide: "a normal value of a field that
  was not changed does not count"): those of the clauses that say what followed rather
  than what was done ("all traffic to geo on port 8083 is dropped"), the old side of a
  change ("from 512Mi to 256Mi": 512Mi; what a replacement replaced, ``nginx:1.24`` of
  "nginx:1.24 was replaced by nginx:1.25" or "replaced nginx:1.24 with nginx:1.25"; a
  former value, "(was X)", "previously X", "previously set to X" beside the change
  the fault made), a default or usual value ("default 10",
  "instead of about 40 ms"), everything after ``Affected:`` or ``Healthy:``, status and
  exit codes, and the request paths of symptoms ("/hotels returns 500");
- ``consistent_values``: no value the diagnosis reports contradicts the description's
  value of the same thing (``judge.contradictions``: a CPU request of ``200m`` where the
  ground truth says ``2.00 cores``); the failure shows both values.

These are necessary, not sufficient: passing them says nothing about correctness, but a
judge "yes" that fails one cannot be right. A failed condition becomes the answer's
:class:`judge.verdict.Veto`: the check (``grounding.<kind>``) and, in words an
adjudicator reads at a glance, what it looked for in the diagnosis. An empty ground
truth (control scenario), one without a header, or a description without values gives
no condition.

Why this module is long (about 570 lines): it is one reading, what a ground truth
requires of a diagnosis. Most of it is the reading of the description (its values, which
of them the fault set and which it did not, its lists of affected and healthy
components), which the conditions share and which has no use apart from them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from judge.contradictions import contradictions, shares_a_quantity
from judge.prompt import normalize_untrusted
from judge.rubric import Rubric
from judge.verdict import Answer, Veto

__all__ = [
    "GroundTruthFacts",
    "GroundingKind",
    "check_condition",
    "facts_of",
    "ground_answers",
    "noted_failures",
]

GroundingKind = Literal["component", "origin_consistent", "values", "consistent_values"]

_HEADER = re.compile(r"^\s*\[fault_spec\]\s*(?P<header>.*?)\s*\|\|\s*(?P<description>.*)\Z", re.S)
_VERSION = re.compile(r"\b\d+(?:\.\d+){1,3}\b")
_VALUE_PATTERNS = (
    re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"),  # environment variable names
    re.compile(r"\b\d+(?:\.\d+)?(?:[KMGT]i|ms|min|[smhKMG])\b|\b\d+(?:\.\d+)?%"),  # quantities
    re.compile(r"\b[\w./-]+:[\w][\w.-]*\b"),  # image references
    re.compile(r"\b[\w./-]+=[\w./:-]+"),  # selectors, labels, settings
    re.compile(r"(?<![\w/])/[\w./-]{2,}"),  # paths
    re.compile(r"\"([^\"\n]{2,60})\"|'([^'\n]{2,60})'|`([^`\n]{2,60})`"),  # quoted strings
)
_NUMBER = re.compile(r"\b\d{2,}\b")
#: the note :func:`ground_answers` leaves in a grading's detail per failed condition
_NOTE = re.compile(r"grounding (?P<effect>vetoed|flagged) (?P<question>[\w.-]+): (?P<failure>.+)")
#: kinds specific enough that naming the kind points at the component
_SPECIFIC_KINDS = {
    "networkpolicy": ("networkpolicy", "network policy"),
    "persistentvolumeclaim": ("persistentvolumeclaim", "persistent volume claim", "pvc"),
    "configmap": ("configmap", "config map"),
    "secret": ("secret",),
    "storageclass": ("storageclass", "storage class"),
    "ingress": ("ingress",),
}
#: kinds whose objects are configuration themselves: the name of a deleted Secret or an
#: added NetworkPolicy is a mutated key (the labelling guide: "policy name"), where the
#: name of a Deployment or a Service is only the component
_CONFIG_KINDS = frozenset(
    {
        "configmap", "secret", "networkpolicy", "storageclass", "role", "rolebinding",
        "clusterrole", "clusterrolebinding", "serviceaccount",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroundTruthFacts:
    """What a ground truth's header and description say a diagnosis must mention."""

    #: component names (without their kind), e.g. ``("user-service",)``
    components: tuple[str, ...]
    namespace: str | None
    #: concrete values of the description, in order of appearance
    values: tuple[str, ...]
    #: the description itself, whose quantities ``consistent_values`` compares
    description: str = ""
    #: the components' kinds, lower case, e.g. ``("deployment",)``
    kinds: tuple[str, ...] = ()
    #: the components as the header gives them, e.g. ``("deployment/user-service",)``
    references: tuple[str, ...] = ()
    #: the values of the change itself, which ``values`` looks for: those of
    #: :attr:`change` (with the one-digit values it sets and the value alone of a
    #: ``key=value`` that names it), and the name of a component that is configuration
    #: (a Secret, a NetworkPolicy: :data:`_CONFIG_KINDS`)
    mutated: tuple[str, ...] = ()
    #: the description without what the fault did not set (:func:`_change_of`), whose
    #: quantities ``values`` compares
    change: str = ""
    #: the components the description lists after ``Affected:``, as it writes them
    #: (``deployment/nginx-thrift``, ``search``): they fail, but are not at fault
    affected: tuple[str, ...] = ()
    #: the components it lists after ``Healthy:`` (``rate``, ``mongodb-geo``)
    healthy: tuple[str, ...] = ()


def _header_fields(header: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in header.split(";"):
        key, sep, value = part.partition("=")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


#: where the description stops stating the change: the components it affected or spared
_AFTERMATH = re.compile(r"\b(?:Affected|Healthy)\s*:.*", re.S | re.I)
#: a word of a phrase that is no word ending one (a preposition, a conjunction, an
#: auxiliary): the old side of a replacement is a phrase of these
_PHRASE_WORD = (
    r"(?<![^\s,;(])(?!(?:with|by|of|in|on|at|for|from|into|to|and|or|but|so|then|as|which"
    r"|that|while|when|where|because|since|after|before|now|is|are|was|were|be|been|being"
    r"|has|have|had|got|gets)(?![^\s,;()]))[^\s,;()]+"
)
#: values the fault did not set: the old side of a change (up to three words between
#: "from" and "to"; the ``old`` phrase of a replacement: the object of "replace X with
#: Y" (up to four words, more where "with" or "by" closes them) and "Y replaced X", not
#: "the replaced X", the subject of "X was replaced by Y", without what it belonged to,
#: "the value" of "the value of KEY"; "(was X)", "previously X", "formerly X"; for
#: "previously set to X", :data:`_FORMER_SETTING`), a default or usual value, the request
#: path of a symptom, a status or exit code
_NOT_SET = (
    re.compile(r"\bfrom\s+[^\s,;()]+(?:\s+[^\s,;()]+){0,2}?(?=\s+to\s)", re.I),
    re.compile(
        rf"(?P<old>{_PHRASE_WORD}(?:\s+{_PHRASE_WORD}){{0,4}})"
        rf"(?:\s+(?:of|in|on|at|for|from)(?:\s+{_PHRASE_WORD}){{1,3}})?"
        r"(?:\s+(?:was|were|is|are|got|gets|(?:has|have|had)\s+been|been|being))?"
        r"\s+(?:\w+ly\s+)?replaced\s+(?:\w+ly\s+)?(?:by|with)\b",
        re.I,
    ),
    re.compile(
        r"(?<!\bthe\s)(?<!\ba\s)(?<!\ban\s)\breplac(?:e|es|ed|ing)\s+"
        rf"(?P<old>{_PHRASE_WORD}(?:\s+{_PHRASE_WORD}){{0,3}}"
        rf"(?:(?:\s+{_PHRASE_WORD}){{1,6}}(?=\s+(?:with|by)\b))?)",
        re.I,
    ),
    re.compile(
        r"\(\s*(?:was|were|previously|formerly|originally|old(?:\s+value)?)\b\s*:?\s*"
        r"[^\s,;()]+(?:\s+[^\s,;()]+){0,2}\s*\)",
        re.I,
    ),
    re.compile(
        r"\b(?:previously|formerly|originally)\s*:?\s+(?:(?:was|were|at)\s+)?(?!set\b)"
        r"(?P<old>[^\s,;()]+)",
        re.I,
    ),
    re.compile(
        r"\b(?:default|defaults\s+to|instead\s+of|normally|usually)\s+(?:about\s+|around\s+|~)?"
        r"[\w./:=-]*\d[\w./:=-]*(?:\s?(?:%|(?:[KMGT]i?B?|[mun]?s|m|h|min|cores?|replicas?"
        r"|seconds?|minutes?)\b))?",
        re.I,
    ),
    re.compile(
        r"(?:\b(?:GET|POST|PUT|PATCH|DELETE|HEAD)\s+)?(?<![\w/])/[\w./-]{2,}"
        r"(?=\s+(?:returns?|returned|fails?|failed|errors?|times?\sout|timed\sout)\b)",
        re.I,
    ),
    re.compile(
        r"\b(?:returns?|returned|returning|answers|status(?:\s?code)?:?|statuscode:?|HTTP"
        r"|(?:exit\s)?code:?)\s+[1-5]\d\d\b|\((?:HTTP\s)?[1-5]\d\d\)",
        re.I,
    ),
)


#: a clause that says what was done (the others say what followed: "all traffic to geo on
#: port 8083 is dropped", "frontend-proxy serves it on port 8443")
_CHANGE_VERB = re.compile(
    r"\b(?:changed|set|added|removed|deleted|lowered|raised|reduced|increased|decreased"
    r"|replaced|recreated|revoked|scaled|patched|edited|updated|modified|injected|renamed"
    r"|disabled|enabled|overwritten|rewritten|swapped)\b",
    re.I,
)
#: where a clause of a description ends: a semicolon, or a sentence's end
_CLAUSE_END = re.compile(r";|(?<=[.!?])\s+")
#: a value a setting had before the change ("was previously set to 512Mi; the fault
#: lowered it to 64Mi", "which was originally set to 512Mi, was lowered to 64Mi"), unless
#: "by" names who set it ("was originally set to 64Mi by the fault"): where the
#: description states no other change, it is the value the fault set
_FORMER_SETTING = re.compile(
    r"\b(?:previously|formerly|originally)\s*:?\s+(?:(?:was|were)\s+)?set\s+to\s+"
    r"(?P<old>[^\s,;()]+)(?![^\s,;()])(?!\s+by\s+(?!default\b))",
    re.I,
)


def _without_former_settings(text: str) -> str:
    """``text`` without the values :data:`_FORMER_SETTING` gives as former, where it
    states another change (:data:`_CHANGE_VERB`)."""
    if not _CHANGE_VERB.search(_FORMER_SETTING.sub(" ", text)):
        return text
    return _FORMER_SETTING.sub(_unset, text)


def _change_of(description: str) -> str:
    """The part of a ground truth's description that states what the fault set: its
    clauses that say what was done (:data:`_CHANGE_VERB`; all of them where none does),
    without the old side of a change (what it replaced, a former value), defaults and
    usual values, status and exit codes, and the request paths of symptoms
    (:data:`_FORMER_SETTING`, :data:`_NOT_SET`); never what follows ``Affected:`` or
    ``Healthy:``."""
    stated = _without_former_settings(_AFTERMATH.sub("", description))
    clauses = [c.strip() for c in _CLAUSE_END.split(stated)]
    done = [c for c in clauses if c and _CHANGE_VERB.search(c)]
    change = "; ".join(done or [c for c in clauses if c])
    for pattern in _NOT_SET:
        change = pattern.sub(_unset, change)
    return re.sub(r"[ \t]{2,}", " ", change).strip()


def _unset(match: re.Match[str]) -> str:
    """What a match of :data:`_NOT_SET` leaves: nothing, or all but its ``old`` phrase
    (what that belonged to stays: ``CACHE_TTL`` of "the value of CACHE_TTL was replaced
    by 5s")."""
    if "old" not in match.re.groupindex:
        return ""
    text, start = match.group(), match.start()
    return text[: match.start("old") - start] + text[match.end("old") - start :]


#: a one-digit value a change sets ("set to 2", "scaled to 0", "the pool size was lowered
#: to 2"): the general patterns read numbers of two digits or more only; never the
#: number of a quantity ("set to 2 cores"), nor the start of a longer one ("to 2.5")
_SET_DIGIT = re.compile(
    r"(?:\b(?:set|scaled|changed|lowered|reduced|raised|increased|decreased)"
    r"(?:\s(?:down|up|back))?|\bsize\b[^.;,\n]{0,40}?)\sto\s(\d)(?![.,]?\d)"
    r"(?!\s?(?:%|[KMGT]i?B?\b|(?:m|ms|s|h|min)\b|cores?\b|cpus?\b|millicores?\b"
    r"|seconds?\b|minutes?\b|hours?\b))",
    re.I,
)
#: how a diagnosis states a one-digit value as set: after the words that set it, or as
#: a key's value (``POOL_SIZE=2``, "pool size: 2", "a pool size of 2")
_STATED_DIGIT = (
    r"(?:(?:\b(?:set|scaled|changed|lowered|reduced|raised|increased|decreased)"
    r"(?:\s(?:down|up|back))?|\bsize\b[^.;,\n]{{0,40}}?)\sto\s"
    r"|\bsize\s?(?:[=:]|\sof|\sis|\swas)?\s?|(?<=[\w.])=\s?){digit}(?![.,]?\d)"
    r"(?!\s?(?:%|[KMGT]i?B?\b|(?:m|ms|s|h|min)\b|cores?\b|cpus?\b|millicores?\b"
    r"|seconds?\b|minutes?\b|hours?\b))"
)
#: a ``key=value`` setting or selector
_SETTING = re.compile(r"([\w./-]+)=([\w./:-]+)")


def _set_digits(change: str) -> tuple[str, ...]:
    """The one-digit values ``change`` sets (:data:`_SET_DIGIT`)."""
    return tuple(dict.fromkeys(m.group(1) for m in _SET_DIGIT.finditer(change)))


def _bare_settings(values: tuple[str, ...], description: str) -> tuple[str, ...]:
    """The value of each ``key=value`` of ``values`` that names the setting alone: one
    with a digit or a separator (``nvme-gen5``, ``ts-route-svc``; not ``geo`` nor
    ``0``) that the description writes nowhere else (``geo`` in "traffic to geo")."""
    found: list[str] = []
    for value in values:
        setting = _SETTING.fullmatch(value)
        if setting is None:
            continue
        bare = setting.group(2)
        if len(bare) < 3 or not re.search(r"[a-z]", bare, re.I):
            continue
        if not re.search(r"[\d._-]", bare):
            continue
        pattern = _name_pattern(bare)
        if pattern is not None and len(pattern.findall(_plain(description))) == 1:
            found.append(bare)
    return tuple(found)


#: the lists of components a description gives after ``Affected:`` and ``Healthy:``
_AFFECTED = re.compile(r"\bAffected\s*:(?P<list>.*?)(?=\bHealthy\s*:|\Z)", re.S | re.I)
_HEALTHY = re.compile(r"\bHealthy\s*:(?P<list>.*?)(?=\bAffected\s*:|\Z)", re.S | re.I)
#: words of a list item that are not the component's name ("the geo pods", "flagd
#: itself", "all nodes")
_NOT_NAMES = frozenset(
    {
        "the", "a", "an", "all", "every", "its", "their", "itself", "themselves", "other",
        "deployment", "deployments", "pod", "pods", "service", "services", "container",
        "containers", "statefulset", "daemonset", "replicas", "node", "nodes", "users",
        "clients", "callers", "requests",
    }
)  # fmt: skip


def _listed(pattern: re.Pattern[str], description: str) -> tuple[str, ...]:
    """The components a description lists after ``Affected:`` or ``Healthy:``: per
    item, its one remaining word (``deployment/nginx-thrift``, ``search``, ``flagd``
    of "flagd itself") or its names with a hyphen (``ts-route-service`` of "the
    ts-route-service pods"); an item of words only ("every user request through it")
    lists none."""
    match = pattern.search(description)
    if match is None:
        return ()
    text = match.group("list")
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\([^()]*\)", " ", text)  # remarks, nested ones too
    text = re.split(r"\.(?=\s|\Z)", text, maxsplit=1)[0]  # the list is one sentence
    names: list[str] = []
    for item in re.split(r"[,;]|\band\b", text):
        words = [w for w in re.findall(r"[\w./-]+", item) if w.casefold() not in _NOT_NAMES]
        words = [w.strip("./-") for w in words if w.strip("./-")]
        if len(words) == 1:
            names.append(words[0])
        else:
            names.extend(w for w in words if "/" in w or re.search(r"[a-z0-9]-[a-z0-9]", w, re.I))
    return tuple(dict.fromkeys(names))


def _description_values(description: str, exclude: set[str]) -> tuple[str, ...]:
    found: list[str] = []
    for pattern in _VALUE_PATTERNS:
        for match in pattern.finditer(description):
            groups = [g for g in match.groups() if g] if match.groups() else []
            found.append((groups[0] if groups else match.group()).strip().rstrip(".,;:"))
    for version in _VERSION.findall(description):
        found.append(version)
    without_versions = _VERSION.sub(" ", description)
    found.extend(_NUMBER.findall(without_versions))
    for value in list(found):
        if ":" in value and "/" not in value.split(":")[-1]:
            found.append(value.rsplit(":", 1)[1])  # an image's tag alone
    unique = dict.fromkeys(v for v in found if len(v) >= 2 and v.casefold() not in exclude)
    return tuple(unique)


def facts_of(ground_truth: str) -> GroundTruthFacts | None:
    """The facts of a ground truth with a ``[fault_spec]`` header, else None."""
    match = _HEADER.match(normalize_untrusted(ground_truth))
    if match is None:
        return None
    fields = _header_fields(match.group("header"))
    components = tuple(
        name.rsplit("/", 1)[-1].strip()
        for name in fields.get("component", "").split(",")
        if name.rsplit("/", 1)[-1].strip()
    )
    namespace = fields.get("namespace") or None
    exclude = {c.casefold() for c in components} | {(namespace or "").casefold()}
    description = match.group("description")
    values = _description_values(description, exclude)
    change = _change_of(description)
    kinds = tuple(
        name.rsplit("/", 1)[0].strip().casefold()
        for name in fields.get("component", "").split(",")
        if "/" in name
    )
    references = tuple(
        name.strip() for name in fields.get("component", "").split(",") if name.strip()
    )
    changed = _description_values(change, exclude)
    mutated = changed + _set_digits(change) + _bare_settings(changed, description)
    return GroundTruthFacts(
        components,
        namespace,
        values,
        description,
        kinds,
        references,
        mutated=tuple(dict.fromkeys(mutated + _config_names(references))),
        change=change,
        affected=_listed(_AFFECTED, description),
        healthy=_listed(_HEALTHY, description),
    )


def _config_names(references: tuple[str, ...]) -> tuple[str, ...]:
    """The names of the header's components that are configuration (:data:`_CONFIG_KINDS`)."""
    names = (r.rsplit("/", 1) for r in references if "/" in r)
    return tuple(
        dict.fromkeys(n.strip() for k, n in names if k.strip().casefold() in _CONFIG_KINDS)
    )


def _plain(text: str) -> str:
    return normalize_untrusted(text).casefold()


def _names(name: str, text: str) -> bool:
    pattern = _name_pattern(name)
    return pattern is not None and pattern.search(text) is not None


@functools.lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern[str] | None:
    """How a text names ``name``: its parts in order, joined by nothing or one of
    ``-_. `` (compiled once per name, not once per grading: ``re``'s own cache is shared
    with every other pattern of the process and holds 512)."""
    parts = [re.escape(p) for p in re.split(r"[-_.\s]+", name.casefold()) if p]
    if not parts:
        return None
    return re.compile(r"(?<![a-z0-9])" + r"[-_. ]?".join(parts) + r"(?![a-z0-9])")


def _points_at(facts: GroundTruthFacts, text: str) -> bool:
    for name in facts.components:
        parts = [p for p in re.split(r"[-_.\s]+", name.casefold()) if p]
        if _names(name, text) or (parts and all(_names(p, text) for p in parts)):
            return True
    aliases = [a for kind in facts.kinds for a in _SPECIFIC_KINDS.get(kind, ())]
    return any(_names(alias, text) for alias in aliases)


def _mentions(value: str, text: str) -> bool:
    """Whether ``text`` (not case-folded) names ``value``, case aside: "128Mi" also as
    "128 Mi", "128mi" or "128MiB". Only milli and mega keep their case (``500m`` CPU is
    not ``500M`` or ``500MB`` of memory). A ``key=value`` setting is also named as
    ``key: value`` (as kubectl and YAML print it) or ``key value``; a one-digit value
    only as set (``_STATED_DIGIT``: "set to 2", "POOL_SIZE=2", "pool size of 2"), never
    as any digit of the text."""
    if re.fullmatch(r"\d", value):
        return re.search(_STATED_DIGIT.format(digit=value), text, re.I) is not None
    setting = _SETTING.fullmatch(value)
    quantity = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z%]+)", value)
    if setting is not None:
        key, said = (re.escape(part) for part in setting.groups())
        body = rf"(?i:{key}(?:\s?[=:]\s?|\s){said})"
    elif quantity is None:
        body = f"(?i:{re.escape(value)})"
    else:
        number, unit = quantity.groups()
        if unit == "m":
            suffix = "m"
        elif unit == "M":
            suffix = "M(?i:b)?"
        else:
            suffix = f"(?i:{re.escape(unit)}b?)"
        body = rf"{re.escape(number)}\s?{suffix}"
    return re.search(rf"(?<![\w.]){body}(?![\w])", text) is not None


def _about_another(facts: GroundTruthFacts, lead: str) -> bool:
    """Whether the words of a diagnosis' sentence before a value name a component the
    description lists as affected or healthy, and do not point at the ground truth's
    ("redis, whose memory limit is 1Gi, is fine"): ``consistent_values`` does not compare
    that value. A component named after it is what followed ("its replicas were scaled to
    2, so checkout fails")."""
    text = _plain(lead)
    others = (name.rsplit("/", 1)[-1] for name in facts.affected + facts.healthy)
    return not _points_at(facts, text) and any(_names(name, text) for name in others)


def check_condition(kind: GroundingKind, facts: GroundTruthFacts, diagnosis: str) -> str | None:
    """None when ``diagnosis`` meets the condition (or there is nothing to check), else why not."""
    if kind == "consistent_values":
        plain = normalize_untrusted(diagnosis)
        elsewhere = functools.partial(_about_another, facts)
        found = contradictions(facts.description, plain, elsewhere=elsewhere)
        return f"contradicts the ground truth: {found[0].describe()}" if found else None
    text = _plain(diagnosis)
    if kind == "component":
        if not facts.components or any(_names(c, text) for c in facts.components):
            return None
        return f"component {' or '.join(facts.components)} not named"
    if kind == "origin_consistent":
        if not facts.components or _points_at(facts, text):
            return None
        return f"nothing points at component {' or '.join(facts.components)}"
    plain = normalize_untrusted(diagnosis)  # a unit's case may matter (m, M)
    if not facts.mutated or any(_mentions(v, plain) for v in facts.mutated):
        return None
    if shares_a_quantity(facts.change, plain):
        return None
    return f"none of the ground truth's values named ({_shown_values(facts)})"


def _shown_values(facts: GroundTruthFacts) -> str:
    return ", ".join(facts.mutated[:6]) + (", ..." if len(facts.mutated) > 6 else "")


def _looked_for(kind: GroundingKind, facts: GroundTruthFacts, failure: str) -> str:
    """What a failed condition looked for in the diagnosis, in an adjudicator's words."""
    named = " or ".join(facts.references or facts.components)
    if kind == "component":
        return f"the diagnosis does not name {named}"
    if kind == "origin_consistent":
        aliases = [a for k in facts.kinds for a in _SPECIFIC_KINDS.get(k, ())[:1]]
        kinds = f", nor its kind ({', '.join(aliases)})" if aliases else ""
        return (
            f"nothing in the diagnosis points at {named}: neither its name, nor every part "
            f"of its name{kinds}"
        )
    if kind == "values":
        return f"the diagnosis gives none of the ground truth's values ({_shown_values(facts)})"
    return f"the diagnosis {failure}"


def ground_answers(
    rubric: Rubric, ground_truth: str, diagnosis: str, answers: Sequence[Answer]
) -> tuple[list[Answer], list[str]]:
    """Apply each question's grounding condition to the judge's "yes" answers.

    Returns the answers (a failed "yes" vetoed or flagged, by ``rubric.grounding_failure``,
    with the reason in ``Answer.grounding`` and ``Answer.veto``) and one note per failed
    condition. A grounding veto replaces a flag the quote check left on the answer.
    """
    facts = facts_of(ground_truth) if ground_truth.strip() else None
    if facts is None:
        return list(answers), []
    veto = rubric.grounding_failure == "veto"
    grounded: list[Answer] = []
    notes: list[str] = []
    for answer in answers:
        kind = rubric.question(answer.question_id).grounding
        if kind is None or not answer.judge_answer:
            grounded.append(answer)
            continue
        failure = check_condition(kind, facts, diagnosis)
        if failure is None:
            grounded.append(answer.model_copy(update={"grounding": f"passed: {kind}"}))
            continue
        verb = "vetoed" if veto else "flagged"
        notes.append(f"grounding {verb} {answer.question_id}: {failure}")
        update: dict[str, object] = {"grounding": f"{verb}: {failure}"}
        if veto:
            update["answer"] = False
        if answer.veto is None or answer.veto.effect == "flagged":
            reason = _looked_for(kind, facts, failure)
            update["veto"] = Veto.model_validate(
                {"check": f"grounding.{kind}", "effect": verb, "reason": reason}
            )
        grounded.append(answer.model_copy(update=update))
    return grounded, notes


def noted_failures(detail: str | None) -> dict[str, tuple[str, str]]:
    """Question id -> (``vetoed`` or ``flagged``, why) from the notes :func:`ground_answers`
    left in a grading's ``detail``: the record of gradings stored before answers carried
    their veto."""
    found: dict[str, tuple[str, str]] = {}
    for note in (detail or "").split("; "):
        match = _NOTE.fullmatch(note.strip())
        if match:
            found.setdefault(match["question"], (match["effect"], match["failure"]))
    return found
