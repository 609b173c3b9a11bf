"""Credentials in diagnoses: found with ``detect-secrets``, replaced before storing or sending.

An agent that read a pod's environment may paste a password or an API key into its
diagnosis. :func:`redact` finds them and replaces each value by ``[REDACTED:<kind>]``;
only the kinds and positions are kept, never the values. Call it wherever a diagnosis
enters the system (the API, importers); the grader calls it once more before a prompt
is built, so text that bypassed ingestion is never sent in clear either.

Detection runs detect-secrets' own plugins on each line, through ``analyze_string``
(no network verification, no global settings), with its default plugin set minus the
public-IP detector (an address is not a credential) and the hex-entropy detector (it
flags image digests and commit ids). Its keyword detector also runs in its config-file
mode, which accepts unquoted values such as ``DB_PASSWORD: hunter2``. A few regexes add
what it misses: URLs with an empty user (``redis://:pw@host``), bearer tokens, and
``*_TOKEN=`` assignments; one reads a pod's env entries (``- name: DB_PASSWORD`` with
its ``value:`` on the next line) over the whole text. A private key is redacted from its
BEGIN line to its END line. A value ends at an escaped line break or tab (``\\n``,
``\\t``: a tool's output quoted in a JSON string) and goes on past an escaped quote to
the quote that closes it (``"p\\"w"``). A value found is also redacted where else it
stands as a whole token (never inside ``postgresql`` for ``postgres``), and, passed as
``known`` (:class:`KnownValues`: one pattern for all of them, compiled once), in the
other texts of a submission (a trace's steps, its diagnosis). What names a Kubernetes
object rather than a credential (``secretName:``, ``secretRef``, ``secretKeyRef``,
``existingSecret``) and what says where a credential comes from
(``${DB_PASSWORD}``, ``$(openssl rand -hex 16)``) is left alone. Text whose NFKC form
reveals a credential hidden behind look-alike or invisible characters is stored
normalized.

Why this module is long: it is one rule, what counts as a credential in a text and
where it ends, read three ways (each line by the detectors, an env entry over two
lines, each value found wherever else it stands); apart, a value's end and its sweep
would be decided in two places.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judge.prompt import normalize_untrusted

if TYPE_CHECKING:  # detect-secrets is imported at the first line that needs its detectors
    from judge.secret_plugins import SecretPlugin

__all__ = [
    "REDACTION_MARKER",
    "Finding",
    "KnownValues",
    "Redacted",
    "has_redactions",
    "recorded_values",
    "redact",
    "redacted_kinds",
    "sweepable",
]

#: what a redacted value is replaced with; the kind names the detector
REDACTION_MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")
#: values shorter than this are not credentials ("no", "x")
_MIN_VALUE = 4
#: values at least this long are redacted wherever else they occur in the text
_SWEEP_VALUE = 6
_PLACEHOLDER = re.compile(r"^(?:[<$%{\[(*]|x{4,}$|\*+$)|:$", re.IGNORECASE)
#: a value that names where the secret is rather than being it: ${DB_PASSWORD}, $PW,
#: <password>, {{ .Values.pw }}, %PW%, xxxx, ****, and $(...): a command whose output
#: it is ($(openssl rand -hex 16)) or a Kubernetes env reference ($(DB_PASSWORD))
_REFERENCE = re.compile(
    r"(?:\$\{?[A-Za-z_]\w*\}?|\$\(.*|<[^<>]*>|\{\{[^{}]*\}\}|%\w+%|x{4,}|\*+)[.,;:)]*$",
    re.IGNORECASE,
)
#: keys whose value names a Kubernetes object (a Secret, or a key in one), not a
#: credential: ``secretName`` (a pod's volume, an Ingress' TLS entry), ``secretRef``,
#: ``secretKeyRef``, ``tlsSecretName``, a Helm chart's ``existingSecret`` (and
#: ``existingSecretPasswordKey``); ``secret_key`` and ``clientSecret`` are credentials
_OBJECT_KEY = re.compile(
    r"[\w-]*?secrets?[_-]?(?:key[_-]?)?(?:name|ref)s?|existing[_-]?secrets?[\w-]*", re.IGNORECASE
)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
#: a found value's other occurrences count only as whole tokens: not inside a word, a
#: hyphenated name or a dotted one (``postgres`` in ``postgresql``, ``mongodb-geo``,
#: ``postgres.default.svc``)
_SWEEP_AROUND = (r"(?<![\w-])(?<![\w-]\.)", r"(?![\w-])(?!\.[\w-])")
#: what may follow a value in prose and be taken in with it: ``pw.``, ``(pw),``
_CLAUSE_END = ".,;:)"
_KEY_BEFORE = re.compile(r"([\w.-]+)\W*$")
#: the rest of a quoted value after an escaped quote in it, up to the quote closing it
_QUOTED_REST = {quote: re.compile(rf"(?:[^{quote}\\\n]|\\.)*(?={quote})") for quote in "\"'"}
#: a text's pieces between blanks, and the blanks: each normalizes as it does in the text
_PIECES = re.compile(r"\s+|\S+")
#: long lines are scanned in overlapping windows cut at white space: some detectors
#: look to the end of the line at every keyword, which is quadratic on a long line
_WINDOW = 500
_OVERLAP = 120
#: how far past its BEGIN line a private key may end (a 4096-bit RSA key is ~3.3 kB)
_PEM_SPAN = 16_384
#: what every detector needs somewhere in a line before it can find anything there: a
#: word of its keyword list (detect-secrets' denylist: every entry holds key, pass, pwd,
#: secret or contrase), a prefix of a short token format, a URL, or a run of 20
#: token characters (each other format is at least that long: AKIA + 16, ghp_ + 36,
#: a high-entropy string above 4.5 bits has more than 22 distinct characters). A line
#: without any is skipped: the detectors cost about 1 ms per 450 characters.
#: The words are looked for in the case-folded line (:func:`fold_for_words`), which is
#: several times faster than a case-insensitive pattern over the line.
CANDIDATE_WORDS = re.compile(
    r"key|pass|pwd|secret|contrase|token|bearer|basic|authori|private|putty|aws|xox|"
    r"eyj|sk-|sk_|rk_|://|cloudant|ibm|iam|softlayer|sq0|gl[a-z]+-|gh[a-z]_|sg\.|npm|pypi|"
    r"akc|ap[0-9a-f]|mysql|redis|cookie|-b |@"
)
_CANDIDATE_RUN = re.compile(r"[A-Za-z0-9_\-+/=]{20}")
#: letters that a case-insensitive pattern equates with ``i`` and that case folding does
#: not make one (dotless i; dotted capital I folds to two characters): mapped first
_I_FORMS = str.maketrans({"\u0130": "i", "\u0131": "i"})
#: texts this process's ``redact`` returned: redacting them again finds nothing (see
#: ``redact``), so a diagnosis redacted at intake is not scanned again by the grader
_CLEAN: dict[str, None] = {}
_CLEAN_SIZE = 4096
_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
    r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|(?:[ \t]*\n?[ \t]*[A-Za-z0-9+/=]{8,})*)",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One credential found: its kind and where it was (never its value)."""

    kind: str
    #: character offsets in the scanned text, end exclusive
    start: int
    end: int
    #: 1-based line of ``start``
    line: int

    def as_record(self) -> dict[str, Any]:
        """The JSON form kept in ``SubmissionRecord.redactions``."""
        return {"kind": self.kind, "start": self.start, "end": self.end, "line": self.line}


