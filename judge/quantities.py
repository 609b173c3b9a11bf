"""Quantities in a ground truth or a diagnosis, normalized so that equal ones compare equal.

Kinds: ``cpu`` (cores: ``2`` = ``2000m`` = ``2.00 cores``), ``memory`` (bytes: ``512Mi``
= ``0.5Gi``), ``duration`` (seconds: ``30s`` = ``30000ms``), ``percent``, ``replicas``
and ``port``. Kubernetes quantities are read by ``parse_quantity`` (Kubernetes' own
quantity grammar), durations by ``durationpy`` (Go's duration grammar, as Kubernetes
writes them); the
words around a number (``cpu``, ``memory``, ``timeout``, ``limit``...) decide its kind
and what it is about, so a number no word explains is not read at all.

Each quantity carries its *subject*: the nearest words of its clause that say which
value it is (``limit`` or ``request``, ``timeout`` or ``latency``, ``targetport``,
``graceperiod``...), never taken across a comma, an opening parenthesis, a semicolon,
"and", "but", "instead of" or a comparison with a value ("below", "exceeds", "than"...
before a number, or before determiners and possessives and then one), nor past the
value beside it (the two sides of a change, "from 512Mi to 256Mi", share theirs): in
"90% of CFS periods are throttled and requests take 5 s", 5 s is no period, and in "its
memory limit is below the 300Mi the JVM needs" or "far below the JVM's 300Mi heap",
300Mi is no limit.
A quantity also says whether its sentence proposes it (``advice``) or gives it as a
value the thing had or does not have (``former``: "from 3 replicas", "no longer 512Mi",
any value followed by "before", "earlier" or "until": "was 512Mi before it was lowered",
"had a memory limit of 1Gi before the deploy", "stood at 1Gi until yesterday"; not a
value a change set, "lowered to 256Mi before the incident", "set to 256Mi earlier
today", nor one stated in the present, "is 256Mi until someone fixes it", "has a memory
limit of 256Mi until someone raises it", "remains 256Mi until a fix is deployed"), and
a range ("40-60%", "between 40% and 60%") is one quantity with both ends.
Two quantities are about the same thing when kind and subject agree; judging
contradictions is ``judge.contradictions``' job.

Why this module is long (about 620 lines): it is one reading, a number with the words
around it. Kubernetes' quantity grammar, the units, the patterns that say what a number
counts, and the clause rules that give it its subject and say whether it is reported,
proposed, former or a range's end decide together what one value is; none of them reads
anything apart from the others.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, replace
from decimal import Decimal, DecimalException, InvalidOperation
from functools import lru_cache

__all__ = ["Quantity", "parse_quantity", "quantities_in"]

#: a number as people write one: 1,024 (thousands separated), 1.5, .5 (Kubernetes' grammar
#: takes a leading point), 1e3 (a decimal exponent, read whole as Kubernetes reads it);
#: never the tail of another number (the 024 of 1,024, the 5 of 1.5 or of 1,5: a decimal
#: comma is not read at all; the 3 of 1e3 or of 2e-3)
_NUM = (
    r"(?<![\d.])(?<!\d,)(?<!\d[eE])(?<!\d[eE][+-])"
    r"((?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|(?<!\w)\.\d+)(?:[eE][+-]?\d+)?)"
)
#: per kind, the classes of words that say what a value is; one word of each class
#: (the nearest before the number, else just after it) makes up the subject
_SUBJECT_WORDS: dict[str, tuple[str, ...]] = {
    "cpu": (r"limits?|requests?",),
    "memory": (
        r"memory|mem|ram|heap|oom\w*|storage|disk|volume|pvc|ephemeral",
        r"limits?|requests?",
    ),
    "duration": (
        r"timeout\w*|deadline|delay\w*|latency|period\w*|interval|ttl|initialdelay\w*"
        r"|(?:termination\s?)?grace\w*(?:\s?period\w*)?|backoff|expir\w*|probe",
    ),
    # not cpu or memory: "CPU at 95 %" and "100 % of its limit" are different measures
    "percent": (r"error\w*|loss|traffic|weight|success|availability",),
    "replicas": (),
    "port": (r"targetport|containerport|nodeport|hostport",),
}
_CPU_CONTEXT = re.compile(r"\bcpus?\b|\bcores?\b|millicores?|millicpu", re.I)
_MEMORY_CONTEXT = re.compile(r"\b(?:memory|mem|ram|heap|oom\w*)\b", re.I)
_DURATION_CONTEXT = re.compile(rf"\b(?:{_SUBJECT_WORDS['duration'][0]})\b", re.I)
#: a value the diagnosis proposes, not one it reports
_ADVICE = re.compile(
    r"\b(?:should|recommend\w*|suggest\w*|increase|raise|bump|restore|revert|consider"
    r"|needs?\s+to|must|could|would)\b",
    re.I,
)
#: a value the thing had before, or is said not to have: the words just before it ("from
#: 3 replicas", "no longer 512Mi", "isn't 2 cores", "previously set to 1Gi")
_FORMER_BEFORE = re.compile(
    r"(?:\bfrom|\bno\s+longer|\bnot|n['\u2019]t|\bnever|\bpreviously|\bformerly|\boriginally"
    r"|\binitially|\bused\s+to\s+be)"
    r"(?:\s+(?:be|been|set|to|at|of|the|a|an|its|about|around))*\s*\Z",
    re.I,
)
#: or the words just after it, whatever the words before it ("was 512Mi before the
#: incident", "had a memory limit of 1Gi before the deploy", "stood at 1Gi until
#: yesterday", "ran 3 replicas until yesterday", "was 512Mi originally"), but for the
#: value a change set (:data:`_CHANGED_TO`, :data:`_SET_TO`) or one stated in the
#: present (:data:`_PRESENT`: "is 256Mi until someone fixes it")
_FORMER_AFTER = re.compile(
    r"\s*(?:(?P<before>before|earlier)|(?P<until>until)"
    r"|previously|formerly|originally|initially)\b",
    re.I,
)
#: a bare setting before "before" or "earlier": when it was set, so the value it has
#: since ("set to 256Mi before the outage began", "configured to 256Mi earlier today");
#: not before "until" ("was set to 1Gi until Monday") nor "originally"
_SET_TO = re.compile(r"\b(?:set|configured)\b[^,;(]*?\bto\s+(?:(?:about|around)\s+)?\Z", re.I)
#: a present tense that states the value, at most four words before it, before "before",
#: "earlier" or "until": the value it has ("is 256Mi until someone fixes it", "has a
#: memory limit of 256Mi until someone raises it", "remains 256Mi until a fix is
#: deployed", "hit its memory limit of 256Mi before being OOMKilled"); not an infinitive
#: ("used to have 3 replicas until yesterday") nor past words between ("has been 1Gi
#: until yesterday", "is what was 1Gi before")
_PRESENT = re.compile(
    r"(?<!\bto\s)\b(?:is|are|has|have|remains?|stays?|sits?|runs?|holds?|hits?)"
    r"(?:\s+(?!(?:was|were|had|been|used|stood|ran)\b)[\w'\u2019-]+){0,4}\s+\Z",
    re.I,
)
#: the verbs of a change to a value
_CHANGED = (
    r"(?:lowered|cut|reduced|raised|increased|decreased|dropped|bumped|changed|updated|scaled)"
)
#: a change that set the value, its "to" right before it: the thing has that value since
#: ("lowered to 256Mi before the incident", "lowered to 256Mi previously", "had been set
#: to 256Mi"); a bare "set to" is not one ("was set to 1Gi originally")
_CHANGED_TO = re.compile(
    rf"\b(?:{_CHANGED}|(?:had|has|have)\s+been\s+set)\b[^,;(]*?\bto\s+"
    r"(?:(?:about|around)\s+)?\Z",
    re.I,
)
#: another change after "before" or "until": whatever the value's words, it is the one
#: that change replaced ("was 512Mi before someone lowered it", "raised to 1Gi before
#: someone lowered it", "was set to 1Gi until someone lowered it")
_CHANGED_AFTER = re.compile(
    rf"\s*(?:before|until)\s+(?:[\w'\u2019]+\s+){{0,3}}?(?:{_CHANGED}|set)\b", re.I
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;\n]")
_WORD_NUMBERS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


@dataclass(frozen=True, slots=True)
class Quantity:
    """One normalized value: cores, bytes, seconds, percent, a count or a port number."""

    kind: str
    #: what the value is about, e.g. ``("memory", "limit")``; empty when no word says
    subject: tuple[str, ...]
    value: Decimal
    #: as written
    text: str
    #: the sentence proposes it ("should be raised to 1Gi") rather than reports it
    advice: bool = False
    #: a value the thing had before or does not have ("from 3 replicas", "no longer
    #: 512Mi"), not one it has
    former: bool = False
    #: for a range ("40-60%", "between 40% and 60%"), its low end; ``value`` is its high end
    lowest: Decimal | None = None
    #: the words of its sentence before it (what they name: whose value it may be)
    lead: str = field(default="", compare=False, repr=False)

    @property
    def ends(self) -> tuple[Decimal, ...]:
        """The value, or a range's two ends."""
        return (self.value,) if self.lowest is None else (self.lowest, self.value)

    def same_value(self, other: Quantity) -> bool:
        """Equal: exactly for counts, ports and percentages; within 0.1 % (rounding)
        for CPU, memory and durations. Units are read, but a close value is another
        value: ``1G`` is not ``1Gi`` (7 % apart), nor ``950Mi`` (the labelling guide).
        A range states its ends, not what lies between them."""
        if self.kind != other.kind:
            return False
        return any(_equal(self.kind, a, b) for a in self.ends for b in other.ends)

    def near_value(self, other: Quantity) -> bool:
        """Equal, or for memory within 10 %: a diagnosis' ``64MB`` for the ground
        truth's ``64Mi`` is a loose unit, not another value, so it contradicts nothing
        (though it does not state the ground truth's value: :meth:`same_value`). A
        range is near a value it holds ("40-60%" of 50 %) or a range it overlaps."""
        if self.kind != other.kind:
            return False
        if min(self.ends) <= max(other.ends) and min(other.ends) <= max(self.ends):
            return True
        return any(_near(self.kind, a, b) for a in self.ends for b in other.ends)


