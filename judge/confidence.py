"""Confidence of an answer from the token log-probabilities of the judge's reply.

Where the server returned log-probabilities (OpenAI-compatible servers, llama.cpp), the
confidence of an answer is P(yes) / (P(yes) + P(no)) at the answer-value token: the
token that follows ``"answer": "`` in the reply, with the server's ``top_logprobs`` at
that position giving the alternative. The number is the confidence in the answer given
(for a "no", P(no) / (P(yes) + P(no))). Only the JSON value the parser reads
(``judge.reply.json_span``) is searched: a reasoning model's leading ``<think>`` block
or prose around a code fence may hold a draft ``"answer": "yes"`` that is not the
reply's answer. Where there are no log-probabilities, the
judge's stated confidence stands (``judge.reply`` maps high/medium/low to a number).

The reply is read from the tokens' bytes where the server gave them (OpenAI's
``bytes``): a character the tokenizer splits over several tokens (an emoji, a rare
symbol) comes as escaped text (``\\xf0\\x9f``) with its bytes in ``bytes``, so the bytes
are joined and decoded once (:func:`_decoded`). A token without bytes stands for its text.

A judge cache keeps what the confidences are read from, no more
(:func:`confidence_tokens`), so a reply served from it gives the confidences it gave live.
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from judge.calls import Completion, TokenLogprob
from judge.reply import ParsedAnswer, json_span

__all__ = ["answer_token_confidences", "confidence_tokens", "with_logprob_confidence"]

_ANSWER_KEY = re.compile(r'"answer"\s*:\s*"')
#: ``"D1-Q1": {`` (the service's reply) or ``"id": "D1-Q1"`` (SREGym's array items)
_ID_KEY = re.compile(r'"([A-Za-z0-9_.-]+)"\s*:\s*\{|"id"\s*:\s*"([A-Za-z0-9_.-]+)"')


def _yes_no_mass(position: TokenLogprob) -> tuple[float, float]:
    """Probability mass of tokens starting "yes" and "no" at one position.

    A log-probability is at most 0: a server's positive one counts as 0 (probability 1),
    an infinite or NaN one (JSON's ``Infinity``, ``NaN``) not at all.
    """
    seen: dict[str, float] = {position.token: position.logprob}
    for token, logprob in position.top:
        seen.setdefault(token, logprob)
    yes = no = 0.0
    for token, logprob in seen.items():
        if not math.isfinite(logprob):
            continue
        word = token.strip().strip('"').lower()
        if word and "yes".startswith(word):
            yes += math.exp(min(logprob, 0.0))
        elif word and "no".startswith(word):
            no += math.exp(min(logprob, 0.0))
    return yes, no


def _object_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of every JSON object of ``text`` (braces inside strings are
    text); an object a cut-off reply never closes ends where the text does."""
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            opened.append(i)
        elif char == "}" and opened:
            spans.append((opened.pop(), i + 1))
    return spans + [(start, len(text)) for start in opened]


#: ``"id": "ID"`` of an SREGym array item
_ITEM_ID = re.compile(r'"id"\s*:\s*"([A-Za-z0-9_.-]+)"')
#: the ``"ID":`` key right before an object's opening brace
_KEY_BEFORE = re.compile(r'"([A-Za-z0-9_.-]+)"\s*:\s*\Z')


def _question_of(text: str, objects: Sequence[tuple[int, int]], at: int) -> str | None:
    """The question id of the answer key at ``at``: see :func:`answer_token_confidences`."""
    holding = [(start, end) for start, end in objects if start < at < end]
    if holding:
        start, end = min(holding, key=lambda span: span[1] - span[0])
        item = _ITEM_ID.search(text, start, end)
        if item is not None:
            return item.group(1)
        key = _KEY_BEFORE.search(text[:start])
        if key is not None:
            return key.group(1)
    keys = list(_ID_KEY.finditer(text, 0, at))
    return (keys[-1].group(1) or keys[-1].group(2)) if keys else None


def _decoded(tokens: Sequence[TokenLogprob]) -> tuple[str, list[tuple[int, int]]]:
    """The reply's text the tokens make and each token's ``(start, end)`` in it.

    Tokens with ``bytes`` are decoded together, so a character split over several of
    them belongs to the one that completes it (those before it span nothing); bytes
    that are no UTF-8 read as U+FFFD. A token without bytes is its text, as it is.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    for token in tokens:
        if token.bytes is None:  # an unfinished character before it ends here
            piece = decoder.decode(b"", final=True) + token.token
            decoder.reset()
        else:
            piece = decoder.decode(bytes(token.bytes))
        parts.append(piece)
        spans.append((at, at + len(piece)))
        at += len(piece)
    rest = decoder.decode(b"", final=True)  # an unfinished character at the end
    if rest and spans:
        parts.append(rest)
        spans[-1] = (spans[-1][0], at + len(rest))
    return "".join(parts), spans


def _token_at(
    tokens: Sequence[TokenLogprob], spans: Sequence[tuple[int, int]], offset: int
) -> TokenLogprob | None:
    """The token whose text covers character ``offset`` of the reply's text."""
    for token, (start, end) in zip(tokens, spans, strict=True):
        if start <= offset < end:
            return token
    return None


def _reply_value(text: str) -> tuple[str, int]:
    """The JSON value the parser reads in ``text`` and where it starts (``("", 0)``
    where it reads none)."""
    span = json_span(text)
    return (text[span[0] : span[1]], span[0]) if span is not None else ("", 0)


def answer_token_confidences(
    tokens: Sequence[TokenLogprob], *, single_id: str | None = None
) -> dict[str, float]:
    """P(yes)/(P(yes)+P(no)) per question id at each answer-value token of a reply.

    Only the answers of the JSON value the parser reads count (none where it reads
    none). The question id of an answer is that of the object holding it: its
    ``"id": "ID"`` (SREGym's array items, before or after the answer), else the
    ``"ID": {`` key the object is the value of; without an enclosing object, the last
    such key before it. ``single_id`` names the question of a reply that is one answer
    object (per-question asking).
    """
    text, spans = _decoded(tokens)
    value, offset = _reply_value(text)
    objects = _object_spans(value)
    found: dict[str, float] = {}
    for match in _ANSWER_KEY.finditer(value):
        qid = single_id if single_id is not None else _question_of(value, objects, match.start())
        token = _token_at(tokens, spans, offset + match.end())
        if qid is None or token is None or qid in found:
            continue
        yes, no = _yes_no_mass(token)
        if yes + no > 0:
            found[qid] = yes / (yes + no)
    return found


def confidence_tokens(tokens: Sequence[TokenLogprob]) -> tuple[TokenLogprob, ...]:
    """The fewest tokens giving the same confidences as ``tokens``, for any ``single_id``.

    The answer-value tokens (the only ones :func:`answer_token_confidences` reads: those
    of the JSON value the parser reads, not a draft's before it) are kept with their
    log-probabilities; the text between two of them becomes one token (log-probability
    0, no alternatives). Each holds its text as decoded (:func:`_decoded`), without
    bytes, so the tokens join to the reply's text: the parser reads the same value and
    every answer key and its question are found where they were, each answer at the
    same token. Their number is bounded by the answers' (what a judge cache keeps of a
    reply's log-probabilities).
    """
    text, spans = _decoded(tokens)
    value, offset = _reply_value(text)
    answers = iter([offset + match.end() for match in _ANSWER_KEY.finditer(value)])
    at = next(answers, None)
    kept: list[TokenLogprob] = []
    between = 0  # where the text not yet kept starts
    for token, (start, end) in zip(tokens, spans, strict=True):
        if at is not None and start <= at < end:
            if between < start:
                kept.append(TokenLogprob(token=text[between:start], logprob=0.0))
            kept.append(TokenLogprob(token=text[start:end], logprob=token.logprob, top=token.top))
            between = end
            while at is not None and at < end:
                at = next(answers, None)
    if between < len(text):
        kept.append(TokenLogprob(token=text[between:], logprob=0.0))
    return tuple(kept)


def with_logprob_confidence(
    parsed: Mapping[str, ParsedAnswer],
    completion: Completion | None,
    *,
    single_id: str | None = None,
) -> dict[str, ParsedAnswer]:
    """The parsed answers with confidence from log-probabilities where the reply has them."""
    if completion is None or not completion.logprobs:
        return dict(parsed)
    p_yes = answer_token_confidences(completion.logprobs, single_id=single_id)
    result: dict[str, ParsedAnswer] = {}
    for qid, answer in parsed.items():
        if qid in p_yes:
            share = p_yes[qid] if answer.answer else 1.0 - p_yes[qid]
            answer = replace(answer, confidence=round(share, 4))
        result[qid] = answer
    return result
