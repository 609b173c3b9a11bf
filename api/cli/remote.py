"""``--server URL``: the commands that read the database ask a running server instead.

The token comes from ``SRE_JUDGE_TOKEN``, read as the client package reads it (surrounding
whitespace dropped, one no header can carry refused) and never printed. Answers are read
into the service's own report and job models, so a report looks the same whether it came
from the database or a server. A refused request (problem+json), a redirect (not
followed: the token goes to the URL given only) or an unreachable server is one line on
stderr, exit 2, but a conflict (409, 412) exits 1 as in the database mode; a download
whose answer is cut on the way is one line too, exit 1 (the work failed, as when the
server fails to write it). httpx is imported when a command runs, not with the command
line.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import CommandError, CommandFailed
from api.service.settings import mask_passwords
from judge.masking import mask_url

if TYPE_CHECKING:
    import httpx
    from _typeshed import SupportsWrite

__all__ = ["Refused", "poll_waits", "query_params", "remote", "server_and_token"]

_TIMEOUT = 60.0
#: the waits between a followed job's first looks: short, so a job over in a moment is
#: reported at once; then ``POLL_SECONDS`` between looks
_FIRST_WAITS = (0.05, 0.1, 0.2, 0.4)
POLL_SECONDS = 0.5


def poll_waits() -> Iterator[float]:
    """How long a command following a job (an import, a regrade; through a server or in
    process) waits before each next look: 50, 100, 200, 400 ms, then every half second."""
    yield from _FIRST_WAITS
    yield from itertools.repeat(POLL_SECONDS)


def query_params(values: Mapping[str, Any], *, prefix: str = "") -> dict[str, str]:
    """Filter values as query parameters: given ones only, times in ISO 8601."""
    params = {}
    for key, value in values.items():
        if value is None:
            continue
        params[f"{prefix}{key}"] = value.isoformat() if isinstance(value, datetime) else str(value)
    return params


def _problem(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        title = body.get("title") or response.reason_phrase
        detail = body.get("detail")
        return f"{title}: {detail}" if detail and detail != title else str(title)
    return response.reason_phrase or "error"


#: answers that say the work itself failed, as the database mode's ``Conflict`` and
#: ``PreconditionFailed`` do: exit 1, not 2
_FAILED_WORK = frozenset({409, 412})


class Refused(CommandError):
    """An error answer of the server, or a redirect; ``status`` is its HTTP status.

    Exit 2 (bad usage or input), but 1 for a conflict or a failed precondition (409,
    412): the same status the command exits with in the database mode.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    @staticmethod
    def of(message: str, status: int) -> Refused:
        """The refusal of an answer of ``status``: a :class:`RefusedConflict` for 409, 412."""
        return (RefusedConflict if status in _FAILED_WORK else Refused)(message, status)


class RefusedConflict(Refused):
    """A conflict or a failed precondition the server answered: the work failed, exit 1."""

    exit_code = 1


class Remote:
    """A few JSON and byte requests to one server, each refused one a usage error."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self._http = http
        #: the server as messages name it: a password in its URL masked
        self.url = mask_url(url)

    def _unreachable(self, exc: Exception) -> CommandError:
        """The usage error of a request that got no answer (the token, being one a header
        carries, is in no such error's text)."""
        return CommandError(f"cannot reach {self.url}: {type(exc).__name__}: {exc}")

    def _refused(self, response: httpx.Response, method: str, path: str) -> Refused:
        """The usage error of an answer that is not the one asked for."""
        status = response.status_code
        if response.is_redirect:
            # a presigned target's signature or a password in it is masked, as in every
            # URL shown; the brackets keep the masking from reaching past the URL
            to = mask_passwords(response.headers.get("Location", "elsewhere"))
            reason = f"a redirect to <{to}>, not followed (give the server's final URL)"
        else:
            reason = _problem(response)
        return Refused.of(f"{self.url} answered {status} to {method} {path}: {reason}", status)

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer of a 2xx request; a usage error naming the status otherwise."""
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if not response.is_success:
            raise self._refused(response, method, path)
        return response

    def download(self, path: str, sink: SupportsWrite[bytes], **kwargs: Any) -> httpx.Response:
        """``GET path`` streamed into ``sink`` chunk by chunk (an export of any size in
        bounded memory); the answer, its body read. No answer at all, or anything but a
        ``200``, is a usage error as :meth:`send`'s, and nothing of its body reaches
        ``sink``; an answer whose body stops coming (cut, timed out) is a failure
        (:class:`CommandFailed`, exit 1): what ``sink`` received is not the answer."""
        import httpx

        request = self._http.build_request("GET", path, **kwargs)
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        try:
            if response.status_code != 200:
                response.read()
                raise self._refused(response, "GET", path)
            for chunk in response.iter_bytes():
                sink.write(chunk)
        except httpx.HTTPError as exc:
            raise CommandFailed(
                f"the answer of {self.url} to GET {path} was cut on the way "
                f"({type(exc).__name__}: {exc}); nothing was written"
            ) from None
        finally:
            response.close()
        return response

    def get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """GET a JSON answer."""
        return self.send("GET", path, params=params).json()

    def post_json(self, path: str, body: Any) -> Any:
        """POST a JSON body, read a JSON answer."""
        return self.send("POST", path, json=body).json()


def server_and_token(url: str) -> tuple[str, str]:
    """The base URL of ``--server url`` and the token of ``SRE_JUDGE_TOKEN``, read as the
    client package reads it (:func:`sre_judge_client._core.resolve`); a usage error (exit
    2) naming ``--server`` for a URL that is not http(s) (``""`` too), does not parse or
    names no host, or naming the token. A command with nothing to send checks it all the
    same, so a bad option fails whatever the day's input is."""
    import httpx
    from sre_judge_client._core import resolve

    shown = repr(mask_url(url))  # a password in the URL is never printed
    if not url.lower().startswith(("http://", "https://")):  # a scheme has no case
        raise click.BadParameter(f"{shown}: expected an http(s) URL", param_hint="--server")
    try:
        host = httpx.URL(url).host
    except httpx.InvalidURL as exc:  # a mistyped port, say: its message names the part
        # (unless the URL has a userinfo: a password read as a port would be quoted)
        why = "" if "@" in url else f": {exc}"
        raise click.BadParameter(f"{shown} does not parse{why}", param_hint="--server") from None
    if not host:  # http://:8000, a script's http://$HOST:8000 with HOST unset
        raise click.BadParameter(f"{shown} names no host", param_hint="--server")
    try:
        base, token = resolve(url, None)
    except ValueError as exc:  # a token no header carries: the message does not quote it
        raise click.UsageError(f"SRE_JUDGE_TOKEN: {exc}") from None
    if not token:
        raise click.UsageError("--server needs a token: set SRE_JUDGE_TOKEN")
    return base, token


@contextmanager
def remote(url: str) -> Iterator[Remote]:
    """A client of the server at ``url`` with the token of ``SRE_JUDGE_TOKEN``
    (:func:`server_and_token`)."""
    import httpx

    base, token = server_and_token(url)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=_TIMEOUT) as http:
        yield Remote(http, url)
