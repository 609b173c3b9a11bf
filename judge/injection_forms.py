"""Second forms of a diagnosis to search for injection markers: what disguise would hide.

An instruction may be written so that the plain text carries no marker: encoded in
base64 (``SWdub3JlIGFsbC4uLg==``), in leetspeak (``1gn0r3 4ll pr3v10u5``) or with its
letters spaced out (``i g n o r e  a l l``). These functions undo each disguise;
``judge.injection`` searches their output with the same patterns as the text itself.
They are built not to disturb ordinary SRE text: base64 runs must decode to readable
text (a Kubernetes secret of random bytes or an image digest does not), leetspeak is
undone only inside words that mix letters with digits or symbols, and only runs of at
least four single letters count as spaced out.
"""

from __future__ import annotations

import base64
import binascii
import re

__all__ = ["base64_texts", "collapse_spaced", "unleet"]

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


def _decode(run: str) -> str | None:
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    words = re.findall(r"[^\W\d_]{2,}", text)
    if not text or printable < _PRINTABLE * len(text) or len(words) < 2 or " " not in text:
        return None
    return text


def base64_texts(text: str) -> list[str]:
    """The readable texts that base64 runs of ``text`` decode to (sentences, not bytes)."""
    if _RUN.search(text) is None:
        return []
    return [decoded for m in _BASE64.finditer(text) if (decoded := _decode(m.group()))]


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
