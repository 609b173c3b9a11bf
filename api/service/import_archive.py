"""Unpacking an uploaded SREGym results archive (tar.gz or zip) without trusting it.

Only regular files are unpacked, and of them only what an import reads (``*.csv`` and a
problems file); every name must be a relative path inside the archive (no absolute
path, no drive, no ``..``, no backslash; a ``./`` prefix and the ``.`` folder that
``tar -C results .`` writes are fine), links and devices are refused, and the archive
may hold at most :data:`MAX_MEMBERS` entries and :data:`MAX_UNPACKED_BYTES` once
unpacked. Sizes are counted as bytes are really written, never taken from the headers,
so a zip bomb stops at the limit. :func:`check_archive` runs the same checks on the
names and declared sizes alone, so a bad upload is refused before it is stored.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal

__all__ = [
    "MAX_MEMBERS",
    "MAX_UNPACKED_BYTES",
    "PROBLEMS_FILES",
    "ArchiveKind",
    "UnsafeArchive",
    "check_archive",
    "problems_file",
    "unpack_archive",
]

ArchiveKind = Literal["tar.gz", "zip"]
#: entries an archive may hold
MAX_MEMBERS = 100_000
#: bytes an archive may unpack to
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
#: a problems file at the archive's top (or under one top folder) gives the ground truths
PROBLEMS_FILES = ("problems.jsonl", "problems.yaml", "problems.yml")
_COPY_CHUNK = 1024 * 1024


class UnsafeArchive(ValueError):
    """An archive that cannot be unpacked safely, or not at all; the message says why."""


@dataclass(frozen=True)
class _Entry:
    name: str
    regular: bool
    directory: bool
    size: int


def _wanted(path: PurePosixPath) -> bool:
    return path.suffix.lower() == ".csv" or path.name in PROBLEMS_FILES


def _safe_name(name: str, *, directory: bool = False) -> PurePosixPath:
    """``name`` as a relative path inside the archive, else UnsafeArchive.

    ``./`` prefixes are dropped, as ``tar czf x.tgz -C results .`` writes every name
    with one; a directory named ``.`` (the archive's own top) has no parts and is
    accepted as such, a file without a name is not."""
    if "\\" in name or "\x00" in name:
        raise UnsafeArchive(f"{name!r}: a name with a backslash or NUL")
    path = PurePosixPath(name)
    if path.is_absolute() or (path.parts and ":" in path.parts[0]):
        raise UnsafeArchive(f"{name!r}: an absolute path")
    if ".." in path.parts:
        raise UnsafeArchive(f"{name!r}: a path leaving the archive (..)")
    if not path.parts and not directory:
        raise UnsafeArchive(f"{name!r}: an empty name")
    return path


def _tar_entries(tar: tarfile.TarFile) -> Iterator[tuple[_Entry, tarfile.TarInfo]]:
    for member in tar:
        entry = _Entry(member.name, member.isreg(), member.isdir(), member.size)
        if not (entry.regular or entry.directory):
            raise UnsafeArchive(f"{member.name!r}: links and devices are not accepted")
        yield entry, member


def _zip_entries(zipped: zipfile.ZipFile) -> Iterator[tuple[_Entry, zipfile.ZipInfo]]:
    for info in zipped.infolist():
        mode = info.external_attr >> 16
        if mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
            raise UnsafeArchive(f"{info.filename!r}: links and devices are not accepted")
        yield _Entry(info.filename, not info.is_dir(), info.is_dir(), info.file_size), info


def _walk(data: bytes, kind: ArchiveKind) -> Iterator[tuple[_Entry, IO[bytes] | None]]:
    """Every entry, checked, with a reader of its bytes when an import wants them."""
    count = 0
    try:
        if kind == "zip":
            with zipfile.ZipFile(io.BytesIO(data)) as zipped:
                for entry, info in _zip_entries(zipped):
                    count = _count(count)
                    path = _safe_name(entry.name, directory=entry.directory)
                    wanted = entry.regular and _wanted(path)
                    yield entry, zipped.open(info) if wanted else None
        else:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                for entry, member in _tar_entries(tar):
                    count = _count(count)
                    path = _safe_name(entry.name, directory=entry.directory)
                    wanted = entry.regular and _wanted(path)
                    yield entry, tar.extractfile(member) if wanted else None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise UnsafeArchive(f"not a readable {kind} archive: {exc}") from None


def _count(count: int) -> int:
    if count + 1 > MAX_MEMBERS:
        raise UnsafeArchive(f"more than {MAX_MEMBERS} entries")
    return count + 1


def check_archive(data: bytes, kind: ArchiveKind, *, limit: int = MAX_UNPACKED_BYTES) -> int:
    """The CSV files of the archive; ``UnsafeArchive`` if any name or size is refused."""
    declared = files = 0
    for entry, reader in _walk(data, kind):
        if reader is not None:
            reader.close()
            declared += entry.size
            files += entry.name.lower().endswith(".csv")
        if declared > limit:
            raise UnsafeArchive(f"unpacks to more than {limit} bytes")
    if files == 0:
        raise UnsafeArchive("the archive holds no CSV file")
    return files


def unpack_archive(
    data: bytes, kind: ArchiveKind, target: Path, *, limit: int = MAX_UNPACKED_BYTES
) -> None:
    """Unpack the archive's CSV and problems files under ``target`` (an empty folder)."""
    written = 0
    root = target.resolve()
    for entry, reader in _walk(data, kind):
        if reader is None:
            continue
        destination = (root / _safe_name(entry.name)).resolve()
        if not destination.is_relative_to(root):
            raise UnsafeArchive(f"{entry.name!r}: a path leaving the archive")
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            out = destination.open("xb")
        except FileExistsError:
            raise UnsafeArchive(f"{entry.name!r}: given twice") from None
        with reader, out:
            while chunk := reader.read(_COPY_CHUNK):
                written += len(chunk)
                if written > limit:
                    raise UnsafeArchive(f"unpacks to more than {limit} bytes")
                out.write(chunk)


def problems_file(folder: Path) -> Path | None:
    """The problems file at the folder's top, or under its one top folder, if any."""
    tops = [folder]
    children = [p for p in folder.iterdir() if p.is_dir()]
    if len(children) == 1:
        tops.append(children[0])
    for top in tops:
        for name in PROBLEMS_FILES:
            if (top / name).is_file():
                return top / name
    return None