def _equal(kind: str, a: Decimal, b: Decimal) -> bool:
    if kind in ("port", "replicas", "percent"):
        return a == b
    return abs(a - b) <= abs(b) * Decimal("0.001")


def _near(kind: str, a: Decimal, b: Decimal) -> bool:
    if kind == "memory":
        high = max(a, b)
        return high == 0 or abs(a - b) / high <= Decimal("0.1")
    return _equal(kind, a, b)


#: a Kubernetes resource quantity (k8s.io/apimachinery/pkg/api/resource): a signed
#: decimal number, an optional decimal exponent (``1e3``, ``12E6``), an optional suffix
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkKMGTPE])?"
)
#: per suffix, (base, power): ``Mi`` is 1024 ** 2, ``m`` is 1000 ** -1
_SUFFIX_POWERS: dict[str, tuple[int, int]] = {
    "Ki": (1024, 1), "Mi": (1024, 2), "Gi": (1024, 3), "Ti": (1024, 4), "Pi": (1024, 5),
    "Ei": (1024, 6), "n": (1000, -3), "u": (1000, -2), "m": (1000, -1), "k": (1000, 1),
    "K": (1000, 1), "M": (1000, 2), "G": (1000, 3), "T": (1000, 4), "P": (1000, 5),
    "E": (1000, 6),
}  # fmt: skip


