"""``sre-judge tokens``: create, list and revoke API tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from api.cli.edge import with_store

if TYPE_CHECKING:
    from storage import Store, TokenRecord

__all__ = ["tokens_group"]

#: the longest principal name a token may carry (the API's limit too)
NAME_MAX = 128


@click.group("tokens")
def tokens_group() -> None:
    """API tokens: each belongs to a named principal with one role."""


@tokens_group.command("create")
@click.option("--role", type=click.Choice(["submitter", "adjudicator", "admin"]), required=True)
@click.option("--name", required=True, help="the principal: who or what uses the token")
@click.option("--expires-in-days", type=click.IntRange(min=1), help="expiry (default: never)")
@click.option(
    "--inline-ground-truth",
    is_flag=True,
    help="the token may send its own ground truth (when SRE_JUDGE_INLINE_GROUND_TRUTH=per_token)",
)
def tokens_create(
    role: str, name: str, expires_in_days: int | None, inline_ground_truth: bool
) -> None:
    """Print a new token once, alone on one line of stdout.

    Example: sre-judge tokens create --role submitter --name ci-harness --inline-ground-truth
    """
    if not 1 <= len(name) <= NAME_MAX:  # what the token table's name column holds
        raise click.BadParameter(f"1 to {NAME_MAX} characters", param_hint="--name")
    expires_at = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def create(store: Store) -> str:
        plaintext, _ = await store.tokens.create(
            name=name, role=role, expires_at=expires_at, inline_ground_truth=inline_ground_truth
        )
        return plaintext

    click.echo(with_store(create, migrate=True))


@tokens_group.command("list")
def tokens_list() -> None:
    """Every token: id, principal, role, expiry, revocation (never the secret)."""

    async def listing(store: Store) -> list[TokenRecord]:
        return list(await store.tokens.all())

    for r in with_store(listing, migrate=True):
        grant = "inline-ground-truth" if r.inline_ground_truth else "-"
        fields = (r.id, r.name, r.role, r.expires_at or "-", r.revoked_at or "-", grant)
        click.echo("\t".join(str(x) for x in fields))


@tokens_group.command("revoke")
@click.argument("token_id")
def tokens_revoke(token_id: str) -> None:
    """Revoke a token by id: it gets 401 from now on."""
    from storage import NotFound

    async def revoke(store: Store) -> None:
        try:
            await store.tokens.revoke(token_id, actor="cli")
        except NotFound:
            raise click.UsageError(f"no token with id {token_id!r}") from None

    with_store(revoke, migrate=True)
    click.echo(f"revoked {token_id}", err=True)
