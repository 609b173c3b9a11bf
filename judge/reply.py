"""Strict parsing of judge replies.

Two forms are accepted, either possibly inside a markdown code fence:

- the service's own: ``{"D1-Q1": {"reasoning", "evidence", "answer", "confidence"}, ...}``
- SREGym's: ``[{"id": "D1-Q1", "answer": "Yes", "evidence": "...", "confidence": "High"}, ...]``
  (also wrapped as ``{"answers": [...]}``).

A reply must carry exactly the rubric's ids, each once, each with a yes/no answer, in
the reply format asked for (``judge.reply_format``): a ``compact`` entry has only
``answer`` and, for a [quote] question, ``quote``; a ``full`` entry has no ``quote``.
Anything else raises ``ReplyInvalid`` listing every problem, worded so it can be sent
back to the judge in one repair call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from judge.calls import kept_text
from judge.inputs import RepeatedKey, no_repeated_keys
from judge.rubric import Rubric

__all__ = [
    "ParsedAnswer",
    "ReplyInvalid",
    "extract_json",
    "json_span",
    "parse_answer_reply",
    "parse_reply",
]

_FENCE_MARK = "```"
#: where a JSON object or array may start: what follows its bracket may open its value
_VALUE_OPENING = re.compile(r'\{(?=\s*["}])|\[(?=\s*[-"\[\]{0-9tfn])')
_CLOSING = re.compile(r"[}\]]")
#: a code fence's opening line (its language tag, if any)
_OPEN_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?")
#: the only answers (any case): a boolean or "true" is a reply that did not follow the
#: schema, and gets the repair call like any other
_YES = {"yes"}
_NO = {"no"}
_CONFIDENCE = {"high": 0.9, "medium": 0.6, "low": 0.3}


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """One question's answer as the judge wrote it."""

    answer: bool
    evidence: str
    reasoning: str
    confidence: float | None


class ReplyInvalid(ValueError):
    """The reply cannot be used; ``problems`` says why, question by question.

    A problem may quote the reply (an unknown id, a repeated key): it is kept as a judge
    server's text is (``judge.calls.kept_text``), so a lone surrogate the reply escaped
    reads as U+FFFD in the repair prompt and the unscored detail, which are stored and
    hashed as UTF-8."""

    def __init__(self, problems: list[str]) -> None:
        kept = [kept_text(problem) for problem in problems]
        super().__init__("; ".join(kept))
        self.problems = kept


