"""``sre-judge tokens``: create, list and revoke API tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

import click

from api.service.settings import Settings

if TYPE_CHECKING:
    from storage import Store, TokenRecord

__all__ = ["tokens_group"]

T = TypeVar("T")


def _with_store(action: Callable[[Store], Awaitable[T]]) -> T:
    from storage import Store, make_engine, upgrade

    settings = Settings()

    async def run() -> T:
        await upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            return await action(Store(engine))
        finally:
            await engine.dispose()

    return asyncio.run(run())


@click.group("tokens")
def tokens_group() -> None:
    """API tokens: each belongs to a named principal with one role."""


@tokens_group.command("create")
@click.option("--role", type=click.Choice(["submitter", "adjudicator", "admin"]), required=True)
@click.option("--name", required=True, help="the principal: who or what uses the token")
@click.option("--expires-in-days", type=click.IntRange(min=1), help="expiry (default: never)")
def tokens_create(role: str, name: str, expires_in_days: int | None) -> None:
    """Print a new token once, alone on one line of stdout."""
    expires_at = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def create(store: Store) -> str:
        plaintext, _ = await store.tokens.create(name=name, role=role, expires_at=expires_at)
        return plaintext

    click.echo(_with_store(create))


@tokens_group.command("list")
def tokens_list() -> None:
    """Every token: id, principal, role, expiry, revocation (never the secret)."""

    async def listing(store: Store) -> list[TokenRecord]:
        return list(await store.tokens.all())

    for r in _with_store(listing):
        fields = (r.id, r.name, r.role, r.expires_at or "-", r.revoked_at or "-")
        click.echo("\t".join(str(x) for x in fields))


@tokens_group.command("revoke")
@click.argument("token_id")
def tokens_revoke(token_id: str) -> None:
    """Revoke a token by id: it gets 401 from now on."""
    from storage import NotFound

    async def revoke(store: Store) -> None:
        await store.tokens.revoke(token_id, actor="cli")

    try:
        _with_store(revoke)
    except NotFound:
        raise click.UsageError(f"no token with id {token_id!r}") from None
    click.echo(f"revoked {token_id}", err=True)
