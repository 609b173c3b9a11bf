"""Batch engines' exchange format: request lines, result lines, custom ids, checks.

A regrade can hand its judge calls to a batch engine (the OpenAI Batch API, or a GPU
fleet's offline runner such as ``vllm run-batch`` or Ray Data's LLM processors) instead
of asking one HTTP request at a time. Both read OpenAI-batch JSON lines::

    {"custom_id": "rg-<grading id>-c0-s0", "method": "POST",
     "url": "/v1/chat/completions", "body": {...}}

and write one result line per request::

    {"id": "...", "custom_id": "...", "response": {"status_code": 200,
     "request_id": "...", "body": <chat completion>}, "error": null}

The custom id names the regrade item (its grading), the call (its position among the
grading's requests) and the sample (how many earlier requests of that grading were the
same request). Every result is checked against its request before anything is kept:
an unknown custom id, one given twice, or a reply by another model is refused with a
reason; a result whose reply or failure is kept already (the same file sent again) is a
duplicate. :class:`BatchAnswers` then answers a grader's requests from the kept results
(matched by the request's hash, so a prompt that changed is asked live), and
:class:`RequestRecorder` renders the requests a grader would send, answering none.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.backends.base import JudgeBackend, StandIn
from judge.calls import Completion, JudgeRequest, kept_text
from judge.errors import JudgeCallError

__all__ = [
    "BATCH_URL",
    "BatchAnswers",
    "BatchLineError",
    "BatchResult",
    "CheckedResults",
    "CustomId",
    "ExpectedRequest",
    "NotAnswered",
    "Refusal",
    "RequestRecorder",
    "check_results",
    "parse_custom_id",
    "parse_result_lines",
    "request_hash",
    "request_line",
]

#: the endpoint every request line names
BATCH_URL = "/v1/chat/completions"
_CUSTOM_ID = re.compile(
    r"^rg-(?P<grading>[0-9a-f]{32})-c(?P<call>[0-9]{1,4})-s(?P<sample>[0-9]{1,4})$"
)
#: a results file longer than this many lines is refused (one request per line)
MAX_LINES = 1_000_000
#: a result's own ``id`` is kept up to this many characters
_ID_CHARACTERS = 128


class BatchLineError(ValueError):
    """A line of a batch file that cannot be read: its number and the field at fault."""

    def __init__(self, message: str, *, line: int, field: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.field = field


@dataclass(frozen=True, order=True)
class CustomId:
    """A request's name in a batch: the grading, the call, the sample."""

    grading_id: str
    call: int
    sample: int

    def __str__(self) -> str:
        return f"rg-{self.grading_id}-c{self.call}-s{self.sample}"


def parse_custom_id(text: str) -> CustomId:
    """The parts of ``rg-<grading id>-c<call>-s<sample>``; ValueError for anything else."""
    found = _CUSTOM_ID.match(text)
    if found is None:
        raise ValueError(f"not a regrade request's custom_id: {text[:80]!r}")
    return CustomId(found["grading"], int(found["call"]), int(found["sample"]))


