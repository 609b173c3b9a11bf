"""One compiled-statement cache for every engine of a test process.

SQLAlchemy caches a statement's compiled form per engine, keyed by the engine's
dialect object. The service makes one engine per process, so it compiles each statement
once; the suite makes one per test (a database of its own each), and recompiled every
statement in every test: about 35 compilations and 30 ms of CPU a test, a sixth of the
fast loop. Here every engine of one kind (dialect class and driver) made after one of
its kind has connected takes that engine's dialect and compiled cache: the dialect of
one server version and driver, holding nothing of a connection or a database.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.util import LRUCache

__all__ = ["install"]

#: per (dialect class, driver): the first dialect of the kind that connected, initialized
_SHARED: dict[tuple[type, str], Any] = {}
#: the compiled statements of every engine sharing a dialect
_CACHE: LRUCache[Any, Any] = LRUCache(5000)
#: arguments of the pool, the driver's connection and the engine's own error messages
#: only (``hide_parameters``): an engine made with any other (a dialect option) keeps a
#: dialect of its own
_POOL_ONLY = frozenset(
    {
        "poolclass",
        "connect_args",
        "pool_pre_ping",
        "pool_size",
        "max_overflow",
        "pool_timeout",
        "hide_parameters",
    }
)


def _create_engine(url: Any, **kwargs: Any) -> Engine:
    engine = sqlalchemy.create_engine(url, **kwargs)
    if not _POOL_ONLY.issuperset(kwargs):
        return engine
    kind = (type(engine.dialect), engine.url.drivername)
    shared = _SHARED.get(kind)
    engine._compiled_cache = _CACHE  # keyed by dialect: each kind's entries apart
    if shared is None:  # the first of its kind: shared once it has connected (initialized)

        @event.listens_for(engine.pool, "first_connect")
        def _initialized(*_: Any) -> None:
            _SHARED.setdefault(kind, engine.dialect)

        return engine
    engine.dialect = shared
    engine.pool._dialect = shared
    return engine


def install() -> None:
    """Make ``storage.engine.make_engine`` share dialects and compiled statements."""
    import storage.engine

    storage.engine.create_engine = _create_engine  # type: ignore[attr-defined]
