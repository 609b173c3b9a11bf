"""Commands that read the database refuse to create an empty one, and no command
upgrades a deployment's schema.

Run from another folder, the default SQLite URL (``./sre-judge.db``) names a file that
is not there; opening it would create an empty database and the command would then
fail on missing tables or, worse, report nothing. These checks stop first, with one
line that names the database URL and what to run. A database at another revision than
this release's newest is refused as well (:func:`storage.require_newest`: one line
naming both revisions): a newer release's command run against a deployment whose
servers and workers run the older release neither upgrades the schema under them nor
fails on a column the older schema lacks. Only ``serve`` and ``migrate`` upgrade.
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = [
    "DatabaseUnavailable",
    "database_present",
    "require_database",
    "require_migrated",
    "require_newest_or_none",
]

_HINT = (
    "run `sre-judge migrate` (or `sre-judge serve`) there first, "
    "or point SRE_JUDGE_DATABASE_URL at the service's database"
)


class DatabaseUnavailable(click.ClickException):
    """No usable database at the configured URL: bad usage (exit 2), one line."""

    exit_code = 2


def _sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names, or None (another database, memory, a URI)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite"):
        return None
    name = parsed.database or ""
    if name in ("", ":memory:") or name.startswith("file:") or parsed.query.get("uri"):
        return None
    return Path(name)


def database_present(url: str) -> bool:
    """False for a SQLite URL whose file does not exist (opening it would create it);
    True for any other database, which opening does not create."""
    path = _sqlite_file(url)
    return path is None or path.exists()


def require_database(url: str) -> None:
    """Refuse a SQLite URL whose file does not exist (opening it would create it)."""
    from api.service.settings import mask_url

    path = _sqlite_file(url)
    if path is not None and not path.exists():
        raise DatabaseUnavailable(
            f"no database at {mask_url(url)} ({path.resolve()} does not exist): {_HINT}"
        )


async def require_migrated(url: str) -> None:
    """Refuse a database that was never migrated (an empty PostgreSQL database, say:
    bad usage), and one at another revision than this code's newest
    (:class:`~storage.errors.SchemaMismatch`)."""
    import asyncio

    from api.service.settings import mask_url
    from storage import current_revision, require_newest

    require_database(url)
    if await current_revision(url) is None:
        shown = mask_url(url)
        raise DatabaseUnavailable(f"the database at {shown} has no sre-judge schema: {_HINT}")
    await asyncio.to_thread(require_newest, url)


async def require_newest_or_none(url: str) -> None:
    """For the commands that write, which make the schema of a new database: refuse
    (:class:`~storage.errors.SchemaMismatch`) a database at another revision than this
    code's newest, before anything (a key, a schema) is made. A database never migrated
    passes, and so does a SQLite file not there yet, which is not opened (that would
    create it)."""
    import asyncio

    from storage import require_newest

    if database_present(url):
        await asyncio.to_thread(require_newest, url, never_migrated=True)
