"""``export --server``: a server's export downloaded, and taken only when it is that export.

All or nothing, as in the database mode: the answer is streamed into the caller's sink (a
temporary file beside ``--output``, or a spool) and is the export only when it is a
``200`` stating ``X-Export-Rows`` and ``Repr-Digest`` (RFC 9530) and its bytes have that
SHA-256. Anything else (a redirect, a proxy's page, a body altered or cut on the way) is
an error raised before the caller renames or prints what it received, so nothing is
written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import IO, Any

import click

from api.reports.export_writer import HashingSink, stated_sha256

__all__ = ["download_export", "failed_on_server"]

_PATH = "/v1/exports/gradings"


@contextlib.contextmanager
def failed_on_server() -> Iterator[None]:
    """An export the server failed to write (5xx): exit 1 like the database mode's."""
    from api.cli.remote import Refused

    try:
        yield
    except Refused as refused:
        if refused.status < 500:
            raise
        raise click.ClickException(f"{refused.message}; nothing was written") from None


def _stated_rows(value: str | None) -> int | None:
    """The count ``X-Export-Rows`` states, else None."""
    try:
        rows = int(value) if value is not None else None
    except ValueError:
        return None
    return rows if rows is not None and rows >= 0 else None


def download_export(server: str, params: dict[str, Any], sink: IO[bytes]) -> tuple[int, str]:
    """``GET /v1/exports/gradings`` of ``server`` with ``params``, streamed into ``sink``:
    the rows it holds (``X-Export-Rows``) and the SHA-256 of its bytes in hex.

    Raises a usage error (exit 2) for a server that cannot be reached, an answer it
    refused or a redirect, and an error of exit 1 for an export the server failed to
    write, an answer cut on the way, or one that is not its export: no ``X-Export-Rows``
    or ``Repr-Digest``, or bytes whose SHA-256 is not the one stated. The caller then
    discards what ``sink`` received.
    """
    from api.cli.remote import remote

    hashing = HashingSink(sink)
    with remote(server) as client, failed_on_server():
        response = client.download(_PATH, hashing, params=params)
        where = client.url
    rows = _stated_rows(response.headers.get("X-Export-Rows"))
    stated = stated_sha256(response.headers.get("Repr-Digest"))
    if rows is None or stated is None:
        raise click.ClickException(
            f"{where} answered GET {_PATH} without X-Export-Rows and a sha-256 Repr-Digest: "
            "not an sre-judge export; nothing was written"
        )
    received = hashing.digest.digest()
    if received != stated:
        raise click.ClickException(
            f"{where} sent an export whose SHA-256 ({received.hex()}) is not the one its "
            f"Repr-Digest states ({stated.hex()}): changed or cut on the way; nothing was written"
        )
    return rows, received.hex()