@dataclass(frozen=True, slots=True)
class Redacted:
    """Text with every credential found replaced by ``[REDACTED:<kind>]``."""

    text: str
    findings: tuple[Finding, ...] = ()
    #: the positions refer to the NFKC-normalized text (a credential hid behind look-alikes)
    normalized: bool = False

    @property
    def kinds(self) -> tuple[str, ...]:
        """The distinct kinds found, in order of first appearance."""
        return tuple(dict.fromkeys(f.kind for f in self.findings))

    def records(self) -> list[dict[str, Any]]:
        """Kinds and positions as JSON rows, with ``normalized`` when it applies."""
        extra = {"normalized": True} if self.normalized else {}
        return [{**f.as_record(), **extra} for f in self.findings]

    def masked(self, original: str) -> str:
        """``original`` (the text redacted) as sent, not normalized, with what the findings
        cover replaced by their markers: the text things may be quoted from.

        Where the positions refer to the normal form, each piece of ``original`` between
        blanks whose normal form overlaps a finding is replaced whole (a piece normalizes
        on its own as within the text); should the pieces not add up to the normal form,
        the redacted text itself is returned.
        """
        if not self.normalized:
            return _apply(original, list(self.findings))
        parts: list[str] = []
        normal: list[str] = []
        at = 0
        marked: set[Finding] = set()
        for piece in _PIECES.findall(original):
            form = normalize_untrusted(piece)
            normal.append(form)
            end = at + len(form)
            covering = [f for f in self.findings if f.start < end and at < f.end]
            if not covering:
                parts.append(piece)
            for finding in covering:
                if finding not in marked:
                    marked.add(finding)
                    parts.append(f"[REDACTED:{finding.kind}]")
            at = end
        if "".join(normal) != normalize_untrusted(original):
            return self.text
        return "".join(parts)

    def values_in(self, original: str) -> dict[str, str]:
        """The values found in ``original`` (the text redacted) that are redacted wherever
        else they stand, with their kinds: what :func:`redact` takes as ``known`` to
        redact them in other texts (the other steps of a trace). Kept in memory only."""
        return recorded_values(original, self.records())


