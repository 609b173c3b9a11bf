"""Credentials in URLs, masked wherever a URL is shown or kept: ``***`` in their place.

A judge's base URL (``openai:m@http://h/v1?api_key=...``), a webhook receiver, a
checkpoint witness or a database URL may carry a password, a token or a key. This
module is the one definition of what counts as such a credential and how it is masked;
the audit log, the API, the pages and the command line all use it. It reads judge
specs, panels (``panel:SPEC1,SPEC2``) and the model a panel's gradings record
(``SPEC1+SPEC2``) as :mod:`judge.spec` writes them.
"""

from __future__ import annotations

import re

from judge.spec import BACKEND_NAMES

__all__ = ["MASK", "mask_passwords", "mask_query", "mask_url"]

#: what a masked secret reads as
MASK = "***"

#: the ``@`` that ends a URL's userinfo: not one a scheme follows (a panel:
#: ``m@http://a:80/v1,n@http://b``)
_USERINFO_END = r"@(?![A-Za-z][A-Za-z0-9+.-]*://)"
#: a URL's credentials in a text: ``scheme://user:PASSWORD@host`` (the user may be empty)
#: or ``scheme://TOKEN@host`` (a user alone, which httpx sends as Basic credentials too).
#: They end at the userinfo's last ``@`` before the host, as urlsplit and httpx read it
#: (``user:p@ss@host``); a password may also hold ``/`` (``openssl rand -base64`` writes
#: them, SQLAlchemy reads them up to its first ``@``)
_URL_CREDENTIALS = re.compile(
    r"://(?:(?P<user>[^/\s:@?#]*):(?P<password>[^@\s]*)|[^/\s:@?#]+)"
    + _USERINFO_END
    + r"(?:[^@\s/?#]*"
    + _USERINFO_END
    + r")*"
)
#: a credential given as a URL's query parameter (libpq takes ``?password=``; a witness or
#: a proxy may take a token, an API key or a presigned URL's signature): a parameter whose
#: name, in any case, holds one of these words (``private_token``, ``client_secret``,
#: ``apiToken``, ``X-Amz-Credential`` ...), or OAuth's ``code``
_CREDENTIAL_WORDS = (
    "pass", "pwd", "token", "secret", "key", "sig", "credential", "auth", "jwt", "hmac",
)  # fmt: skip


def _as_sent(word: str) -> str:
    """A pattern of ``word`` as a query's parameter name may spell it: each letter as
    itself or percent-encoded, in either case (``%74oken`` is ``token`` to a receiver)."""
    return "".join(f"(?:{re.escape(c)}|%{ord(c.lower()):02x}|%{ord(c.upper()):02x})" for c in word)


_NAME_WORDS = "|".join(_as_sent(word) for word in _CREDENTIAL_WORDS)
#: such a parameter and its value. The value ends at the query's next parameter, a blank,
#: the fragment, or a comma that begins the next judge spec of a panel
#: (``...?token=S,ollama:b@http://h:2``) or a ``+`` that begins the next member of the
#: model a panel's gradings record (``...?token=S+ollama:b@http://h:2``,
#: :func:`judge.spec.panel_model`): the members after it stay
_QUERY_PASSWORD = re.compile(
    rf"([?&](?:[^=&\s#?]*(?:{_NAME_WORDS})[^=&\s#?]*|{_as_sent('code')})=)"
    rf"(?:[^&\s#,+]|[,+](?!\s*(?:{'|'.join(BACKEND_NAMES)}):))+",
    re.IGNORECASE,
)


def _mask_userinfo(found: re.Match[str]) -> str:
    """A URL's userinfo masked: the user kept before a password, a user alone hidden (a
    user with an empty password too: ``curl -u KEY:``'s way of sending a token)."""
    user = found["user"]
    if user is None or not found["password"]:
        return f"://{MASK}@"
    return f"://{user}:{MASK}@"


def mask_query(text: str) -> str:
    """``text`` with every credential a URL's query carries replaced by ``***``: each
    parameter whose name, percent-decoded and in any case, holds ``pass``, ``pwd``,
    ``token``, ``secret``, ``key``, ``sig``, ``credential``, ``auth``, ``jwt`` or
    ``hmac``, and ``code``; the URL's userinfo is left as it is."""
    return _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", text)


def mask_passwords(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: a password
    (up to the userinfo's last ``@``: ``http://hook:***@host``), a user that comes alone
    (a token: ``http://***@host``), and every credential its query carries
    (:func:`mask_query`). A settings error quotes the value it refuses; ``config show``
    prints every setting; the webhooks list, a grading's history and the audit log show
    a receiver's URL or a judge's base URL."""
    return mask_query(_URL_CREDENTIALS.sub(_mask_userinfo, text))


#: the userinfo of one URL given alone, whatever it holds (a password may hold a blank,
#: a ``/``, a ``#`` or a ``?``, and a refused URL may not parse): from the scheme to the
#: last ``@``
_WHOLE_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)@", re.DOTALL)
#: a user name shown beside a masked password: the characters a URL's user may hold
_USER = re.compile(r"[A-Za-z0-9._~%!$&'()*+,;=-]+")


def mask_url(url: str) -> str:
    """One URL given alone (a command's ``--server``), as messages show it: its password
    masked whatever it holds (``user:***``; a user that comes alone, a token, masked
    whole), and every credential its query carries. :func:`mask_passwords` finds URLs in
    a text, so a password holding a blank ends its URL there; given one URL, everything
    up to its last ``@`` is its userinfo."""
    found = _WHOLE_USERINFO.match(url)
    if found is None:
        return mask_passwords(url)
    user, password, _ = found.group(2).partition(":")
    masked = f"{user}:{MASK}" if password and _USER.fullmatch(user) else MASK
    return mask_passwords(f"{found.group(1)}{masked}@{url[found.end() :]}")
