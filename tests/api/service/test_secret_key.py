"""The service key file is created once, whole, however many processes start together:
whoever reads it finds the complete key, never a file still being written (a reader that
met a half-written key refused to start, and a test worker kept that refusal)."""

from __future__ import annotations

import threading
from pathlib import Path

from api.service.secret_key import MissingServiceKey, load_service_key
from api.service.settings import Settings


def _start_together(settings: Settings, count: int) -> tuple[list[bytes], list[Exception]]:
    """``count`` starts loading (and creating) the key at the same moment."""
    starting = threading.Barrier(count)
    keys: list[bytes] = []
    refused: list[Exception] = []

    def start() -> None:
        starting.wait()
        try:
            keys.append(load_service_key(settings, create=True).secret)
        except MissingServiceKey as exc:
            refused.append(exc)

    threads = [threading.Thread(target=start) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return keys, refused


def test_processes_starting_together_all_read_one_whole_key(tmp_path: Path) -> None:
    for attempt in range(40):
        settings = Settings(secret_key_file=tmp_path / f"run-{attempt}" / "sre-judge.key")
        keys, refused = _start_together(settings, 8)
        assert not refused, f"attempt {attempt}: {refused[0]}"
        assert len(set(keys)) == 1 and len(keys[0]) == 64
        assert settings.secret_key_file.stat().st_mode & 0o777 == 0o600
        assert [p.name for p in settings.secret_key_file.parent.iterdir()] == ["sre-judge.key"]