def request_hash(request: JudgeRequest) -> str:
    """SHA-256 of the request (messages, reply schema, sampling settings), canonical JSON."""
    canonical = json.dumps(
        request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def request_line(custom_id: str, body: Mapping[str, Any]) -> str:
    """One OpenAI-batch request line (no newline)."""
    line = {"custom_id": custom_id, "method": "POST", "url": BATCH_URL, "body": body}
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class BatchResult:
    """One result line as read: a reply (``body``) or an error."""

    line: int
    custom_id: str
    #: the result's own id (``batch_req_...``, ``vllm-...``), if the engine wrote one
    id: str | None
    status_code: int | None
    request_id: str | None
    body: dict[str, Any] | None
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the engine says it answered (status 200 with a body, no error)."""
        return self.error is None and self.status_code == 200 and self.body is not None


def _error_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        code, message = value.get("code"), value.get("message")
        text = ": ".join(str(part) for part in (code, message) if part)
        return text or json.dumps(value)[:500]
    return str(value)[:500]


def _result(number: int, raw: str) -> BatchResult:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested past what Python reads
        raise BatchLineError("not JSON", line=number, field="line") from None
    if not isinstance(value, dict):
        raise BatchLineError("not a JSON object", line=number, field="line")
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        raise BatchLineError("custom_id must be a non-empty string", line=number, field="custom_id")
    if "response" not in value and "error" not in value:  # e.g. a line of the requests file
        raise BatchLineError(
            "not a result: no response and no error", line=number, field="response"
        )
    response = value.get("response")
    if response is not None and not isinstance(response, dict):
        raise BatchLineError("response must be an object or null", line=number, field="response")
    response = response or {}
    status = response.get("status_code")
    if status is not None and (
        not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599
    ):
        raise BatchLineError(
            "status_code must be an HTTP status (100-599)", line=number, field="status_code"
        )
    body = response.get("body")
    if body is not None and not isinstance(body, dict):
        raise BatchLineError("response.body must be an object", line=number, field="body")
    error = _error_text(value.get("error"))
    if error is None and status is not None and status != 200:
        error = f"HTTP {status}: {_error_text((body or {}).get('error')) or 'no reply'}"
    if error is None and not response:
        error = "no response"
    request_id = response.get("request_id")
    result_id = value.get("id")
    if not isinstance(result_id, str) or not result_id:
        result_id = None  # a runner that writes no id: its failures cannot be told apart
    return BatchResult(
        line=number,
        custom_id=custom_id,
        id=kept_text(result_id)[:_ID_CHARACTERS] if result_id is not None else None,
        status_code=status,
        request_id=kept_text(request_id) if isinstance(request_id, str) else None,
        body=body,
        error=kept_text(error) if error is not None else None,
    )


def parse_result_lines(text: str) -> list[BatchResult]:
    """Every result line of a results file (blank lines skipped); BatchLineError for the
    first line that cannot be read.

    Lines end at a line feed (a carriage return before it is dropped) and nowhere else:
    a runner that writes UTF-8 as is leaves U+2028, U+2029 or U+0085 raw inside a reply's
    strings, which JSON allows and ``str.splitlines`` would cut at."""
    results = []
    for number, raw in enumerate(text.removesuffix("\n").split("\n"), start=1):
        if number > MAX_LINES:
            raise BatchLineError(f"more than {MAX_LINES} lines", line=number, field="file")
        raw = raw.removesuffix("\r")
        if raw.strip():
            results.append(_result(number, raw))
    return results


@dataclass(frozen=True)
class ExpectedRequest:
    """What a result is checked against: its request's model and body form."""

    custom_id: str
    model: str
    #: the structured-output form the body asked for (how the reply is read)
    form: str

    @classmethod
    def of(cls, custom_id: str, body: Mapping[str, Any]) -> ExpectedRequest:
        """The expectation of a stored request body."""
        from judge.backends.openai import form_of  # the openai client, on first use only

        return cls(custom_id, str(body.get("model", "")), form_of(dict(body)))


@dataclass(frozen=True)
class Refusal:
    """A result not kept, and why."""

    line: int
    custom_id: str
    reason: str


@dataclass
class CheckedResults:
    """The results of one file, checked: answers to keep, failures to keep, refusals."""

    #: custom id -> the reply, read (``via`` set)
    answers: dict[str, Completion] = field(default_factory=dict)
    #: custom id -> why the engine could not answer (kept: the request is retried)
    failures: dict[str, str] = field(default_factory=dict)
    #: custom id -> the id of the result that failed (for ``failures`` whose line has one)
    failed_by: dict[str, str] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)
    #: results of requests already answered, or failures kept already from the same
    #: result (a file imported again): nothing kept
    duplicates: int = 0


def _same_model(replied: str, asked: str) -> bool:
    """Whether a reply's model is the one asked (OpenAI answers with a dated snapshot
    of an alias: ``gpt-4o-mini`` -> ``gpt-4o-mini-2024-07-18``; ``gpt-4o-mini`` is not
    ``gpt-4o``)."""
    return (
        replied == asked
        or re.fullmatch(rf"{re.escape(asked)}-\d{{4}}-\d{{2}}-\d{{2}}", replied) is not None
    )