def parse_quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity (``2000m`` = 2, ``512Mi`` = 536870912).

    The Decimal is the one the Kubernetes Python client's ``parse_quantity`` returns,
    digit for digit (``2000m`` is ``Decimal("2.000")``): the same multiplication under
    the current decimal context. Like that client it also takes ``K`` for ``k``, an
    exponent before a suffix (``1e3k``) and any Unicode decimal digit (what ``\\d``
    matches). Unlike it, it refuses what Kubernetes refuses but ``Decimal()`` takes:
    spaces, ``_`` between digits, ``NaN`` and ``Infinity``.

    Raises:
        ValueError: ``text`` is not a quantity, or its exponent or value is out of the
            decimal context's range.
    """
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    try:
        number = Decimal(match["number"])  # refuses an exponent past what it can hold
        if match["suffix"] is None:
            return number
        base, power = _SUFFIX_POWERS[match["suffix"]]
        return number * Decimal(base) ** power
    except DecimalException as exc:
        raise ValueError(f"Kubernetes quantity out of range: {text!r}") from exc


def _cpu(number: str, unit: str) -> Decimal:
    return parse_quantity(number + ("m" if unit.lower().startswith("m") else ""))


def _memory(number: str, unit: str) -> Decimal:
    """512Mi, 512MiB -> Mi; 512MB, 512M -> M (decimal), as Kubernetes reads them."""
    unit = unit.removesuffix("B") if unit.endswith("iB") else unit
    if not unit.endswith("i"):
        unit = "k" if unit[0] in "kK" else unit[0]
    return parse_quantity(number + unit)


def _duration(number: str, unit: str) -> Decimal:
    import durationpy  # Go's duration grammar; imported where it is used

    unit = unit.lower()
    short = "ms" if unit.startswith("milli") or unit == "ms" else unit[0]
    return Decimal(str(durationpy.from_str(f"{number}{short}").total_seconds()))


_LINK = r"(?:\s?[:=]|\s(?:is|was|were|are|set|changed|updated|from|to|of|number|at|now))*\s?"
#: where a clause ends: the words of another clause say nothing about a value ("about 90%
#: of CFS periods are throttled and requests take 5 s": 5 s is no period), nor do those
#: of a comparison with a value ("its memory limit is below the 300Mi the JVM needs":
#: 300Mi is no limit, "its CPU request exceeds each node's 4 cores": 4 cores is no
#: request), the value a few words on, none of them a verb or "to": determiners,
#: possessives (:data:`_BEFORE_COMPARED`); a comparison word before no value ends
#: nothing ("lowered over the weekend to 256Mi")
_BEFORE_COMPARED = (
    r"(?:(?:the|a|an|each|every|any|its|their|this|that|one|about|around|roughly|nearly"
    r"|almost|only|just|[\w-]+['\u2019]s)\s+){0,3}"
)
_BREAK = (
    r"[,;(]|\b(?:and|but|instead\s+of)\b"
    rf"|\b(?:below|above|under|over|exceed\w*|than|beyond)\s+{_BEFORE_COMPARED}(?=\.?\d)"
)
#: the words between a port or replicas word and the "to N" that gives its value: a few,
#: of the same clause ("targetPort was misconfigured, leading to 500 errors": no port)
_IN_CLAUSE = rf"(?:(?!{_BREAK})[^.;\n]){{0,30}}?"
#: a word that ends in s and is no plural noun
_NOT_PLURAL = r"(?:its|this|his|was|is|has|does|as|thus|plus|always|across|unless|[a-z]*(?:ss|us))"
#: words between a participle and the plural noun it qualifies: no article, preposition
#: or conjunction, which would make the participle a verb with an object
_QUALIFIER = (
    r"\s(?!(?:the|a|an|its|their|this|that|these|those|to|of|in|on|at|for|with|by|from"
    r"|into|and|or)\b)[a-z-]+"
)
#: words of time that may follow a replica count or a port: "scaled to 2 yesterday",
#: "set to 2 overnight", "are 2 today", "scaled to 2 last night"
_WHEN = (
    r"yesterday|today|tonight|tomorrow|overnight|earlier|later|recently|already|once|just"
    r"|last|this|during"
)
#: after a replica count or the N of such a "to N", no noun but replicas or pods:
#: "leading to 500 errors", "scaled to 2 nodes" count something else; a word of time
#: (:data:`_WHEN`) counts nothing, nor does a participle or an adverb ("scaled to 2
#: causing an outage", "scaled to 2 silently"), unless it qualifies a plural noun up to
#: three words on ("leading to 500 failing requests", "leading to 503 failing checkout
#: requests")
_COUNTS_NOTHING_ELSE = (
    r"(?!\s?(?!(?:replicas?|pods?|instances?|and|or|but|so|then|by|at|in|on|of|from|for"
    r"|with|after|before|because|since|while|when|where|which|who|that|as|is|was|were|are"
    rf"|has|had|instead|now|again|until|via|without|though|although|if|{_WHEN})\b"
    rf"|\w+(?:ing|ly)\b(?!(?:{_QUALIFIER}){{0,2}}\s"
    rf"(?!(?:replicas|pods|instances|{_NOT_PLURAL})\b)[a-z]+s\b))[a-z])"
)
#: "of <name>" after a setting's word: "the CPU limit of the geo container", "the
#: targetPort of the profile Service"
_OF_NAMED = (
    r"(?:\sof\s(?:the\s)?(?=[\w./-]*[a-z])[\w./-]+"
    r"(?:\s(?:container|deployment|pod|service))?(?=\s))?"
)
#: a bare CPU value's limit or request, of a named object, and what was done to it: "the
#: CPU limit of geo was lowered to 0.2", "the CPU request of the geo container is 2"
_CPU_WHAT = (
    rf"\bcpu\s?(?:(?:limits?|requests?){_OF_NAMED})?"
    r"(?:\s?[:=]|\s(?:is|was|were|are|set|changed|updated|lowered|raised|reduced|increased"
    r"|decreased|from|to|of|at|now))*\s?"
)
_COUNT = r"(\d+|zero|one|two|three|four|five)\b(?!\s?/)"
_PORT = r"\b(?:(target|container|node|host)\s?port|port)s?"
_REPLICAS = r"\b(?:replicas?(?:\scount)?|scaled(?:\sdown|\sup)?)"
_CPU_UNIT = r"((?-i:m)|millicores?|millicpus?|cores?|v?cpus?)(?![\w%])"
_TIME_UNIT = r"(milliseconds?|secs?|seconds?|mins?|minutes?|hrs?|hours?|(?-i:ms|s|m|h))(?![\w%])"
_BYTES_UNIT = r"((?:[KMGT]i)B?|[KMGT]B|[kKMGT])(?![\w%])"
_GO_UNIT = r"(?:ns|us|\u00b5s|ms|s|m|h)"
_I = re.I
#: (name, pattern, the group of the number): the kind follows from the name
_PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("percent", re.compile(rf"{_NUM}\s?%"), 1),
    ("memory", re.compile(rf"{_NUM}\s?{_BYTES_UNIT}"), 1),  # case matters: m is not M
    ("cpu", re.compile(rf"{_NUM}\s?{_CPU_UNIT}", _I), 1),
    (
        "cpu_bare",
        # a full stop may end the sentence ("its CPU limit is 2."), a decimal point not;
        # nor is the low end of a range its value ("100-200m")
        re.compile(rf"{_CPU_WHAT}{_NUM}((?-i:m)?)(?![\w%]|\.\d|[-\u2013]\d)", _I),
        1,
    ),
    # Go's compound durations, as Kubernetes writes them: 1m30s, 1h30m, 2h45m10.5s
    (
        "duration_compound",
        re.compile(rf"(?<![\w.])((?:\d+(?:\.\d+)?{_GO_UNIT}){{2,}})(?![\w%])"),
        1,
    ),
    ("duration", re.compile(rf"{_NUM}\s?{_TIME_UNIT}", _I), 1),
    ("duration_field", re.compile(r"\b(\w+)Seconds\s?[:=]?\s?(\d+)\b"), 2),
    ("replicas", re.compile(rf"(?<![\d/])(?<!\d\sof\s)\b{_COUNT}\sreplicas?\b", _I), 1),
    ("replicas_to", re.compile(rf"{_REPLICAS}{_LINK}{_COUNT}{_COUNTS_NOTHING_ELSE}", _I), 1),
    (
        "replicas_to",
        re.compile(rf"{_REPLICAS}\b{_IN_CLAUSE}\bto\s{_COUNT}{_COUNTS_NOTHING_ELSE}", _I),
        1,
    ),
    ("port", re.compile(rf"{_PORT}{_OF_NAMED}{_LINK}(\d{{2,5}})\b", _I), 2),
    (
        "port",
        re.compile(
            rf"{_PORT}{_OF_NAMED}\b{_IN_CLAUSE}\bto\s(\d{{2,5}})\b{_COUNTS_NOTHING_ELSE}", _I
        ),
        2,
    ),
)


@lru_cache(maxsize=8)
def _sentence_ends(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where each sentence break of ``text`` starts and ends (computed once per text)."""
    breaks = list(_SENTENCE_END.finditer(text))
    return tuple(m.start() for m in breaks), tuple(m.end() for m in breaks)


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    starts, ends = _sentence_ends(text)
    before = bisect_right(ends, start) - 1
    after = bisect_left(starts, end)
    return (ends[before] if before >= 0 else 0), (
        starts[after] if after < len(starts) else len(text)
    )


