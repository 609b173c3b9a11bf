"""Commands that read the database refuse to create an empty one.

Run from another folder, the default SQLite URL (``./sre-judge.db``) names a file that
is not there; opening it would create an empty database and the command would then
fail on missing tables or, worse, report nothing. These checks stop first, with one
line that names the database URL and what to run.
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["DatabaseUnavailable", "require_database", "require_migrated", "shown_url"]

_HINT = (
    "run `sre-judge migrate` (or `sre-judge serve`) there first, "
    "or point SRE_JUDGE_DATABASE_URL at the service's database"
)


class DatabaseUnavailable(click.ClickException):
    """No usable database at the configured URL: bad usage (exit 2), one line."""

    exit_code = 2


def shown_url(url: str) -> str:
    """The URL as it may be printed: any password replaced by ``***``, one given as
    ``?password=`` (libpq's) too."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from api.service.settings import mask_passwords

    try:
        parsed = make_url(url)
    except ArgumentError:
        return mask_passwords(url)
    if parsed.password is None:
        return mask_passwords(url)  # a password in the query (libpq's ?password=)
    return mask_passwords(parsed.render_as_string(hide_password=True))


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


def require_database(url: str) -> None:
    """Refuse a SQLite URL whose file does not exist (opening it would create it)."""
    path = _sqlite_file(url)
    if path is not None and not path.exists():
        raise DatabaseUnavailable(
            f"no database at {shown_url(url)} ({path.resolve()} does not exist): {_HINT}"
        )


async def require_migrated(url: str) -> None:
    """Refuse a database that was never migrated (an empty PostgreSQL database, say)."""
    from storage import current_revision

    require_database(url)
    if await current_revision(url) is None:
        shown = shown_url(url)
        raise DatabaseUnavailable(f"the database at {shown} has no sre-judge schema: {_HINT}")
