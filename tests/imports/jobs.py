"""What the import tests share: an archive built in memory, and an import job followed to
its end over the API."""

from __future__ import annotations

import asyncio
import io
import tarfile
from typing import Any

__all__ = ["finished", "tar_gz"]


def tar_gz(entries: dict[str, bytes] | list[tuple[str, bytes]]) -> bytes:
    """A tar.gz holding ``entries`` (name -> content, or pairs: a name may repeat) as
    regular files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in entries.items() if isinstance(entries, dict) else entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def finished(client: Any, location: str, headers: dict[str, str]) -> dict[str, Any]:
    """The import job at ``location`` once it is done or failed (polled for 15 s)."""
    for _ in range(300):
        job = (await client.get(location, headers=headers)).json()
        if job["state"] in ("done", "failed"):
            return dict(job)
        await asyncio.sleep(0.05)
    raise AssertionError(f"the job did not finish: {job}")