_CLAUSE_BREAK = re.compile(_BREAK, re.I)
#: what joins the two values of a change or a range ("from 2 cores to 200m"): the second
#: is about what the first is
_CHANGE_LINK = re.compile(r"\s*(?:to|->|=>|\u2192)\s*", re.I)


def _clause_breaks(text: str, low: int, high: int) -> list[re.Match[str]]:
    """The clause breaks that begin in ``text[low:high]`` (a comparison's looks past
    ``high`` for the value it compares with, a few words on)."""
    return [m for m in _CLAUSE_BREAK.finditer(text, low, high + 40) if m.start() < high]


def _before_start(text: str, low: int, start: int) -> int:
    """Where the words before a number that may say what it is begin: after the last
    clause break of ``text[low:start]``; an opening parenthesis right before the number
    ("its memory limit (256Mi)") puts it beside what precedes, so does not count."""
    for found in reversed(_clause_breaks(text, low, start)):
        if found.group() == "(" and not text[found.end() : start].strip():
            continue
        return found.end()
    return low


def _after_end(text: str, end: int, high: int) -> int:
    """Where the words after a value that may say what it is end: at the first clause
    break of ``text[end:high]``."""
    found = _clause_breaks(text, end, high)
    return found[0].start() if found else high


def _subject(kind: str, text: str, low: int, start: int, end: int, high: int) -> tuple[str, ...]:
    """Per word class of ``kind``, the nearest word of ``text[low:start]`` (before the
    number), else the first of ``text[end:high]`` (after the value)."""
    words: list[str] = []
    for alternatives in _SUBJECT_WORDS[kind]:
        pattern = re.compile(rf"\b(?:{alternatives})\b", re.I)
        before = list(pattern.finditer(text, low, start))
        found = before[-1] if before else pattern.search(text, end, high)
        if found:
            words.append(_canonical(found.group()))
    return tuple(words)


