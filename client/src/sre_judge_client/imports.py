"""``client.imports``: upload an SREGym results archive or JSON lines, follow the job.

The same methods on :class:`Imports` (``Client``) and :class:`AsyncImports`
(``AsyncClient``, awaited). Admin tokens only. An upload is a background job on the
server: :meth:`Imports.upload` answers at once with the queued job, :meth:`Imports.follow`
yields it as it progresses and :meth:`Imports.wait` gives it once ended (``done`` or
``failed``; a failed job's ``error`` says why, ``errors`` lists the rows refused).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx

from sre_judge_client import _calls
from sre_judge_client._core import (
    AsyncSendFor,
    SendFor,
    pause_after_failed_look,
    poll_delay,
    within_deadline,
)
from sre_judge_client._uploads import import_body
from sre_judge_client.errors import ApiError
from sre_judge_client.models import ImportJob

__all__ = ["AsyncImports", "Imports"]


class Imports:
    """The import calls of a :class:`~sre_judge_client.Client` (``client.imports``)."""

    def __init__(self, send_for: SendFor) -> None:
        """Send through ``send_for`` (the client's, with its retries and its reading of
        each answer as the model asked for)."""
        self._send_for = send_for

    def upload(
        self,
        data: Path | bytes,
        *,
        media_type: str | None = None,
        rubric: str | None = None,
        strict: bool = False,
    ) -> ImportJob:
        """Start an import: an SREGym results folder (packed as tar.gz), a ``.tar.gz`` /
        ``.zip`` archive or a ``.jsonl`` file, or bytes (``media_type``, else the server
        tells them apart). ``strict`` (JSON lines): a bad line fails the job, nothing stored.
        """
        content, kind = import_body(data, media_type)
        call = _calls.create_import(content, kind, rubric=rubric, strict=strict)
        return self._send_for(ImportJob, call)

    def get(self, job_id: str) -> ImportJob:
        """An import job as it stands."""
        return self._send_for(ImportJob, _calls.get_import(job_id))

    def follow(
        self, job_id: str, *, poll: float = 1.0, timeout: float = 3600.0
    ) -> Iterator[ImportJob]:
        """The job every ``poll`` seconds until it ends (the last one included);
        ``TimeoutError`` after ``timeout``, a look at the job retried only within it.

        A server busy or away past a look's retries is no answer yet, as to
        ``Client.wait_many``: the follow looks again after ``poll`` seconds or the
        ``Retry-After`` when longer, until ``timeout``; a refusal is raised at once."""
        deadline = time.monotonic() + timeout
        while True:
            look = within_deadline(_calls.get_import(job_id), deadline)
            try:
                job = self._send_for(ImportJob, look)
            except (ApiError, httpx.TransportError) as error:
                time.sleep(pause_after_failed_look(error, look, poll))
                continue
            yield job
            if job.finished:
                return
            delay = poll_delay(deadline, poll)
            if delay is None:
                raise TimeoutError(f"import job {job_id} still {job.state}")
            time.sleep(delay)

    def wait(self, job_id: str, *, poll: float = 1.0, timeout: float = 3600.0) -> ImportJob:
        """The job once it ended (``done`` or ``failed``), a server busy or away meanwhile
        ridden out as :meth:`follow` does."""
        for job in self.follow(job_id, poll=poll, timeout=timeout):
            last = job
        return last


class AsyncImports:
    """The import calls of an :class:`~sre_judge_client.AsyncClient`, awaited."""

    def __init__(self, send_for: AsyncSendFor) -> None:
        """Send through ``send_for`` (the client's, as :class:`Imports` does)."""
        self._send_for = send_for

    async def upload(
        self,
        data: Path | bytes,
        *,
        media_type: str | None = None,
        rubric: str | None = None,
        strict: bool = False,
    ) -> ImportJob:
        """Start an import (see :meth:`Imports.upload`)."""
        content, kind = await asyncio.to_thread(import_body, data, media_type)
        call = _calls.create_import(content, kind, rubric=rubric, strict=strict)
        return await self._send_for(ImportJob, call)

    async def get(self, job_id: str) -> ImportJob:
        """An import job as it stands."""
        return await self._send_for(ImportJob, _calls.get_import(job_id))

    async def follow(
        self,
        job_id: str,
        *,
        poll: float = 1.0,
        timeout: float = 3600.0,  # noqa: ASYNC109 - Imports.follow's keywords
    ) -> AsyncIterator[ImportJob]:
        """The job every ``poll`` seconds until it ends (see :meth:`Imports.follow`)."""
        deadline = time.monotonic() + timeout
        while True:
            look = within_deadline(_calls.get_import(job_id), deadline)
            try:
                job = await self._send_for(ImportJob, look)
            except (ApiError, httpx.TransportError) as error:
                await asyncio.sleep(pause_after_failed_look(error, look, poll))
                continue
            yield job
            if job.finished:
                return
            delay = poll_delay(deadline, poll)
            if delay is None:
                raise TimeoutError(f"import job {job_id} still {job.state}")
            await asyncio.sleep(delay)

    async def wait(
        self,
        job_id: str,
        *,
        poll: float = 1.0,
        timeout: float = 3600.0,  # noqa: ASYNC109 - Imports.wait's keywords
    ) -> ImportJob:
        """The job once it ended (``done`` or ``failed``)."""
        async for job in self.follow(job_id, poll=poll, timeout=timeout):
            last = job
        return last
