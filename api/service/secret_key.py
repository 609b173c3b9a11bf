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

__all__ = ["MissingServiceKey", "key_for_database", "key_origin", "load_service_key"]


class MissingServiceKey(ValueError):
    """No key is configured and none may be created here."""


def key_origin(settings: Settings) -> str:
    """Where the configured key comes from, as an operator fixes it: the variable that
    holds it, or the key file's variable and absolute path."""
    if settings.secret_key is not None:
        return "SRE_JUDGE_SECRET_KEY"
    return f"SRE_JUDGE_SECRET_KEY_FILE ({settings.secret_key_file.resolve()})"


def load_service_key(settings: Settings, *, create: bool) -> ServiceKey:
    """The configured key; with ``create``, a new random key file when none exists."""
    if settings.secret_key is not None:
        return _key_from_text(settings.secret_key.get_secret_value(), "SRE_JUDGE_SECRET_KEY")
    path = settings.secret_key_file
    if not path.exists():
        if not create:
            raise MissingServiceKey(
                f"no service key at {path.resolve()}: set SRE_JUDGE_SECRET_KEY_FILE to the "
                "key file the service was run with (or SRE_JUDGE_SECRET_KEY)"
            )
        _create_key_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MissingServiceKey(
            f"SRE_JUDGE_SECRET_KEY_FILE: cannot read the service key {path.resolve()}: "
            f"{exc.strerror}"
        ) from None
    except UnicodeDecodeError:  # random bytes written as they are: openssl rand without -hex
        raise MissingServiceKey(
            f"SRE_JUDGE_SECRET_KEY_FILE: the service key {path.resolve()} is not text: give "
            "the key file the service was run with (a new one, openssl rand -hex 32, only "
            "for a database whose audit log was never keyed)"
        ) from None
    return _key_from_text(text, f"SRE_JUDGE_SECRET_KEY_FILE ({path.resolve()})")


def key_for_database(settings: Settings, engine: Engine, *, create: bool = True) -> ServiceKey:
    """The configured key, checked against the database's audit log: created when
    missing (and ``create``) only while the log holds no keyed row; MissingServiceKey
    when it is missing or is not the key the log is keyed with, naming where it came
    from. ``create`` is False for a process that must be given the deployment's key (a
    worker) and for reading commands, which change nothing."""
    keyed_with = newest_key_id(engine)
    key = load_service_key(settings, create=create and keyed_with is None)
    if keyed_with is not None and ChainKey.of(key).key_id != keyed_with:
        raise MissingServiceKey(
            f"the database's audit log is keyed with key {keyed_with}, not with key "
            f"{ChainKey.of(key).key_id} of {key_origin(settings)}: give this process the "
            "key the service was run with; a row appended with another key would break "
            "the audit chain for good"
        )
    return key


def _key_from_text(text: str, origin: str) -> ServiceKey:
    secret = text.strip().encode()
    if len(secret) < MIN_KEY_BYTES:
        raise MissingServiceKey(
            f"the service key of {origin} is shorter than {MIN_KEY_BYTES} characters: give "
            "the key the service was run with (a new one, openssl rand -hex 32, only for a "
            "database whose audit log was never keyed)"
        )
    return ServiceKey(secret)


def _create_key_file(path: Path) -> None:
    """Write a new random key readable by its owner only; never overwrite one.

    The key is written to a private temporary file beside ``path`` and linked into place,
    so the file appears whole or not at all: several processes starting together (``serve
    --processes``, a test worker and its commands) never read a key still being written.
    A key that cannot be written there (its folder unwritable or not a folder, a
    read-only file system) is a MissingServiceKey naming the file and the OS's reason.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".sre-judge-key-")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # mode 0600
                handle.write(secrets.token_hex(32) + "\n")
            with contextlib.suppress(FileExistsError):  # another process made it first: theirs
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    except OSError as exc:
        raise MissingServiceKey(
            f"SRE_JUDGE_SECRET_KEY_FILE: cannot create the service key {path.resolve()}: "
            f"{_os_reason(exc, path)}: set SRE_JUDGE_SECRET_KEY_FILE to a file this process "
            "may create (or give the key in SRE_JUDGE_SECRET_KEY)"
        ) from None


def _os_reason(exc: OSError, path: Path) -> str:
    """The OS's reason, naming the file it concerns when that is not in the key's folder
    (a folder on the way to it that is not a folder, say)."""
    reason = exc.strerror or type(exc).__name__
    if exc.filename is not None and Path(os.fsdecode(exc.filename)).parent != path.parent:
        return f"{reason} ({Path(os.fsdecode(exc.filename)).resolve()})"
    return reason