def _digits(number: str) -> str:
    """A number as ``_NUM`` reads it, without its thousands separators."""
    return number.replace(",", "")


def _canonical(word: str) -> str:
    word = word.lower()
    if "grace" in word:  # a pod's (termination) grace period is not a probe's period
        return "graceperiod"
    for stem in ("limit", "request", "timeout", "delay", "period", "initialdelay", "oom"):
        if word.startswith(stem):
            return "memory" if stem == "oom" else stem
    return {"mem": "memory", "ram": "memory", "heap": "memory"}.get(word, word)


def _context(text: str, start: int, end: int) -> str:
    low, high = _sentence_bounds(text, start, end)
    return text[max(low, start - 80) : min(high, end + 30)]


def _read(kind: str, match: re.Match[str], text: str) -> tuple[str, Decimal] | None:
    """(kind, value) of one match, or None when its words do not say what it is."""
    context = _context(text, match.start(), match.end())
    if kind == "percent":
        return kind, Decimal(_digits(match.group(1)))
    if kind == "memory":
        unit = match.group(2)
        if len(unit) == 1 and not _MEMORY_CONTEXT.search(context):
            return None  # a bare 5M or 2G may be requests or anything else
        return kind, _memory(_digits(match.group(1)), unit)
    if kind == "cpu":
        unit = match.group(2)
        if unit == "m" and (not _CPU_CONTEXT.search(context) or _DURATION_CONTEXT.search(context)):
            return None  # 500m of what?
        return kind, _cpu(_digits(match.group(1)), unit)
    if kind == "cpu_bare":
        return "cpu", _cpu(_digits(match.group(1)), match.group(2))
    if kind == "duration":
        unit = match.group(2)
        if unit == "m" and (_CPU_CONTEXT.search(context) or not _DURATION_CONTEXT.search(context)):
            return None  # millicores, or minutes of nothing said
        return kind, _duration(_digits(match.group(1)), unit)
    if kind == "duration_field":
        return "duration", Decimal(match.group(2))
    if kind == "duration_compound":
        import durationpy

        return "duration", Decimal(str(durationpy.from_str(match.group(1)).total_seconds()))
    if kind.startswith("replicas"):
        raw = match.group(1).lower()
        return "replicas", Decimal(_WORD_NUMBERS.get(raw, raw))
    return "port", Decimal(match.group(2))


