"""A judge whose reply is JSON nested past what Python reads (a hostile endpoint, or a
model led there by injected text) gives an unscored grading, as any reply that cannot
be read: never an internal error retried for ever."""

from __future__ import annotations

from typing import Any

from tests.support.submissions import graded, scripted_judge


async def test_a_reply_nested_too_deeply_is_an_unparseable_reply(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    deep = "[" * 100_000 + "]" * 100_000
    judge = scripted_judge(deep, deep, deep, deep)
    async with api_client(**judge) as client:
        grading = await graded(client, agent)
    [backend] = judge["backends"].values()
    assert (grading["status"], grading["unscored_reason"]) == ("unscored", "unparseable_reply")
    assert len(backend.requests) == 2  # asked once more, as for any reply that cannot be read
