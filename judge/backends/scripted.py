"""A scripted judge for tests and demos. It is not a model and says so in its name.

Give it a list of replies (strings, exceptions to raise, or functions of the request)
to play back in order, or use one of the demo modes of the ``scripted:MODE`` spec:

- ``pass``: yes to every question, quoting the diagnosis's first words as evidence;
- ``fail``: no to every question;
- ``garbage``: a reply that is not JSON, to see the unscored path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from judge.calls import Completion, JudgeRequest
from judge.errors import JudgeSpecError
from judge.spec import SCRIPTED_MODES

__all__ = ["SCRIPTED_MODES", "ScriptedBackend", "asked_question", "scripted_reply"]

Script = str | BaseException | Callable[[JudgeRequest], str]


_QUESTION = re.compile(r"^Question (\S+?)(?: \[quote\])? \(", re.MULTILINE)
_DIAGNOSIS = re.compile(r"<<<DIAGNOSIS (\w+)>>>\n(.*?)\n<<<END DIAGNOSIS \1>>>", re.DOTALL)


def _question_ids(request: JudgeRequest) -> list[str]:
    return list(request.reply_schema.get("properties", {}))


def asked_question(request: JudgeRequest) -> str | None:
    """The question id of a per-question request (its schema is one answer), else None."""
    if "answer" not in request.reply_schema.get("properties", {}):
        return None
    for message in reversed(request.messages):  # a repair call ends with the complaint
        found = _QUESTION.findall(message.content) if message.role == "user" else []
        if found:
            return str(found[-1])
    return None


def _diagnosis_of(request: JudgeRequest) -> str:
    for message in request.messages:
        found = _DIAGNOSIS.search(message.content)
        if found:
            return found.group(2)
    return ""


def scripted_reply(request: JudgeRequest, yes: set[str] | None = None) -> str:
    """A well-formed reply answering yes to the ids in ``yes`` (all when None)."""
    quote = " ".join(_diagnosis_of(request).split()[:8])

    def entry(qid: str) -> dict[str, str]:
        said_yes = yes is None or qid in yes
        return {
            "reasoning": "scripted judge",
            "evidence": quote if said_yes else "",
            "answer": "yes" if said_yes else "no",
            "confidence": "high",
        }

    single = asked_question(request)
    if single is not None:
        return json.dumps(entry(single))
    return json.dumps({qid: entry(qid) for qid in _question_ids(request)})


class ScriptedBackend:
    """Plays back scripted replies; records every request it was sent."""

    name = "scripted"

    def __init__(
        self,
        script: Sequence[Script] = (),
        *,
        model: str = "scripted",
        base_url: str | None = None,
        digest: str | None = None,
        fingerprint: str | None = None,
        record: bool = True,
    ) -> None:
        """``record``: keep every request in ``requests`` (for tests); a judge a service
        runs for as long as it is up keeps none."""
        self.model = model
        self._record = record
        self.base_url = base_url
        #: what ``model_digest`` reports (None: nothing), and the completions' fingerprint;
        #: a test changes them to play a model replaced behind the name
        self.digest = digest
        self.fingerprint = fingerprint
        self._script = list(script)
        self.requests: list[JudgeRequest] = []

    def _next(self, request: JudgeRequest) -> str:
        if not self._script:
            if self.model == "pass":
                return scripted_reply(request)
            if self.model == "fail":
                return scripted_reply(request, yes=set())
            if self.model == "garbage":
                return "I think the diagnosis is pretty good!"
            raise AssertionError("the scripted judge ran out of replies")
        item = self._script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item(request) if callable(item) else item

    @classmethod
    def for_mode(
        cls, mode: str, *, base_url: str | None = None, record: bool = True
    ) -> ScriptedBackend:
        """The demo judge of a ``scripted:MODE`` spec."""
        if mode not in SCRIPTED_MODES:
            raise JudgeSpecError(
                f"scripted judge mode {mode!r} is unknown; use one of {', '.join(SCRIPTED_MODES)}"
            )
        return cls(model=mode, base_url=base_url, record=record)

    async def complete(self, request: JudgeRequest) -> Completion:
        """Answer with the next scripted reply."""
        if self._record:
            self.requests.append(request)
        text = self._next(request)
        chars = sum(len(m.content) for m in request.messages)
        return Completion(
            text=text,
            model=f"scripted:{self.model}",
            fingerprint=self.fingerprint,
            prompt_tokens=chars // 4,
            completion_tokens=len(text) // 4,
            response_format="json_schema",
        )

    async def model_digest(self) -> str | None:
        """The digest set on this judge (``DigestAware``), None by default."""
        return self.digest

    async def probe(self) -> None:
        """Always reachable."""

    async def aclose(self) -> None:
        """Nothing to release."""