@dataclass(frozen=True, slots=True)
class _Reading:
    """A number read as a quantity, before its subject is known."""

    name: str
    match: re.Match[str]
    #: where the number is (its unit after it is the match's)
    span: tuple[int, int]
    kind: str
    value: Decimal


def _readings(text: str) -> list[_Reading]:
    """Every number of ``text`` whose kind its words tell, in order of appearance."""
    found: dict[tuple[int, int], _Reading] = {}
    taken: set[int] = set()  # character positions of numbers already read
    for name, pattern, group in _PATTERNS:
        for match in pattern.finditer(text):
            span = match.span(group)
            if not taken.isdisjoint(range(*span)):
                continue  # a number is read once, by the first pattern that explains it
            try:
                read = _read(name, match, text)
            except (InvalidOperation, ValueError, KeyError, IndexError):
                read = None
            if read is not None:
                found[span] = _Reading(name, match, span, *read)
                taken.update(range(*span))
    return [found[span] for span in sorted(found)]


#: the low end of a range, bare before its high end: "40-60%", "1 to 2 cores" (not the
#: old side of a change, "from 1 to 2 cores"), "between 40 and 60%"
_RANGE_LOW = re.compile(
    r"(?:(?<!\bfrom\s)(?<![\w.,-])(\d+(?:\.\d+)?)\s?(?:-|\u2013|to\s)"
    r"|\bbetween\s+(\d+(?:\.\d+)?)\s+and)\s*\Z",
    re.I,
)
#: "between" before the low end of a range whose two ends have their units
_BETWEEN = re.compile(r"\bbetween\s+\Z", re.I)
_AND = re.compile(r"\s+and\s+", re.I)


