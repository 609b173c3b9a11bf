"""Asking a judge with one repair: the loop both asking strategies share.

A question goes to the judge; a reply that cannot be used gets one follow-up that says
what was wrong with it (a "repair" call); a second unusable reply, a repair that would
not fit the context window, or a call that failed ends the conversation with the
reason the grading is ``unscored``. A usable reply's completions go to the judge cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from judge.caller import JudgeCaller
from judge.calls import ChatMessage, Completion, JudgeCall
from judge.reply import ReplyInvalid

__all__ = ["Conversation", "ask_with_repair"]

T = TypeVar("T")


@dataclass(frozen=True)
class Conversation(Generic[T]):
    """The calls of one question and its repair: the parsed reply, or why there is none."""

    calls: tuple[JudgeCall, ...]
    #: the parsed usable reply, or None when ``reason`` says why not
    parsed: T | None = None
    #: the completion the usable reply came from
    completion: Completion | None = None
    #: the ``unscored_reason`` when no usable reply came, and its detail
    reason: str | None = None
    detail: str | None = None


def _failed(calls: list[JudgeCall]) -> Conversation[Any]:
    call = calls[-1]
    return Conversation(tuple(calls), reason=call.error_code or "judge_error", detail=call.error)


async def ask_with_repair(
    caller: JudgeCaller,
    messages: Sequence[ChatMessage],
    schema: dict[str, Any],
    *,
    parse: Callable[[str], T],
    repair_message: Callable[[list[str]], ChatMessage],
    label: str | None = None,
) -> Conversation[T]:
    """Ask ``messages``; if ``parse`` rejects the reply, ask once more saying why.

    ``label`` names what was asked in the details of a failure (a question id), which
    otherwise speak of the "first reply".
    """
    calls = [await caller.call("grade", caller.request(messages, schema))]
    first_text = calls[-1].completion.text if calls[-1].completion else None
    if first_text is None:
        return _failed(calls)
    try:
        return await _usable(caller, calls, parse(first_text))
    except ReplyInvalid as first:
        problem = first
    repair = [
        *messages,
        ChatMessage(role="assistant", content=first_text),
        repair_message(problem.problems),
    ]
    if not await caller.fits(repair):
        what = label or "first reply"
        detail = f"{what}: {problem}; the repair call would not fit the context window"
        return Conversation(tuple(calls), reason="context_overflow", detail=detail)
    calls.append(await caller.call("repair", caller.request(repair, schema)))
    second_text = calls[-1].completion.text if calls[-1].completion else None
    if second_text is None:
        return _failed(calls)
    try:
        return await _usable(caller, calls, parse(second_text))
    except ReplyInvalid as second:
        prefix = f"{label}: " if label else ""
        detail = f"{prefix}first reply: {problem}; repaired reply: {second}"
        return Conversation(tuple(calls), reason="unparseable_reply", detail=detail)


async def _usable(caller: JudgeCaller, calls: list[JudgeCall], parsed: T) -> Conversation[T]:
    kept = await caller.remember(calls)
    return Conversation(kept, parsed=parsed, completion=kept[-1].completion)
