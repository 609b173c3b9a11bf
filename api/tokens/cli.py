"""``sre-judge tokens``: create, list and revoke API tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from api.cli.edge import CommandError, with_store
from api.cli.options import emit, format_option

if TYPE_CHECKING:
    from storage import Store, TokenRecord

__all__ = ["tokens_group"]

#: the longest principal name a token may carry (the API's limit too)
NAME_MAX = 128


@click.group("tokens")
def tokens_group() -> None:
    """API tokens: each belongs to a named principal with one role.

    \b
    Example:
      TOKEN=$(sre-judge tokens create --role submitter --name ci-harness)
    """


@tokens_group.command("create")
@click.option("--role", type=click.Choice(["submitter", "adjudicator", "admin"]), required=True)
@click.option("--name", required=True, help="the principal: who or what uses the token")
@click.option(
    "--expires-in-days",
    type=click.IntRange(min=1, max=36_500),
    help="expiry, at most 100 years (default: never)",
)
@click.option(
    "--inline-ground-truth",
    is_flag=True,
    help="the token may send its own ground truth (when SRE_JUDGE_INLINE_GROUND_TRUTH=per_token)",
)
def tokens_create(
    role: str, name: str, expires_in_days: int | None, inline_ground_truth: bool
) -> None:
    """Print a new token once, alone on one line of stdout.

    \b
    Example:
      sre-judge tokens create --role submitter --name ci-harness --inline-ground-truth
    """
    if not 1 <= len(name) <= NAME_MAX:  # what the token table's name column holds
        raise click.BadParameter(f"1 to {NAME_MAX} characters", param_hint="--name")
    expires_at = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def create(store: Store) -> str:
        from api.tokens.use_cases import issue_token

        plaintext, _ = await issue_token(
            store,
            actor="cli",  # as every other command records its actions
            name=name,
            role=role,
            expires_at=expires_at,
            inline_ground_truth=inline_ground_truth,
        )
        return plaintext

    click.echo(with_store(create, migrate=True))


#: the columns of ``tokens list``
TOKEN_COLUMNS = ["id", "name", "role", "expires_at", "revoked_at", "grants"]


@tokens_group.command("list")
@format_option()
def tokens_list(fmt: str) -> None:
    """Every token: id, principal, role, expiry, revocation (never the secret).

    \b
    Example:
      sre-judge tokens list --format csv
    """
    from api.tabular import Tabular
    from api.tokens.use_cases import all_tokens

    async def listing(store: Store) -> list[TokenRecord]:
        return await all_tokens(store)

    rows = []
    for r in with_store(listing):
        grant = "inline-ground-truth" if r.inline_ground_truth else None
        times = [t.isoformat() if t is not None else None for t in (r.expires_at, r.revoked_at)]
        rows.append([r.id, r.name, r.role, *times, grant])
    data = [dict(zip(TOKEN_COLUMNS, row, strict=True)) for row in rows]
    emit(data, Tabular("API tokens", TOKEN_COLUMNS, rows), fmt)


@tokens_group.command("revoke")
@click.argument("token_id")
def tokens_revoke(token_id: str) -> None:
    """Revoke a token by id: it gets 401 from now on.

    \b
    Example:
      sre-judge tokens revoke 01J9Z3K7Q2
    """
    from api.tokens.use_cases import revoke_token
    from storage import NotFound

    async def revoke(store: Store) -> None:
        try:
            await revoke_token(store, token_id, actor="cli")
        except NotFound:
            raise CommandError(f"no token with id {token_id!r}") from None

    with_store(revoke)
    click.echo(f"revoked {token_id}", err=True)