def _read(result: BatchResult, want: ExpectedRequest) -> Completion | str | Refusal:
    """What one result of a known request gives: its reply, why it failed, or why it is
    refused (a reply by another model)."""
    from judge.backends.openai import reply_of  # the openai client, on first use only

    if not result.ok:
        return result.error or "no reply"
    assert result.body is not None
    replied = result.body.get("model")
    if not isinstance(replied, str) or not _same_model(replied, want.model):
        reason = f"reply by model {str(replied)[:120]!r}, request asked {want.model!r}"
        return Refusal(result.line, result.custom_id, reason)
    try:
        completion = reply_of(result.body, form=want.form, model=want.model)
    except JudgeCallError as exc:  # no choices, a refusal: what the reply said
        return str(exc)
    except Exception as exc:  # a body the client's models cannot read at all
        return f"unreadable reply: {type(exc).__name__}"
    return completion if completion.text else "empty reply"


def check_results(
    results: Sequence[BatchResult],
    expected: Mapping[str, ExpectedRequest],
    *,
    answered: set[str],
    via: str | None,
    failed: Mapping[str, str] | None = None,
) -> CheckedResults:
    """Check each result against its request; ``answered``: custom ids with a reply kept
    already (their results count as duplicates); ``via``: the provenance the replies get
    (``batch <id>``; None: the caller sets it once it has the batch's id); ``failed``:
    custom id -> the id of the result whose failure is kept for it (that same result
    again is a duplicate; another one, a new failure)."""
    checked = CheckedResults()
    seen: set[str] = set()
    for result in results:
        cid = result.custom_id
        if cid in seen:
            checked.refused.append(Refusal(result.line, cid, "custom_id given twice in the file"))
            continue
        seen.add(cid)
        want = expected.get(cid)
        if want is None:
            checked.refused.append(Refusal(result.line, cid, "no request of this job has it"))
            continue
        if cid in answered:
            checked.duplicates += 1
            continue
        read = _read(result, want)
        if isinstance(read, Refusal):
            checked.refused.append(read)
        elif isinstance(read, str):
            if result.id is not None and (failed or {}).get(cid) == result.id:
                checked.duplicates += 1  # this very failure is kept already
                continue
            checked.failures[cid] = read
            if result.id is not None:
                checked.failed_by[cid] = result.id
        else:
            checked.answers[cid] = read.model_copy(update={"via": via}) if via else read
    return checked


class NotAnswered(JudgeCallError):
    """A rendering judge answers nothing: the request is recorded for a batch.

    Its own code tells it from a failure: asking one question at a time goes on to the
    next question after it (``judge.per_question.ask_each``), as a live grading would
    ask that one whatever this reply is. Never a stored grading's reason: a rendering
    grading is thrown away."""

    code = "not_answered"
    retryable = False


class RequestRecorder(StandIn):
    """A judge with a real one's identity that records each request and answers none.

    A grader run with it sends exactly the requests a live grading would send first
    (those the cache does not answer): its one call, or with per-question asking each
    question's call; repairs of a reply and later stages depend on answers and are
    asked live when the grading runs.
    """

    def __init__(self, real: JudgeBackend) -> None:
        super().__init__(real)
        self.requests: list[JudgeRequest] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        """Record ``request``; raise NotAnswered."""
        self.requests.append(request)
        raise NotAnswered("rendered for a batch")


class BatchAnswers(StandIn):
    """A judge that answers from a batch's kept replies, and asks the live judge the rest.

    ``answers``: request hash -> the replies of that request, in sample order; each is
    given once. A request with no reply left (its result failed or is missing, its reply
    was cut, a repair) goes to ``live``; ``live_calls`` counts those.
    """

    def __init__(self, live: JudgeBackend, answers: Mapping[str, Sequence[Completion]]) -> None:
        super().__init__(live)
        self._left = {key: list(replies) for key, replies in answers.items()}
        self.live_calls = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        """The next kept reply of ``request``, else the live judge's."""
        replies = self._left.get(request_hash(request))
        if replies:
            return replies.pop(0)
        self.live_calls += 1
        return await self._real.complete(request)
