"""Writing a file all or nothing: a temporary file beside it, renamed into place when whole.

A reader of the path sees the previous file or the complete new one, never a fragment:
on any error, or Ctrl-C, the temporary file is removed and the path left as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["replace_atomically"]


def _mode_for(path: Path) -> int:
    """The mode the file would get if written plainly: the old file's, else 0666 less umask."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def replace_atomically(path: Path) -> Iterator[IO[bytes]]:
    """``with replace_atomically(p) as f: f.write(...)``: ``p`` replaced when the block ends.

    The temporary file (``.NAME.*.part`` in the same directory, so the rename stays on one
    file system) is flushed to disk, given the mode a plain write would give, and renamed
    over ``path``; if the block raises, it is removed and ``path`` is untouched.
    """
    path = Path(path)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below on every path)
        mode="w+b", dir=path.parent, prefix=f".{path.name}.", suffix=".part", delete=False
    )
    temporary = Path(handle.name)
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, _mode_for(path))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
