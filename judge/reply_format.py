"""What the judge writes per question, in each reply format, and its JSON schemas.

- ``full``: reasoning (one or two sentences), evidence, answer, confidence: about 60
  reply tokens a question;
- ``compact``: the answer, and for a question marked [quote] the quote that backs a
  yes: a few tokens a question, which is what a small local judge can afford.

The parser (``judge.reply``) accepts exactly the format asked for.
"""

from __future__ import annotations

from typing import Any

from judge.rubric import Question, Rubric

__all__ = [
    "COMPACT_KEYS",
    "FULL_ONLY_KEYS",
    "answer_fields",
    "build_answer_schema",
    "build_reply_schema",
    "format_instructions",
]

#: the keys of a compact entry: the answer, and the quote of a [quote] question
COMPACT_KEYS = frozenset({"answer", "quote"})
#: keys only a full entry has: a compact reply carrying one did not follow the format
FULL_ONLY_KEYS = frozenset({"reasoning", "explanation", "evidence", "confidence"})

_FULL = """\
For each question give, in this order: reasoning (one or two short sentences), evidence, \
answer ("yes" or "no"), confidence ("high", "medium" or "low").
Questions marked [quote]: evidence is a short passage copied word for word from the \
diagnosis that supports yes; if there is none, answer no with empty evidence. Other \
questions: evidence is a short note or empty."""

_COMPACT = """\
For each question give only the answer ("yes" or "no"). Questions marked [quote]: \
also give quote, a short passage copied word for word from the diagnosis that \
supports yes; if there is none, answer no with an empty quote. No reasoning, no other keys."""


def format_instructions(reply_format: str) -> str:
    """The system prompt's lines that say what to write for each question."""
    return _COMPACT if reply_format == "compact" else _FULL


def answer_fields(reply_format: str) -> str:
    """The fields of one answer, as a repair message names them."""
    if reply_format == "compact":
        return 'answer ("yes" or "no") and, for [quote] questions, quote: nothing else'
    return 'reasoning, evidence, answer ("yes" or "no") and confidence'


def build_answer_schema(
    reply_format: str = "full", question: Question | None = None
) -> dict[str, Any]:
    """The JSON schema of one answer in ``reply_format`` (compact: of ``question``)."""
    answer = {"type": "string", "enum": ["yes", "no"]}
    if reply_format == "compact":
        quote = question is None or question.requires_quote
        properties: dict[str, Any] = {"answer": answer}
        if quote:
            properties["quote"] = {"type": "string"}
        return {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "evidence": {"type": "string"},
            "answer": answer,
            "confidence": {"type": "string", "enum": ["high", "medium", "low"]},
        },
        "required": ["reasoning", "evidence", "answer", "confidence"],
        "additionalProperties": False,
    }


def build_reply_schema(rubric: Rubric, reply_format: str = "full") -> dict[str, Any]:
    """The JSON schema of a reply: one object per question id, all required."""
    ids = [q.id for q in rubric.questions]
    return {
        "type": "object",
        "properties": {q.id: build_answer_schema(reply_format, q) for q in rubric.questions},
        "required": ids,
        "additionalProperties": False,
    }
