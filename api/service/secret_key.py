"""Loading the service key (``SRE_JUDGE_SECRET_KEY`` or ``SRE_JUDGE_SECRET_KEY_FILE``).

``serve`` and the commands that write records create the key file (mode 0600) when it
is missing and the database has no keyed audit log yet, so the embedded defaults work on
a fresh machine; checks of what was written (``sre-judge audit verify``) refuse to run
without the key that wrote it. A process whose key is not the one the database's audit
log is keyed with (a worker on a second machine without the key file, a command run
with another ``SRE_JUDGE_SECRET_KEY_FILE``) refuses to start: every row it appended
would break the chain for good (:func:`key_for_database`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from sqlalchemy.engine import Engine

from api.service.settings import Settings
from storage.audit import ChainKey, newest_key_id
from storage.keys import MIN_KEY_BYTES, ServiceKey

__all__ = ["MissingServiceKey", "key_for_database", "load_service_key"]


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


def key_for_database(settings: Settings, engine: Engine) -> ServiceKey:
    """The configured key, checked against the database's audit log: created when
    missing only while the log holds no keyed row; MissingServiceKey when it is missing
    or is not the key the log is keyed with."""
    keyed_with = newest_key_id(engine)
    key = load_service_key(settings, create=keyed_with is None)
    if keyed_with is not None and ChainKey.of(key).key_id != keyed_with:
        raise MissingServiceKey(
            f"the database's audit log is keyed with key {keyed_with}, not with this "
            f"process's key {ChainKey.of(key).key_id}: set SRE_JUDGE_SECRET_KEY_FILE to "
            "the key file the service was run with (or SRE_JUDGE_SECRET_KEY); a row "
            "appended with another key would break the audit chain for good"
        )
    return key


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
