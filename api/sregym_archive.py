"""Unpacking an uploaded SREGym results archive (tar.gz or zip) without trusting it.

Only regular files are unpacked, and of them only what an import reads (``*.csv`` in any
case, :func:`is_csv_file`, and a problems file); every name must be a relative path
inside the archive (:func:`relative_path`: no absolute path, no drive, no ``..``, no
backslash, no byte that is not UTF-8, a zip's names read as UTF-8 whether it flags them
so or not; a ``./`` prefix and the ``.`` folder that ``tar -C results .`` writes are
fine, and so is any other colon, as in a run folder named by its time), links and
devices are refused, and the archive may hold at most
:data:`MAX_MEMBERS` entries and :data:`MAX_UNPACKED_BYTES` once unpacked. The unpacked
size counts every member, whether an import reads it or not: a tar.gz is read as one
stream whose bytes are counted as they are decompressed, so a bomb in any member stops
at the limit without the rest being decompressed; a zip's members an import does not
read are counted by their declared size (they are never decompressed), the others as
bytes are really written. A damaged archive is refused, never unpacked up to the damage:
a tar ends only at its end blocks (a damaged, cut or missing header is an error, not
the end), and a zip member's bytes are read to the end, where its CRC is checked.
:func:`check_archive` runs the same checks, reading every file an import reads, without
writing anything, so a bad upload is refused before it is stored. Both read an archive
given as bytes or as a binary file (from its start, never whole into memory), with the
same checks either way.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import IO, Literal, Self

from storage.storable import unstorable

__all__ = [
    "MAX_MEMBERS",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_UNPACKED_BYTES",
    "PROBLEMS_FILES",
    "ArchiveKind",
    "UnsafeArchive",
    "check_archive",
    "csv_files",
    "entry_path",
    "is_csv_file",
    "problems_file",
    "relative_path",
    "unpack_archive",
]

ArchiveKind = Literal["tar.gz", "zip"]
#: entries an archive may hold
MAX_MEMBERS = 100_000
#: bytes an archive may unpack to
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
#: a problems file at the archive's top (or under one top folder) gives the ground truths
PROBLEMS_FILES = ("problems.jsonl", "problems.yaml", "problems.yml")
#: bytes read and written at a time: a few copies of it are what unpacking holds in memory
_COPY_CHUNK = 256 * 1024
#: a Windows drive, the one first folder with a colon that is refused
_DRIVE = re.compile(r"[A-Za-z]:")


class UnsafeArchive(ValueError):
    """An archive that cannot be unpacked safely, or not at all; the message says why."""


@dataclass(frozen=True)
class _Entry:
    name: str
    regular: bool
    directory: bool
    size: int


def is_csv_file(path: PurePath) -> bool:
    """Is this a CSV file an import reads: a name ending ``.csv`` in any case
    (``RESULTS.CSV`` too), in an archive as in a folder."""
    return path.name.lower().endswith(".csv")


def csv_files(folder: Path) -> list[Path]:
    """The CSV files under ``folder`` (:func:`is_csv_file`), sorted by path: files only, a
    folder named ``backup.csv`` is no CSV file (the files in it are)."""
    return sorted(path for path in folder.rglob("*") if is_csv_file(path) and path.is_file())


def _wanted(path: PurePosixPath) -> bool:
    return is_csv_file(path) or path.name in PROBLEMS_FILES


#: the longest folder or file name (UTF-8 bytes) a file system takes (Linux's NAME_MAX)
MAX_NAME_BYTES = 255
#: the longest path inside a results folder, well within Linux's PATH_MAX (4,096) with
#: the temporary folder an archive is unpacked to
MAX_PATH_BYTES = 1024


def relative_path(name: str, *, top: bool = False) -> PurePosixPath:
    """``name`` as a relative path inside a results folder, else UnsafeArchive: the one
    rule for an archive's entries, an imported row's file and an export's files.

    Refused: a backslash or NUL, a byte that is not UTF-8 (read as a lone surrogate, as
    ``tarfile`` and the file system give it), an absolute path, a drive (a first folder
    named ``C:``), ``..``, no name at all (``top``: a directory named ``.``, the
    archive's own top, has no parts and is accepted as such). Any other colon is fine: a
    run folder named by its time (``2025-06-01T12:00:00``) is a legal name on Linux and
    macOS. ``./`` prefixes are dropped, as ``tar czf x.tgz -C results .`` writes every
    name with one."""
    if "\\" in name or "\x00" in name:
        raise UnsafeArchive(f"{name!r}: a name with a backslash or NUL")
    if unstorable(name) is not None:  # no database stores it, no JSON answer shows it
        raise UnsafeArchive(f"{name!r}: a name that is not UTF-8 text")
    path = PurePosixPath(name)
    if path.is_absolute():
        raise UnsafeArchive(f"{name!r}: an absolute path")
    if path.parts and _DRIVE.fullmatch(path.parts[0]):
        raise UnsafeArchive(f"{name!r}: a path on a drive")
    if ".." in path.parts:
        raise UnsafeArchive(f"{name!r}: a path leaving the archive (..)")
    if not path.parts and not top:
        raise UnsafeArchive(f"{name!r}: an empty name")
    return path


def entry_path(name: str, *, top: bool = False) -> PurePosixPath:
    """An archive entry's ``name`` as :func:`relative_path` reads it, also refused where
    it could not be unpacked: a folder or file name longer than a file system takes
    (:data:`MAX_NAME_BYTES` of UTF-8), or a path longer than :data:`MAX_PATH_BYTES`. A
    results folder on disk (and the one CSV of an export's file layout) holds no such
    limit: only an upload is unpacked. An export's folder and archive keep to it, so
    they can be uploaded again."""
    path = relative_path(name, top=top)
    if any(len(part.encode()) > MAX_NAME_BYTES for part in path.parts):
        raise UnsafeArchive(
            f"{name[:80]!r}...: a folder or file name longer than {MAX_NAME_BYTES} bytes"
        )
    if len(name.encode()) > MAX_PATH_BYTES:
        raise UnsafeArchive(f"{name[:80]!r}...: a path longer than {MAX_PATH_BYTES} bytes")
    return path


#: what ``tarfile`` raises for a header block of zeros (defined there, not in its stubs)
_ZEROS: type[tarfile.HeaderError] = tarfile.EOFHeaderError  # type: ignore[attr-defined]


class _StrictTarInfo(tarfile.TarInfo):
    """A tar header that is read whole or refused. ``tarfile`` ends an archive at the
    first header after the first that it cannot read (damaged, cut short, missing), so
    a damaged or truncated upload would be imported up to the damage as if complete:
    here only a proper end, two blocks of zeros, ends it."""

    @classmethod
    def fromtarfile(cls, tarfile_: tarfile.TarFile) -> Self:
        at = tarfile_.offset
        try:
            return super().fromtarfile(tarfile_)
        except _ZEROS:  # a block of zeros: the end, if another follows
            if tarfile_.fileobj.read(tarfile.BLOCKSIZE) != tarfile.NUL * tarfile.BLOCKSIZE:
                raise tarfile.ReadError(f"no end of archive after byte {at}") from None
            raise
        except tarfile.HeaderError as exc:
            raise tarfile.ReadError(f"a damaged or missing header at byte {at}: {exc}") from None


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


class _Budgeted(io.RawIOBase):
    """A decompressed stream that stops as soon as more than ``limit`` bytes came out."""

    def __init__(self, stream: IO[bytes] | io.BufferedIOBase, limit: int) -> None:
        self._stream, self._limit, self._read = stream, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._stream.read(len(buffer))
        self._read += len(data)
        if self._read > self._limit:
            raise UnsafeArchive(f"unpacks to more than {self._limit} bytes")
        buffer[: len(data)] = data
        return len(data)


def _decompressed(raw: IO[bytes]) -> IO[bytes] | io.BufferedIOBase:
    """A tar archive (read from its start) as a stream, decompressed (gzip, bzip2, xz) as
    it is read."""
    head = raw.read(6)
    raw.seek(0)
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)
    if head[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if head[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


@contextmanager
def _readable(kind: ArchiveKind) -> Iterator[None]:
    """Errors reading the archive, its entries or a member's bytes, as UnsafeArchive."""
    try:
        yield
    except (
        tarfile.TarError,
        zipfile.BadZipFile,  # a zip member whose bytes fail their CRC check, too
        EOFError,
        OSError,
        zlib.error,
        lzma.LZMAError,
        RuntimeError,  # a zip member with a password
        NotImplementedError,  # a zip member compressed as zipfile cannot read (AES, say)
        UnicodeDecodeError,  # a zip name that is not UTF-8
    ) as exc:
        raise UnsafeArchive(f"not a readable {kind} archive: {exc}") from None


def _chunks(reader: IO[bytes], kind: ArchiveKind) -> Iterator[bytes]:
    """A member's bytes to its end, a chunk at a time (a zip member's CRC is checked at
    its end); a member that cannot be read is UnsafeArchive."""
    with reader:
        while True:
            with _readable(kind):
                chunk = reader.read(_COPY_CHUNK)
            if not chunk:
                return
            yield chunk


def _walk(
    source: bytes | IO[bytes], kind: ArchiveKind, limit: int, members: int
) -> Iterator[tuple[_Entry, IO[bytes] | None]]:
    """Every entry, checked, with a reader of its bytes when an import wants them (read
    it before the next entry). A tar archive stops once ``limit`` bytes were unpacked,
    any archive once it held more than ``members`` entries. ``source``: the archive's
    bytes, or a seekable binary file read from its start."""
    count = 0
    file = io.BytesIO(source) if isinstance(source, bytes) else source
    with _readable(kind):
        file.seek(0)
        if kind == "zip":
            _zip_entries_within(file, members)
            file.seek(0)
            # names are UTF-8, flagged or not (Info-ZIP's ``zip`` sets no flag), never cp437
            with zipfile.ZipFile(file, metadata_encoding="utf-8") as zipped:
                for entry, info in _zip_entries(zipped):
                    count = _count(count, members)
                    path = entry_path(entry.name, top=entry.directory)
                    wanted = entry.regular and _wanted(path)
                    yield entry, zipped.open(info) if wanted else None
        else:
            stream = io.BufferedReader(_Budgeted(_decompressed(file), limit), _COPY_CHUNK)
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_StrictTarInfo) as tar:
                for entry, member in _tar_entries(tar):
                    count = _count(count, members)
                    path = entry_path(entry.name, top=entry.directory)
                    wanted = entry.regular and _wanted(path)
                    yield entry, tar.extractfile(member) if wanted else None


#: a zip's end record, zip64 end locator, zip64 end record and central directory entry
_END = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s6H3L5H2L")


def _read_at(file: IO[bytes], at: int, size: int) -> bytes:
    """Up to ``size`` bytes of ``file`` from offset ``at`` (fewer at its end)."""
    file.seek(at)
    return file.read(size)


def _zip_entries_within(file: IO[bytes], most: int) -> None:
    """Refuse a zip whose central directory holds more than ``most`` entries, counted
    record by record as the file is read: ``zipfile`` makes an object of every entry
    before anyone can count them (a 53 MB upload of a million empty entries took 460 MB
    and a minute). A zip whose records cannot be found is left to ``zipfile``, which
    says why."""
    length = file.seek(0, io.SEEK_END)
    tail_at = max(0, length - 0xFFFF - _END.size)
    tail = _read_at(file, tail_at, length - tail_at)
    found = tail.rfind(b"PK\x05\x06")
    if found < 0 or found + _END.size > len(tail):
        return
    size, directory_end = _END.unpack_from(tail, found)[5], tail_at + found
    locator = directory_end - _ZIP64_LOCATOR.size
    record = _read_at(file, locator, _ZIP64_LOCATOR.size) if locator >= 0 else b""
    if record[:4] == b"PK\x06\x07" and len(record) == _ZIP64_LOCATOR.size:
        at = _ZIP64_LOCATOR.unpack(record)[2]
        end64 = _read_at(file, at, _ZIP64_END.size)
        if end64[:4] == b"PK\x06\x06" and len(end64) == _ZIP64_END.size:
            size, directory_end = _ZIP64_END.unpack(end64)[8], at
    file.seek(max(0, directory_end - size))
    count = 0
    while (header := file.read(_CENTRAL.size))[:4] == b"PK\x01\x02":
        if len(header) < _CENTRAL.size:
            return
        count += 1
        if count > most:
            raise UnsafeArchive(f"more than {most} entries")
        fields = _CENTRAL.unpack(header)
        file.seek(fields[10] + fields[11] + fields[12], io.SEEK_CUR)


def _count(count: int, most: int) -> int:
    if count + 1 > most:
        raise UnsafeArchive(f"more than {most} entries")
    return count + 1


def check_archive(
    source: bytes | IO[bytes], kind: ArchiveKind, *, limit: int = MAX_UNPACKED_BYTES
) -> int:
    """The CSV files of the archive (its bytes, or a seekable binary file read from its
    start); ``UnsafeArchive`` if any name or size is refused, if two files it would
    unpack have one path (or one is the other's folder), or if any file it would unpack
    cannot be read to its end: so an archive :func:`unpack_archive` refuses is refused
    before its import is accepted."""
    declared = files = read = 0
    unpacked: set[PurePosixPath] = set()
    folders: set[PurePosixPath] = set()
    for entry, reader in _walk(source, kind, limit, MAX_MEMBERS):
        declared += entry.size if entry.regular else 0  # every member, read or not
        if reader is not None:
            for chunk in _chunks(reader, kind):  # read to its end, as unpacking will
                read += len(chunk)
                if read > limit:
                    raise UnsafeArchive(f"unpacks to more than {limit} bytes")
            path = relative_path(entry.name)
            files += is_csv_file(path)
            if path in unpacked:
                raise UnsafeArchive(f"{entry.name!r}: given twice")
            if path in folders or any(parent in unpacked for parent in path.parents):
                raise UnsafeArchive(f"{entry.name!r}: a file and a folder of one name")
            unpacked.add(path)
            folders.update(path.parents)
        if declared > limit:
            raise UnsafeArchive(f"unpacks to more than {limit} bytes")
    if files == 0:
        raise UnsafeArchive("the archive holds no CSV file")
    return files


def unpack_archive(
    source: bytes | IO[bytes],
    kind: ArchiveKind,
    target: Path,
    *,
    limit: int = MAX_UNPACKED_BYTES,
    members: int = MAX_MEMBERS,
) -> None:
    """Unpack the archive's CSV and problems files under ``target`` (an empty folder).

    ``source``: the archive's bytes, or a seekable binary file read from its start and
    never held whole in memory. ``limit`` and ``members`` bound what it may unpack to and
    hold; every name and type check holds whatever they are."""
    written = 0
    root = target.resolve()
    for entry, reader in _walk(source, kind, limit, members):
        if reader is None:
            written += entry.size if entry.regular else 0  # counted, never decompressed here
            if written > limit:
                raise UnsafeArchive(f"unpacks to more than {limit} bytes")
            continue
        destination = (root / relative_path(entry.name)).resolve()
        if not destination.is_relative_to(root):
            raise UnsafeArchive(f"{entry.name!r}: a path leaving the archive")
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            out = destination.open("xb")
        except FileExistsError:
            raise UnsafeArchive(f"{entry.name!r}: given twice") from None
        with out:
            for chunk in _chunks(reader, kind):
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
