"""The first admin token of a deployment, from a file the operator provides (a secret).

``SRE_JUDGE_BOOTSTRAP_ADMIN_TOKEN_FILE`` names a file holding a token the operator
chose (e.g. ``openssl rand -hex 32``). When the service starts it registers that
token, hashed, as an admin token of the principal ``bootstrap-admin`` unless a token
with that hash exists. The plaintext is never stored or logged. Revoking the token
sticks: a revoked bootstrap token is not registered again.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.exc import IntegrityError

from api.service.observability import register_secret
from storage import Store

__all__ = ["BOOTSTRAP_PRINCIPAL", "MIN_TOKEN_LENGTH", "ensure_bootstrap_admin", "read_token_file"]

log = logging.getLogger("sre_judge.bootstrap")

BOOTSTRAP_PRINCIPAL = "bootstrap-admin"
MIN_TOKEN_LENGTH = 24


def read_token_file(path: Path) -> str:
    """The token in ``path`` (surrounding white space dropped); ValueError when unusable:
    one word of printable ASCII, as an ``Authorization`` header carries it (a token with
    another character, or a file starting with a byte order mark, which
    ``$(cat FILE)`` sends along, could never be used as a bearer token)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        message = f"cannot read the bootstrap admin token file {path}: {exc.strerror}"
        raise ValueError(message) from None
    words = token.isascii() and token.isprintable() and not any(c.isspace() for c in token)
    if len(token) < MIN_TOKEN_LENGTH or not words:
        raise ValueError(
            f"the bootstrap admin token in {path} must be one word of at least "
            f"{MIN_TOKEN_LENGTH} printable ASCII characters"
        )
    return token


async def ensure_bootstrap_admin(store: Store, path: Path) -> bool:
    """Register the token of ``path`` as ``bootstrap-admin`` if absent; True when created."""
    token = read_token_file(path)
    register_secret(token)
    try:
        created, record = await store.tokens.ensure(
            token, name=BOOTSTRAP_PRINCIPAL, role="admin", actor=BOOTSTRAP_PRINCIPAL
        )
    except IntegrityError:  # another process registered it at the same moment
        created, record = await store.tokens.ensure(
            token, name=BOOTSTRAP_PRINCIPAL, role="admin", actor=BOOTSTRAP_PRINCIPAL
        )
    if created:
        log.info("bootstrap admin token registered", extra={"token_id": record.id})
    elif record.revoked_at is not None:
        log.warning("the bootstrap admin token was revoked; it stays revoked")
    return created