def _range_low(text: str, low: int, reading: _Reading) -> Decimal | None:
    """The low end of the range whose high end ``reading`` is, in its unit, if it is one."""
    found = _RANGE_LOW.search(text, low, reading.span[0])
    if found is None:
        return None
    try:
        high = Decimal(_digits(text[slice(*reading.span)]))
        lowest = Decimal(found.group(1) or found.group(2))
    except InvalidOperation:
        return None  # a compound duration ("1m30s") is no plain number
    return reading.value * lowest / high if high and lowest < high else None


def _is_former(text: str, low: int, start: int, end: int, high: int) -> bool:
    """Whether the words just before the number (:data:`_FORMER_BEFORE`), or just after
    its value (:data:`_FORMER_AFTER`; not after a change that set it, :data:`_CHANGED_TO`,
    a setting before "before" or "earlier", :data:`_SET_TO`, or a present tense that
    states it, :data:`_PRESENT`, unless another change follows, :data:`_CHANGED_AFTER`),
    say the thing had it before or does not have it."""
    if _FORMER_BEFORE.search(text, low, start):
        return True
    after = _FORMER_AFTER.match(text, end, high)
    if after is None:
        return False
    if _CHANGED_AFTER.match(text, end):
        return True
    if _CHANGED_TO.search(text, low, start):
        return False
    if after["before"] and _SET_TO.search(text, low, start):
        return False
    if after["before"] or after["until"]:
        return _PRESENT.search(text, low, start) is None
    return True


