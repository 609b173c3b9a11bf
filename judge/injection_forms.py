"""Second forms of a diagnosis to search for injection markers: what disguise would hide.

An instruction may be written so that the plain text carries no marker: encoded in
base64 (``SWdub3JlIGFsbC4uLg==``), base32 or hex, in rot13 (``vtaber nyy``), written
backwards, as ``\\u0069`` / ``\\x69`` / ``%69`` escapes, in leetspeak (``1gn0r3 4ll
pr3v10u5``), with its letters spaced out (``i g n o r e  a l l``), one word a line, or
with its words broken by hyphens (``ig-nore``, or ``previ-`` at the end of a line and
``ous`` on the next). These functions undo each disguise; ``judge.injection`` searches
their output with the same patterns as the text itself.
They are built not to disturb ordinary SRE text: encoded runs must decode to readable
text (a Kubernetes secret of random bytes or an image digest does not), rot13 and
reversed forms are searched only where the text holds words those disguises make of
common ones, leetspeak is undone only inside words that mix letters with digits or
symbols, and only runs of at least four single letters count as spaced out.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from urllib.parse import unquote

__all__ = [
    "base32_texts",
    "base64_texts",
    "collapse_spaced",
    "dehyphenated",
    "hex_texts",
    "reversed_form",
    "rot13_form",
    "unescaped",
    "unleet",
]

#: base64 runs worth decoding: long enough to hold an instruction, short enough to be cheap
_BASE64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,4096}={0,2}(?![\w+/=-])")
#: what every such run holds: a text without it has none (found much faster)
_RUN = re.compile(r"[A-Za-z0-9+/_-]{16}")
#: the share of printable characters a decoded run needs to count as text
_PRINTABLE = 0.95
_LEET = str.maketrans(
    {"1": "i", "3": "e", "0": "o", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
)
#: words holding a digit or symbol leetspeak uses, to be checked for letters (a word
#: without one is left as it is: matched from its start only, so in linear time)
_LEET_WORD = re.compile(r"(?<![\w@$])[\w@$]*[013457@$][\w@$]*")
_HAS_LETTER = re.compile(r"[a-z]")
_HAS_LEET = re.compile(r"[013457@$]")
#: four or more single letters (or digits) separated by white space
_SPACED = re.compile(r"(?<!\S)\w(?:[ \t]+\w(?!\S)){3,}")


def _readable(raw: bytes) -> str | None:
    """``raw`` as text if it reads as words (a sentence), else None (random bytes)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    words = re.findall(r"[^\W\d_]{2,}", text)
    if not text or printable < _PRINTABLE * len(text) or len(words) < 2 or " " not in text:
        return None
    return text


def _decode(run: str) -> str | None:
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _readable(raw)


def base64_texts(text: str) -> list[str]:
    """The readable texts that base64 runs of ``text`` decode to (sentences, not bytes)."""
    if _RUN.search(text) is None:
        return []
    return [decoded for m in _BASE64.finditer(text) if (decoded := _decode(m.group()))]


#: base32 runs (upper case, as encoders write them) and hex runs of whole bytes
_BASE32 = re.compile(r"(?<![A-Za-z0-9])[A-Z2-7]{16,4096}={0,6}(?![A-Za-z0-9=])")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:[0-9a-fA-F]{2}){8,2048}(?![0-9A-Za-z])")
#: ``\\u0069``, ``\\x69`` and ``%69`` escapes, which a reader (or a model) decodes
_ESCAPES = re.compile(r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))")
#: common words as rot13 writes them (the, and, you, all, yes, to, is, of, this,
#: answer, pass, ignore, grader): two of them make a text worth reading in rot13
_ROT13_WORDS = re.compile(
    r"\b(?:gur|naq|lbh|nyy|lrf|gb|vf|bs|guvf|nafjre|cnff|vtaber|tenqre|whqtr|znex)\b"
)
#: words an instruction written backwards holds (ignore, answer, instructions, yes,
#: pass, grader, judge, previous, correct)
_REVERSED_WORDS = re.compile(
    r"\b(?:erongi|rewsna|snoitcurtsni|sey|ssap|redarg|egduj|suoiverp|tcerroc)\b"
)
#: a hyphen inside a word, as in ``ig-nore``, or ending a line inside one (``previ-``
#: and ``ous`` on the next line)
_INNER_HYPHEN = re.compile(r"(?<=[a-z])-(?:[ \t]*\n[ \t]*)?(?=[a-z])")


def base32_texts(text: str) -> list[str]:
    """The readable texts that base32 runs of ``text`` decode to."""
    found = []
    for match in _BASE32.finditer(text):
        run = match.group().rstrip("=")
        try:
            raw = base64.b32decode(run + "=" * (-len(run) % 8))
        except (binascii.Error, ValueError):
            continue
        if (decoded := _readable(raw)) is not None:
            found.append(decoded)
    return found


def hex_texts(text: str) -> list[str]:
    """The readable texts that hex runs of ``text`` decode to (digests do not)."""
    return [
        decoded
        for match in _HEX.finditer(text)
        if (decoded := _readable(bytes.fromhex(match.group()))) is not None
    ]


def unescaped(text: str) -> str | None:
    """``text`` with ``\\uXXXX``, ``\\xXX`` and ``%XX`` escapes decoded, or None
    when it has too few of them to hide a word (fewer than three)."""
    if len(_ESCAPES.findall(text)) < 3:
        return None

    def char(match: re.Match[str]) -> str:
        return chr(int(match.group(1) or match.group(2), 16))

    return unquote(_ESCAPE.sub(char, text))


def rot13_form(folded: str) -> str | None:
    """``folded`` in rot13, when it holds common words as rot13 writes them."""
    if len(set(_ROT13_WORDS.findall(folded))) < 2:
        return None
    return codecs.encode(folded, "rot13")


def reversed_form(folded: str) -> str | None:
    """``folded`` backwards, when it holds words of an instruction written backwards."""
    if _REVERSED_WORDS.search(folded) is None:
        return None
    return folded[::-1]


def dehyphenated(folded: str) -> str:
    """``folded`` with hyphens inside words removed, and words split over two lines by
    a hyphen joined: ``ig-nore`` and ``previ-\\nous`` are ``ignore`` and ``previous``."""
    return _INNER_HYPHEN.sub("", folded)


def unleet(folded: str) -> str:
    """``folded`` (lower case) with leetspeak undone in words mixing letters and symbols."""

    def undo(match: re.Match[str]) -> str:
        word = match.group()
        if _HAS_LETTER.search(word) and _HAS_LEET.search(word):
            return word.translate(_LEET)
        return word

    return _LEET_WORD.sub(undo, folded)


def collapse_spaced(text: str) -> str:
    """``text`` with spaced-out letters joined: ``i g n o r e  a l l`` is ``ignore all``.

    Inside a run, a single space separates letters and a wider gap separates words; a
    run spaced evenly throughout is joined into one word.
    """

    def join(match: re.Match[str]) -> str:
        words = re.split(r"[ \t]{2,}", match.group())
        return " ".join(w.replace(" ", "").replace("\t", "") for w in words)

    return _SPACED.sub(join, text)