#: a reasoning model's thinking before its reply (qwen3, deepseek-r1: ``<think>``)
_THINKING = re.compile(r"\A\s*<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)


def extract_json(text: str) -> Any:
    """The one JSON value of a reply (bare or in a code fence), or ReplyInvalid.

    A fenced value is read from its opening fence with the JSON decoder, so its strings
    may hold backticks (evidence quoting a diagnosis' own code); after the value only
    the closing fence may follow, and no second code block. Prose may surround the
    block, but no complete JSON object or array outside it: a draft before it or a
    correction after it leaves open which is the reply. A reasoning model's leading
    ``<think>...</think>`` (a server that does not split it out) is not the reply: its
    braces must not be taken for the value's."""
    return _located(text)[0]


def json_span(text: str) -> tuple[int, int] | None:
    """Where in ``text`` the JSON value :func:`extract_json` reads starts and ends, or
    None where it reads none: what the reply's answers are, not a draft in a thinking
    block or prose around it (``judge.confidence`` reads its tokens there)."""
    try:
        _, start, end = _located(text)
    except ReplyInvalid:
        return None
    return start, end


def _located(text: str) -> tuple[Any, int, int]:
    """The value of :func:`extract_json` with its start and end offsets in ``text``."""
    thinking = _THINKING.match(text)
    skipped = thinking.end() if thinking else 0
    text = text[skipped:]
    # a reply that is bare JSON is taken whole: its strings may quote a diagnosis that
    # contains a code fence, which must not be mistaken for the reply's own
    opening = None if text.lstrip()[:1] in ("{", "[") else _OPEN_FENCE.search(text)
    body = text[opening.end() :] if opening else text
    if not body.strip():
        raise ReplyInvalid(["the reply is empty"])
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        raise ReplyInvalid(["the reply contains no JSON object or array"])
    start = min(starts)
    if opening and _FENCE_MARK in body[:start]:  # the first block held no JSON: a second one
        raise ReplyInvalid(["the reply has more than one code block"])
    value, end = _decode(body, start)
    rest, after = body[end:].strip(), ""
    if opening and rest.startswith(_FENCE_MARK):
        rest, after = "", rest[len(_FENCE_MARK) :]
        if _FENCE_MARK in after:  # a draft and a correction?
            raise ReplyInvalid(["the reply has more than one code block"])
    if rest:
        raise ReplyInvalid(["the reply has text after the JSON value"])
    if opening and (_holds_json(text[: opening.start()]) or _holds_json(after)):
        raise ReplyInvalid(["the reply has a JSON value outside its code block too"])
    offset = skipped + (opening.end() if opening else 0)
    return value, offset + start, offset + end


def _holds_json(prose: str) -> bool:
    """Whether text around a code block holds a complete JSON object or array.

    Each ``{`` or ``[`` is tried with the JSON decoder (a bracket in a sentence is
    prose). Brackets nested past what Python reads are skipped up to the next closing
    bracket: no answer nests that deep, and trying each would take seconds."""
    decoder = json.JSONDecoder()
    skip_to = 0
    for match in _VALUE_OPENING.finditer(prose):
        start = match.start()
        if start < skip_to:
            continue
        try:  # on its own text: a decoding error counts the lines before it
            decoder.raw_decode(prose[start:])
        except RecursionError:
            closer = _CLOSING.search(prose, start)
            skip_to = closer.start() if closer else len(prose)
            continue
        except ValueError:
            continue
        return True
    return False


def _decode(body: str, start: int) -> tuple[Any, int]:
    """The JSON value at ``start`` of ``body`` and where it ends, or ReplyInvalid."""
    decoder = json.JSONDecoder(object_pairs_hook=no_repeated_keys)
    try:
        return decoder.raw_decode(body, start)
    except RepeatedKey as exc:
        # the hook sees every object, an answer's own keys too: name the key, not a
        # question id, so the repair call says what was repeated
        key = exc.args[0]
        raise ReplyInvalid([f"the key {key} appears more than once in one JSON object"]) from None
    except json.JSONDecodeError as exc:
        raise ReplyInvalid(
            [f"the reply is not complete JSON ({exc.msg} at character {exc.pos})"]
        ) from None
    except RecursionError:  # nested past what Python reads: no reply of a rubric is
        raise ReplyInvalid(["the reply's JSON is nested too deeply"]) from None
    except ValueError as exc:  # e.g. an integer past Python's 4,300 digits
        raise ReplyInvalid([f"the reply's JSON cannot be read ({str(exc)[:120]})"]) from None


def _entries(value: Any) -> list[tuple[str, Any]]:
    """(id, entry) pairs from either form, in reply order."""
    if isinstance(value, dict) and set(value) == {"answers"}:
        value = value["answers"]
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        pairs = []
        for index, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise ReplyInvalid([f"item {index} of the array is not an object with an id"])
            pairs.append((item["id"], item))
        return pairs
    raise ReplyInvalid(["the reply is neither a JSON object keyed by question id nor an array"])


def _parse_answer(qid: str, raw: Any, problems: list[str]) -> bool | None:
    if isinstance(raw, str) and raw.strip().lower() in _YES | _NO:
        return raw.strip().lower() in _YES
    problems.append(f"{qid}: answer {raw!r} is not yes or no")
    return None


def _parse_confidence(raw: Any) -> float | None:
    if isinstance(raw, str):
        return _CONFIDENCE.get(raw.strip().lower())
    if isinstance(raw, int | float) and not isinstance(raw, bool) and 0 <= raw <= 1:
        return float(raw)
    return None


def _parse_compact(
    qid: str, entry: dict[str, Any], quote: bool, problems: list[str]
) -> ParsedAnswer | None:
    allowed = {"id", "answer", "quote"} if quote else {"id", "answer"}
    extra = sorted(set(entry) - allowed)
    if extra:
        keys = "answer and quote" if quote else "answer"
        problems.append(f"{qid}: unexpected key(s) {', '.join(extra)} (asked: {keys} only)")
    answer = _parse_answer(qid, entry.get("answer"), problems)
    evidence = entry.get("quote")
    if evidence is None:
        evidence = ""
    if not isinstance(evidence, str):
        problems.append(f"{qid}: quote must be a string")
        return None
    if answer is None or extra:
        return None
    return ParsedAnswer(answer=answer, evidence=evidence.strip(), reasoning="", confidence=None)


def _parse_entry(
    qid: str, entry: Any, problems: list[str], *, reply_format: str = "full", quote: bool = True
) -> ParsedAnswer | None:
    if not isinstance(entry, dict):
        problems.append(f"{qid}: expected an object with an answer")
        return None
    other = entry.get("id")
    if other is not None and other != qid:  # keyed by one question, naming another
        problems.append(f"the reply answers {other!r}, not {qid}")
        return None
    if reply_format == "compact":
        return _parse_compact(qid, entry, quote, problems)
    if "quote" in entry:
        problems.append(f"{qid}: quote is not a key of this format; give the passage as evidence")
        return None
    answer = _parse_answer(qid, entry.get("answer"), problems)
    evidence = entry.get("evidence")
    if evidence is None:
        evidence = ""
    reasoning = entry.get("reasoning") or entry.get("explanation") or ""
    if not isinstance(evidence, str):
        problems.append(f"{qid}: evidence must be a string")
        return None
    if not isinstance(reasoning, str):
        reasoning = ""
    if answer is None:
        return None
    return ParsedAnswer(
        answer=answer,
        evidence=evidence.strip(),
        reasoning=reasoning.strip(),
        confidence=_parse_confidence(entry.get("confidence")),
    )


def parse_reply(
    text: str, rubric: Rubric, *, reply_format: str = "full"
) -> dict[str, ParsedAnswer]:
    """Parse a reply into one answer per rubric question, or raise ReplyInvalid."""
    pairs = _entries(extract_json(text))
    expected = [q.id for q in rubric.questions]
    problems: list[str] = []
    seen: dict[str, Any] = {}
    for qid, entry in pairs:
        if qid in seen:
            problems.append(f"question id {qid} appears more than once")
        elif qid not in expected:
            problems.append(f"unknown question id {qid}")
        seen.setdefault(qid, entry)
    missing = [qid for qid in expected if qid not in seen]
    if missing:
        problems.append(f"missing question id(s) {', '.join(missing)}")
    answers: dict[str, ParsedAnswer] = {}
    for question in rubric.questions:
        qid = question.id
        if qid in seen:
            parsed = _parse_entry(
                qid,
                seen[qid],
                problems,
                reply_format=reply_format,
                quote=question.requires_quote,
            )
            if parsed is not None:
                answers[qid] = parsed
    if problems:
        raise ReplyInvalid(problems)
    return answers


def _is_answer(value: Any) -> bool:
    return isinstance(value, dict) and "answer" in value


def parse_answer_reply(
    text: str, question_id: str, *, reply_format: str = "full", quote: bool = True
) -> ParsedAnswer:
    """Parse the reply of a per-question call: one answer object, or raise ReplyInvalid.

    The object may also be keyed by the question id (``{"D1-Q1": {...}}``) or be an
    SREGym item carrying that id; any other id, or more than one answer, is refused.
    ``quote``: whether a compact answer may carry a quote (a [quote] question).
    """
    value = extract_json(text)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and set(value) == {question_id}:
        value = value[question_id]
    if not isinstance(value, dict) or "answer" not in value:
        raise ReplyInvalid([f"expected one JSON object with the answer to {question_id}"])
    nested = [key for key, item in value.items() if key == question_id or _is_answer(item)]
    if nested:  # an answer beside the answer: which one is meant?
        raise ReplyInvalid(
            [f"the reply holds more than one answer (one more under {', '.join(nested)})"]
        )
    problems: list[str] = []
    parsed = _parse_entry(question_id, value, problems, reply_format=reply_format, quote=quote)
    if parsed is None or problems:
        raise ReplyInvalid(problems or [f"{question_id}: the answer cannot be used"])
    return parsed
