"""Bodies sent as files: a bulk load of scenarios, an import upload (archive or JSONL).

Each takes what a caller has at hand (a path, bytes, text, or for loads the scenarios
themselves) and gives the bytes and the media type the route reads. A results folder
is packed into a tar.gz in memory, its files at their paths under it.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

__all__ = ["folder_archive", "import_body", "load_body"]

_LOAD_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".yaml": "yaml", ".yml": "yaml"}
_IMPORT_SUFFIXES = {
    ".tar.gz": "application/gzip",
    ".tgz": "application/gzip",
    ".zip": "application/zip",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
}


def load_body(data: Any, fmt: str | None) -> tuple[bytes, str]:
    """``(bytes, format)`` of a bulk load: a path (format from its suffix unless given),
    text or bytes (``fmt`` required), or the scenarios as a list of dicts (JSON)."""
    if isinstance(data, Path):
        chosen = fmt or _LOAD_SUFFIXES.get(data.suffix.lower(), "json")
        return data.read_bytes(), chosen
    if isinstance(data, str | bytes):
        if fmt is None:
            raise ValueError("format= is needed for text: jsonl, yaml or json")
        return (data.encode("utf-8") if isinstance(data, str) else data), fmt
    return json.dumps(data, ensure_ascii=False).encode("utf-8"), "json"


def import_body(data: Path | bytes, media_type: str | None) -> tuple[bytes, str]:
    """``(bytes, media type)`` of an upload: a folder (packed as tar.gz), a file (its
    type from its suffix unless given), or bytes (the server tells them apart)."""
    if isinstance(data, bytes):
        return data, media_type or "application/octet-stream"
    if data.is_dir():
        return folder_archive(data), "application/gzip"
    name = data.name.lower()
    found = next((t for s, t in _IMPORT_SUFFIXES.items() if name.endswith(s)), None)
    return data.read_bytes(), media_type or found or "application/octet-stream"


def folder_archive(folder: Path) -> bytes:
    """Every file under ``folder`` in a tar.gz, at its path relative to the folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            info = tarfile.TarInfo(path.relative_to(folder).as_posix())
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