def recorded_values(original: str, records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The values that ``records`` (:meth:`Redacted.records` of ``original`` redacted, as
    ``judge.screening.Screening.redactions`` keeps them) cover, with their kinds: what
    :meth:`Redacted.values_in` gives, read from a redaction's records. Kept in memory
    only."""
    rows = list(records)
    text = normalize_untrusted(original) if any(r.get("normalized") for r in rows) else original
    return sweepable((text[r["start"] : r["end"]], r["kind"]) for r in rows)


class KnownValues(Mapping[str, str]):
    """Values to redact wherever they stand as whole tokens, with their kinds (what
    :meth:`Redacted.values_in` gives of a submission's other texts), and the one pattern
    that finds them all: compiled once however many texts are swept (every string of a
    trace's steps), each match's kind looked up here. A pattern per value would cost a
    search per value per text, quadratic in a trace's credentials."""

    __slots__ = ("_kinds", "_pattern")

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._kinds = dict(values or {})
        self._pattern = _sweep_pattern(self._kinds)

    @classmethod
    def of(cls, values: Mapping[str, str] | None) -> KnownValues:
        """``values`` as they are if already compiled, else compiled."""
        return values if isinstance(values, KnownValues) else cls(values)

    def __getitem__(self, value: str) -> str:
        return self._kinds[value]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    def spans(self, text: str, *, besides: Mapping[str, str]) -> Iterator[tuple[int, int, str]]:
        """(start, end, kind) of each whole-token occurrence in ``text`` of a value here
        but not in ``besides`` (values swept with their own kinds), never inside a
        redaction marker already in ``text``. Where values overlap, every start is read
        and the longest value standing there counts."""
        if self._pattern is None:
            return
        markers = [m.span() for m in REDACTION_MARKER.finditer(text)]
        ends = [end for _, end in markers]
        for match in self._pattern.finditer(text):
            value = match.group(1)
            start, end = match.span(1)
            at = bisect_right(ends, start)  # the first marker ending past ``start``
            if value in besides or (at < len(markers) and markers[at][0] < end):
                continue
            yield start, end, self._kinds[value]


def _sweep_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for every value, longest first, each as a whole token only
    (:data:`_SWEEP_AROUND`), in a lookahead so that every start is tried: None for none."""
    choices = "|".join(re.escape(value) for value in sorted(values, key=len, reverse=True))
    if not choices:
        return None
    before, after = _SWEEP_AROUND
    return re.compile(f"{before}(?=({choices}){after})")


def has_redactions(text: str) -> bool:
    """Whether ``text`` carries a redaction marker (it was redacted at ingestion)."""
    return REDACTION_MARKER.search(text) is not None


def redacted_kinds(text: str) -> tuple[str, ...]:
    """The kinds named by the redaction markers of ``text``, in order of first appearance."""
    return tuple(dict.fromkeys(REDACTION_MARKER.findall(text)))


def _names_an_object(line: str, start: int, *, config_mode: bool = False) -> bool:
    """Whether the key before ``line[start:]`` names a Kubernetes object rather than a
    credential (:data:`_OBJECT_KEY`; in config mode also ``secret``/``secrets``: "the
    Secret: db-credentials")."""
    key = _KEY_BEFORE.search(line[max(0, start - 80) : start])
    if key is None:
        return False
    name = key.group(1).rsplit(".", 1)[-1]  # tls.secretName: the last part of a path
    if config_mode and name.lower() in {"secret", "secrets"}:
        return True
    return _OBJECT_KEY.fullmatch(name) is not None


def _value_span(plugin: SecretPlugin, line: str, value: str, offset: int) -> tuple[int, int] | None:
    """Where ``value`` sits in ``line`` (searching from ``offset``), widened to its token.

    A value too short to be a credential counts only as a token's prefix (GitHub's
    detector reports the ``ghp`` of ``ghp_...``): found at its first occurrence and
    widened, the password ``p`` of ``postgres://admin:p@ss@db`` redacted ``postgres``.
    """
    if len(value) < _MIN_VALUE:
        prefix = re.compile(re.escape(value) + r"(?=[_-])").search(line, offset)
        start = prefix.start() if prefix else -1
    else:
        start = line.find(value, offset)
    if start < 0:
        return None
    if plugin.keyword:
        value = re.split(r"[\s;,]", value, maxsplit=1)[0].rstrip(".)")
        if _names_an_object(line, start, config_mode=plugin.config_mode):
            return None  # secretName: frontend-tls names a Kubernetes object
        end = _past_escaped_quotes(line, start, start + len(value))
    else:
        tail = _TOKEN_TAIL.match(line, start + len(value))
        end = tail.end() if tail else start + len(value)
    found = line[start:end]
    if len(found) < _MIN_VALUE or _PLACEHOLDER.search(found) or has_redactions(found):
        return None
    return start, end


def _past_escaped_quotes(text: str, start: int, end: int) -> int:
    """The end of a quoted value that a detector cut at an escaped quote in it (``"p\\"w"``
    read as ``p\\``): the quote that closes the value, where the value ends at a backslash
    before a quote like the one it opened with; else ``end``."""
    quote = text[start - 1] if start > 0 else ""
    if (
        quote not in ("'", '"')
        or not text.endswith("\\", start, end)
        or text[end : end + 1] != quote
    ):
        return end
    rest = _QUOTED_REST[quote].match(text, end + 1)
    return end if rest is None else rest.end()


def _detector_spans(plugin: SecretPlugin, line: str) -> Iterator[tuple[int, int]]:
    """Spans of one detect-secrets plugin; rescans after each hit, since some plugins
    report only the first match of a line."""
    offset = 0
    while offset < len(line):
        spans = [
            span
            for value in plugin.values(line[offset:])
            if (span := _value_span(plugin, line, value, offset)) is not None
        ]
        if not spans:
            return
        yield from spans
        offset = max(min(end for _, end in spans), offset + 1)


def _line_spans(line: str) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of every credential in one line.

    The detectors (and detect-secrets, a fifth of a second to import, with requests) are
    imported here, at the first line with a candidate: a diagnosis without any never
    loads them, so ``sre-judge grade`` reaches its judge sooner.
    """
    from judge.secret_plugins import PLUGINS

    for plugin in PLUGINS:
        detector = plugin.detector
        if not isinstance(detector, re.Pattern):
            for start, end in _detector_spans(plugin, line):
                yield plugin.kind, start, end
            continue
        for match in detector.finditer(line):
            span = _captured(line, match)
            if span is not None and not _names_an_object(line, span[0]):
                yield plugin.kind, *span


def _captured(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """Where a regex's capture (the one alternative's group that matched) stands, to its
    first escaped line break and past escaped quotes, as detect-secrets' values are read;
    None where it is no credential (:func:`_is_value`)."""
    from judge.secret_plugins import cut_at_escaped_break

    group = match.lastindex or 1
    start = match.start(group)
    end = start + len(cut_at_escaped_break(match.group(group)))
    end = _past_escaped_quotes(text, start, end)
    return (start, end) if _is_value(text[start:end]) else None


def _is_value(value: str) -> bool:
    """Whether a regex's capture may be a credential: long enough, not redacted, and not
    a reference to one (:data:`_REFERENCE`)."""
    return len(value) >= _MIN_VALUE and not has_redactions(value) and not _REFERENCE.match(value)


def _entry_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """Credentials in Kubernetes env entries (``- name: DB_PASSWORD`` with ``value:``
    on the next line, or the JSON form), which span two lines: read in the whole text."""
    folded = fold_for_words(text)
    if "name" not in folded or "value" not in folded:
        return
    from judge.secret_plugins import ENV_ENTRY

    kind, pattern = ENV_ENTRY
    for match in pattern.finditer(text):
        span = _captured(text, match)
        if span is not None:
            yield *span, kind


def _windows(line: str) -> Iterator[tuple[int, str]]:
    """(offset, piece) covering ``line``; pieces of a long line overlap and end at spaces."""
    if len(line) <= _WINDOW + _OVERLAP:
        yield 0, line
        return
    start = 0
    while start < len(line):
        end = min(len(line), start + _WINDOW)
        space = line.find(" ", end, end + _WINDOW)
        end = len(line) if end == len(line) else (space if space >= 0 else end + _WINDOW)
        yield start, line[start:end]
        if end >= len(line):
            return
        back = line.rfind(" ", end - _OVERLAP, end)
        start = back + 1 if back > start else end


def fold_for_words(text: str) -> str:
    """``text`` as :data:`CANDIDATE_WORDS` is looked for in: case-folded, so that it
    holds a word wherever a case-insensitive search would find it (``re`` equates with
    a letter exactly the characters this maps to it: a test checks every code point)."""
    return text.translate(_I_FORMS).casefold()


def is_candidate(text: str) -> bool:
    """Whether a detector could find anything in ``text`` (see :data:`CANDIDATE_WORDS`)."""
    return bool(_CANDIDATE_RUN.search(text) or CANDIDATE_WORDS.search(fold_for_words(text)))


def _scan(text: str, known: KnownValues) -> list[Finding]:
    """What the detectors find in ``text``, and every whole-token occurrence of a value
    found or ``known`` (:meth:`KnownValues.spans`)."""
    spans: list[tuple[int, int, str]] = []
    if not is_candidate(text):  # most diagnoses: no line is one
        return _merge(text, list(known.spans(text, besides={}))) if known else []
    offset = 0
    for line in text.splitlines(keepends=True):
        if not is_candidate(line):
            offset += len(line)
            continue
        for shift, piece in _windows(line):
            for kind, start, end in _line_spans(piece):
                block = (
                    _PEM.search(text, offset, offset + len(line) + _PEM_SPAN)
                    if kind == "private-key"
                    else None
                )
                if block is not None:  # the whole key, from its BEGIN line to its END line
                    spans.append((block.start(), block.end(), kind))
                else:
                    spans.append((offset + shift + start, offset + shift + end, kind))
        offset += len(line)
    spans.extend(_entry_spans(text))
    found = sweepable((text[start:end], kind) for start, end, kind in spans)
    # a value found here keeps the kind found here where ``known`` holds it too
    spans.extend(known.spans(text, besides=found))
    spans.extend(KnownValues(found).spans(text, besides={}))
    return _merge(text, spans)


def sweepable(values: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The (value, kind) pairs whose value is redacted wherever else it stands: long
    enough, on one line (a private key is redacted as its block) and not a marker. A
    value that ends a sentence or a clause (``DB_PASSWORD=pw.``, where one detector
    takes in the period) is also swept without that punctuation."""
    pairs = [
        (form, kind)
        for value, kind in values
        for form in dict.fromkeys((value, value.rstrip(_CLAUSE_END)))
    ]
    return {
        value: kind
        for value, kind in pairs
        if len(value) >= _SWEEP_VALUE and "\n" not in value and not has_redactions(value)
    }


def _merge(text: str, spans: list[tuple[int, int, str]]) -> list[Finding]:
    merged: list[list[Any]] = []
    for start, end, kind in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    return [
        Finding(kind=kind, start=start, end=end, line=text.count("\n", 0, start) + 1)
        for start, end, kind in merged
    ]


def _apply(text: str, findings: list[Finding]) -> str:
    parts: list[str] = []
    last = 0
    for f in findings:
        parts.extend((text[last : f.start], f"[REDACTED:{f.kind}]"))
        last = f.end
    parts.append(text[last:])
    return "".join(parts)


def redact(text: str, *, known: Mapping[str, str] | None = None) -> Redacted:
    """``text`` with every credential replaced by ``[REDACTED:<kind>]``, and what was found.

    ``known``: values found in other texts of the same submission (``Redacted.values_in``
    of a trace's other steps), with their kinds, redacted here too wherever they stand
    as whole tokens; pass a :class:`KnownValues` to sweep many texts with one pattern.

    Idempotent: redacting redacted text finds nothing more. Hence a text this process
    returned lately (a diagnosis redacted at intake, now read back by the grader) is
    not scanned again: only the ``known`` values are looked for in it.
    """
    values = KnownValues.of(known)
    if text in _CLEAN:
        findings = _merge(text, list(values.spans(text, besides={}))) if values else []
        result = Redacted(_apply(text, findings), tuple(findings))
    else:
        result = _redact(text, values)
    if len(_CLEAN) >= _CLEAN_SIZE:
        _CLEAN.clear()
    _CLEAN[result.text] = None
    return result


def _redact(text: str, known: KnownValues) -> Redacted:
    findings = _scan(text, known)
    redacted = _apply(text, findings)
    normalized = normalize_untrusted(text)
    if normalized != text and _scan(normalize_untrusted(redacted), known):
        # a credential hides behind full-width letters or invisible characters: the
        # judge would read it in clear after normalization, so store the normal form
        findings = _scan(normalized, known)
        return Redacted(_apply(normalized, findings), tuple(findings), normalized=True)
    return Redacted(redacted, tuple(findings))
