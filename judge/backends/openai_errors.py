"""How an OpenAI-compatible server's errors read: ``judge.errors``, and which of them
refuse a feature of the request (``json_schema``, ``logprobs``) rather than the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai

from judge.backends.http import is_context_overflow, status_error
from judge.errors import JudgeCallError, JudgeTimeout, JudgeUnavailable

__all__ = ["LOGPROBS_REJECTION", "error_in_body", "map_openai_errors", "refuses_json_schema"]

_SERVER = "openai-compatible server"

LOGPROBS_REJECTION = re.compile(r"logprob", re.IGNORECASE)
#: how servers refuse ``json_schema``: OpenAI-compatible 400s name ``response_format``;
#: llama.cpp-based servers answer 500 naming the schema or the grammar made from it
_FORMAT_REJECTION = re.compile(
    r"response_format|json_schema|json schema|unrecognized schema|grammar", re.IGNORECASE
)


@contextmanager
def map_openai_errors() -> Iterator[None]:
    """Translate the ``openai`` client's exceptions into ``judge.errors``.

    Error statuses as ``judge.backends.http.status_error`` says, timeouts ->
    JudgeTimeout, connection failures and unreadable replies -> JudgeUnavailable.
    """
    try:
        yield
    except openai.APIStatusError as exc:
        status, text, headers = exc.status_code, str(exc.message), exc.response.headers
        error = status_error(status, text, server="openai-compatible server", headers=headers)
        raise error from exc
    except openai.APITimeoutError as exc:
        raise JudgeTimeout("openai-compatible server did not answer in time") from exc
    except openai.APIConnectionError as exc:
        cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection error"
        raise JudgeUnavailable(f"cannot reach openai-compatible server ({cause})") from exc
    except openai.APIError as exc:
        if exc.body is not None and not isinstance(exc, openai.APIResponseValidationError):
            # an error event in a stream (the server failed after its headers): read as
            # the error it names, a context overflow above all, never retried blind. The
            # body is the event's ``error`` as sent, an object or text (Hugging Face
            # TGI's), with the server's words either way (the client's message has them
            # only from an object)
            raise error_in_body(exc.body) from exc
        raise JudgeUnavailable(f"unreadable reply ({type(exc).__name__})") from exc


def error_in_body(error: Any) -> JudgeCallError:
    """The judge error of an ``error`` object (or text) a server sent in a body or a
    stream event: its ``code`` read as a status when it is one, its message kept."""
    if isinstance(error, dict):
        code, text = error.get("code"), error.get("message") or json.dumps(error)
    else:
        code = getattr(error, "code", None)
        text = getattr(error, "message", None) or str(error)
    status = code if isinstance(code, int) and 400 <= code < 600 else None
    return status_error(status, str(text), server=_SERVER)


def refuses_json_schema(exc: openai.APIStatusError) -> bool:
    """Whether an error looks like the server refusing ``response_format: json_schema``."""
    if exc.status_code == 429 or is_context_overflow(str(exc.message)):
        return False
    refusing = exc.status_code in (400, 422) or exc.status_code >= 500
    return refusing and bool(_FORMAT_REJECTION.search(str(exc.message)))