def _between(text: str, first: _Reading, second: _Reading) -> bool:
    """Whether two readings are the ends of a range: "between 40% and 60%"."""
    return (
        first.kind == second.kind
        and _AND.fullmatch(text, first.match.end(), second.span[0]) is not None
        and _BETWEEN.search(text, max(0, first.span[0] - 12), first.span[0]) is not None
    )


def quantities_in(text: str) -> list[Quantity]:
    """Every quantity of ``text`` whose kind its words tell, in order of appearance.

    A value's subject is read from the words of its own clause, and no further than the
    values beside it: the words before the previous value are that value's, unless the
    two are the sides of a change ("from 512Mi to 256Mi"). The two ends of a range are
    one quantity (its subject the first end's, else the second's)."""
    readings = _readings(text)
    quantities: list[Quantity] = []
    lows: list[int] = []  # per reading, where the words before it begin
    for index, reading in enumerate(readings):
        start, end = reading.span[0], reading.match.end()
        sentence_start, sentence_end = _sentence_bounds(text, start, end)
        low = _before_start(text, max(sentence_start, start - 80), start)
        high = _after_end(text, end, min(sentence_end, end + 30))
        if index:
            previous = readings[index - 1]
            previous_end = previous.match.end()
            if previous_end > start:  # a match that reaches over this number
                previous_end = previous.span[1]
            if _CHANGE_LINK.fullmatch(text, previous_end, start):
                low = min(low, lows[-1])
            else:
                low = max(low, previous_end)
        if index + 1 < len(readings):
            following = readings[index + 1]
            following_start = following.match.start()
            high = min(high, following_start if following_start >= end else following.span[0])
        lows.append(low)
        match = reading.match
        if reading.name == "duration_field":
            subject: tuple[str, ...] = (_canonical(match.group(1)),)
        elif reading.name == "port":  # only its own word: "port 80, targetPort 8081" are two
            subject = (match.group(1).lower() + "port",) if match.group(1) else ()
        else:
            subject = _subject(reading.kind, text, low, start, end, high)
        quantity = Quantity(
            reading.kind,
            subject,
            reading.value,
            match.group().strip(),
            advice=_ADVICE.search(_context(text, *match.span())) is not None,
            former=_is_former(text, low, start, end, high),
            lowest=_range_low(text, low, reading),
            lead=text[sentence_start:start],
        )
        if index and _between(text, readings[index - 1], reading):
            first = quantities.pop()
            quantity = replace(
                quantity,
                subject=first.subject or quantity.subject,
                value=max(first.value, quantity.value),
                text=text[readings[index - 1].match.start() : match.end()].strip(),
                advice=first.advice or quantity.advice,
                former=first.former or quantity.former,
                lowest=min(first.value, quantity.value),
                lead=first.lead,
            )
        quantities.append(quantity)
    return quantities
