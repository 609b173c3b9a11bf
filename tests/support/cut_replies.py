"""A judge whose first reply is cut at its token budget (``finish_reason: length``)."""

from __future__ import annotations

from judge.backends.scripted import ScriptedBackend
from judge.calls import Completion, JudgeRequest

__all__ = ["CutOnceJudge"]


class CutOnceJudge(ScriptedBackend):
    """Cuts its first reply at the budget and answers whole afterwards (as ``model``
    does): ``prompt`` tokens in and the whole budget out for the cut reply, ``prompt``
    in and ``written`` out for each whole one."""

    def __init__(self, model: str = "pass", *, prompt: int = 1000, written: int = 300) -> None:
        super().__init__(model=model)
        self.prompt, self.written = prompt, written
        #: the budget of the reply it cut (0 until it cut one)
        self.cut = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        """A reply cut at ``request``'s budget the first time, a whole one afterwards."""
        whole = await super().complete(request)
        if not self.cut:
            self.cut = request.params.max_tokens
            return whole.model_copy(
                update={
                    "text": whole.text[: len(whole.text) // 2],
                    "prompt_tokens": self.prompt,
                    "completion_tokens": self.cut,
                    "finish_reason": "length",
                }
            )
        update = {"prompt_tokens": self.prompt, "completion_tokens": self.written}
        return whole.model_copy(update={**update, "finish_reason": "stop"})
