"""The service key the apps and commands under test use: that of
``SRE_JUDGE_SECRET_KEY_FILE`` (``tests/conftest.py`` puts it outside the work tree).

A database the tests write through a ``Store`` and then hand to an app, a runtime or a
command must be keyed with it: those refuse a database whose audit log is keyed with
another key (a chain they would break for good).
"""

from __future__ import annotations

import functools

from storage.keys import ServiceKey

__all__ = ["session_key"]


@functools.cache
def session_key() -> ServiceKey:
    """The service key of ``SRE_JUDGE_SECRET_KEY_FILE`` (made on first use)."""
    from api.service.secret_key import load_service_key
    from api.service.settings import Settings

    return load_service_key(Settings(), create=True)
