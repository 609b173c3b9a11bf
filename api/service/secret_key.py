"""Loading the service key (``SRE_JUDGE_SECRET_KEY`` or ``SRE_JUDGE_SECRET_KEY_FILE``).

``serve`` and the commands that write records create the key file (mode 0600) when it
is missing, so the embedded defaults work on a fresh machine; checks of what was written
(``sre-judge audit verify``) refuse to run without the key that wrote it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from api.service.settings import Settings
from storage.keys import MIN_KEY_BYTES, ServiceKey

__all__ = ["MissingServiceKey", "load_service_key"]


class MissingServiceKey(ValueError):
    """No key is configured and none may be created here."""


def load_service_key(settings: Settings, *, create: bool) -> ServiceKey:
    """The configured key; with ``create``, a new random key file when none exists."""
    if settings.secret_key is not None:
        return _key_from_text(settings.secret_key.get_secret_value(), "SRE_JUDGE_SECRET_KEY")
    path = settings.secret_key_file
    if not path.exists():
        if not create:
            raise MissingServiceKey(
                f"no service key at {path}: set SRE_JUDGE_SECRET_KEY_FILE to the key file "
                "the service was run with (or SRE_JUDGE_SECRET_KEY)"
            )
        _create_key_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MissingServiceKey(f"cannot read the service key {path}: {exc.strerror}") from None
    return _key_from_text(text, str(path))


def _key_from_text(text: str, origin: str) -> ServiceKey:
    secret = text.strip().encode()
    if len(secret) < MIN_KEY_BYTES:
        raise MissingServiceKey(
            f"the service key in {origin} is shorter than {MIN_KEY_BYTES} characters "
            "(make one with: openssl rand -hex 32)"
        )
    return ServiceKey(secret)


def _create_key_file(path: Path) -> None:
    """Write a new random key readable by its owner only; never overwrite one.

    The key is written to a private temporary file beside ``path`` and linked into place,
    so the file appears whole or not at all: several processes starting together (``serve
    --processes``, a test worker and its commands) never read a key still being written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".sre-judge-key-")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # mode 0600
            handle.write(secrets.token_hex(32) + "\n")
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
