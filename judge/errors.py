"""Errors of the grading domain.

Every judge backend translates its client's exceptions into this tree at one
boundary, so callers never see an ``httpx`` or ``openai`` exception::

    JudgeError
    ├── RubricError              a rubric file is invalid (names the file and the fault)
    ├── JudgeSpecError           a ``BACKEND:MODEL[@BASE_URL]`` spec is malformed
    ├── InputError               a ground truth or diagnosis cannot be graded as given
    └── JudgeCallError           a call to the judge failed (carries the attempts made)
        ├── JudgeUnavailable     connection refused, DNS, 5xx      (retried)
        │   └── JudgeRateLimited 429, with ``retry_after``          (retried)
        ├── FeatureRefused       the server refused json_schema or logprobs; the next
        │                        attempt asks without it             (retried at once)
        ├── JudgeTimeout         the server did not answer in time, 408/409 (retried)
        ├── JudgeRejected        400/404/422: the request itself is wrong (not retried)
        │   └── ContextOverflow  the prompt does not fit the model's context
        ├── ReplyTruncated       the reply stopped at the max_tokens budget (asked again
        │                        once with a larger budget, then unscored)
        └── JudgeAuthError       401/403                            (not retried)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judge.calls import Attempt

__all__ = [
    "RETRY_LATER",
    "ContextOverflow",
    "FeatureRefused",
    "InputError",
    "JudgeAuthError",
    "JudgeCallError",
    "JudgeError",
    "JudgeRateLimited",
    "JudgeRejected",
    "JudgeSpecError",
    "JudgeTimeout",
    "JudgeUnavailable",
    "ReplyTruncated",
    "RubricError",
]


class JudgeError(Exception):
    """Base of every error raised by the grading domain."""


class RubricError(JudgeError):
    """A rubric is invalid; the message names the source and the fault."""


class JudgeSpecError(JudgeError, ValueError):
    """A judge spec string is malformed or names an unknown backend."""


class InputError(JudgeError, ValueError):
    """A ground truth or diagnosis cannot be graded as given (too long, NUL bytes...)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class JudgeCallError(JudgeError):
    """A call to the judge failed after the attempts it was allowed."""

    #: stable machine-readable code, used as the ``unscored_reason``
    code = "judge_error"
    #: whether the retry policy may try again
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after
        self.attempts: list[Attempt] = []


class JudgeUnavailable(JudgeCallError):
    """The judge could not be reached or answered with a server error."""

    code = "judge_unavailable"
    retryable = True


class JudgeRateLimited(JudgeUnavailable):
    """The judge answered 429; ``retry_after`` holds its advice in seconds, if any."""

    code = "judge_rate_limited"


class JudgeTimeout(JudgeCallError):
    """The judge did not answer within the timeout."""

    code = "judge_timeout"
    retryable = True


class FeatureRefused(JudgeCallError):
    """The server refused a feature of the request (the strict ``json_schema`` reply
    format, token log-probabilities); the backend has noted it for the endpoint, and the
    next attempt asks without it at once."""

    code = "feature_refused"
    retryable = True


class JudgeRejected(JudgeCallError):
    """The judge refused the request itself (bad request, unknown model)."""

    code = "judge_rejected"


class ContextOverflow(JudgeRejected):
    """The prompt does not fit the judge's context window."""

    code = "context_overflow"


class ReplyTruncated(JudgeCallError):
    """The judge stopped at its ``max_tokens`` budget (``finish_reason``/``done_reason``
    ``length``), or ran so far past it that its reply was read no further: the reply is
    cut, so it is never parsed. The retry loop asks once more
    with a larger budget (``judge.retry``); a second cut reply leaves the grading
    unscored with the reason ``reply_truncated``."""

    code = "reply_truncated"


class JudgeAuthError(JudgeCallError):
    """The judge refused our credentials."""

    code = "judge_auth"


#: the codes of the judge failures that retrying later can fix (the judge is away, busy
#: or slow, or refuses the service's key until it is rotated): the service keeps such a
#: grading pending and tries it again; any other failure leaves it unscored
RETRY_LATER = frozenset(
    {JudgeUnavailable.code, JudgeTimeout.code, JudgeRateLimited.code, JudgeAuthError.code}
)
