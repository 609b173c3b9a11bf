"""The asynchronous client: :class:`Client`'s methods, awaited."""

from __future__ import annotations

import asyncio
import builtins  # annotations below the `list` method name the builtin through it
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying

from sre_judge_client import _calls
from sre_judge_client._core import (
    SERVER_WAIT_MAX,
    Call,
    ModelT,
    decode,
    decode_model,
    ground_truth_conflict,
    pause_after_failed_look,
    poll_delay,
    request_args,
    resolve,
    retry_policy,
    sent_as,
    submission_call,
    within_deadline,
)
from sre_judge_client.errors import ApiError, Conflict
from sre_judge_client.imports import AsyncImports
from sre_judge_client.models import Grading, GradingPage, RegradeJob
from sre_judge_client.scenarios import AsyncScenarios

__all__ = ["AsyncClient", "submit_and_wait"]

T = TypeVar("T")


class AsyncClient:
    """An asyncio client of one sre-judge server (see :class:`~sre_judge_client.Client`).

    ``base_url`` and ``token`` default to ``SRE_JUDGE_URL`` and ``SRE_JUDGE_TOKEN``.
    Requests are retried on connection errors, 429 and 503 (honouring ``Retry-After``),
    and a GET on a gateway's 502 and 504 too, up to ``retries`` attempts; error answers
    raise :class:`~sre_judge_client.ApiError`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 6,
        max_retry_wait: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url, secret = resolve(base_url, token)
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        self._timeout = timeout
        self._retries = retries
        self._max_wait = max_retry_wait
        #: list, load in bulk, read with versions, update (:mod:`~sre_judge_client.scenarios`)
        self.scenarios = AsyncScenarios(self._send_for)
        #: upload an SREGym archive or JSON lines, follow the job (:mod:`.imports`)
        self.imports = AsyncImports(self._send_for)
        self._http = httpx.AsyncClient(
            base_url=url, headers=headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _send(self, call: Call) -> Any:
        """``call`` sent with the client's retries; the JSON of its success."""
        return await self._exchange(call, decode)

    async def _send_for(self, kind: type[ModelT], call: Call) -> ModelT:
        """``call`` sent as :meth:`_send` sends it; its success read as a ``kind``."""
        return await self._exchange(call, lambda response: decode_model(response, kind))

    async def _exchange(self, call: Call, read: Callable[[httpx.Response], T]) -> T:
        """``call`` sent with the client's retries, each attempt as :func:`sent_as` makes
        it; what ``read`` makes of the answer (read within the attempt, so the error of a
        429 or 503 it raises is what gets the call tried again)."""
        policy = retry_policy(call, attempts=self._retries, max_wait=self._max_wait)
        async for attempt in AsyncRetrying(**policy):
            with attempt:
                sent = sent_as(call, attempt.retry_state)
                response = await self._http.request(**request_args(sent, self._timeout))
                return read(response)
        raise AssertionError("unreachable")  # pragma: no cover

    async def submit(
        self,
        diagnosis: str,
        *,
        scenario_id: str | None = None,
        ground_truth: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        run_id: str | None = None,
        attempt: int | None = None,
        metadata: dict[str, Any] | None = None,
        rubric: str | None = None,
        wait: float | None = None,
        idempotency_key: str | None = None,
        trace: str | list[dict[str, Any]] | None = None,
        retry_within: float | None = None,
    ) -> Grading:
        """Submit a diagnosis; with ``wait`` (seconds, up to 300) the server holds the
        answer until the grading is done. A grading still ``pending`` afterwards is a
        handle: pass its id to :meth:`wait`. ``trace``: the agent's tool calls and
        observations (a list of JSON objects, one a step) or free text. ``retry_within``:
        no retry of the submission starts later than this many seconds after the first
        try, and a retry asks the server to hold it no longer than what is left of them
        (by default the client's ``retries`` alone decide)."""
        call = submission_call(
            diagnosis,
            scenario_id=scenario_id,
            ground_truth=ground_truth,
            wait=wait,
            idempotency_key_=idempotency_key,
            retry_within=retry_within,
            agent=agent,
            model=model,
            run_id=run_id,
            attempt=attempt,
            metadata=metadata,
            rubric=rubric,
            trace=trace,
        )
        return await self._send_for(Grading, call)

    async def get(self, grading_id: str) -> Grading:
        """One grading."""
        return await self._send_for(Grading, _calls.get_grading(grading_id))

    async def list(self, *, page_size: int = 100, **filters: Any) -> AsyncIterator[Grading]:
        """Every grading matching the filters (``agent``, ``model``, ``scenario_id``,
        ``status``, ``passed``, ``held``, ``created_after``, ...), newest first, fetched
        page by page as you iterate."""
        cursor: str | None = None
        while True:
            call = _calls.list_gradings(filters, cursor, page_size)
            page = await self._send_for(GradingPage, call)
            for grading in page.items:
                yield grading
            cursor = page.next_cursor
            if not cursor:
                return

    async def wait(
        self,
        grading_id: str,
        *,
        timeout: float = 300.0,  # noqa: ASYNC109 - Client.wait's keywords
        poll: float = 1.0,
    ) -> Grading:
        """The grading once it left ``pending``; raises ``TimeoutError`` after ``timeout``
        (also for a server still busy or away then: see :meth:`wait_many`)."""
        return (await self.wait_many([grading_id], timeout=timeout, poll=poll))[0]

    async def wait_many(
        self,
        grading_ids: Iterable[str],
        *,
        timeout: float = 300.0,  # noqa: ASYNC109 - Client.wait_many's keywords
        poll: float = 1.0,
    ) -> builtins.list[Grading]:
        """Every grading once done, one for each id given and in their order (an id given
        twice, as a resubmitted attempt's is, gets its grading twice, looked at once).

        A server busy or away (``Unavailable``, a connection error) past a look's retries
        is no answer yet: the wait looks again, no sooner than its ``Retry-After``, until
        ``timeout``, and raises ``TimeoutError`` from the last error then."""
        ids = list(grading_ids)
        distinct = list(dict.fromkeys(ids))  # an id given twice is looked at once
        done: dict[str, Grading] = {}
        deadline = time.monotonic() + timeout
        delay = min(0.2, poll)
        while True:
            pause, failed = delay, None
            for grading_id in [i for i in distinct if i not in done]:
                look = within_deadline(_calls.get_grading(grading_id), deadline)
                try:
                    grading = await self._send_for(Grading, look)
                except (ApiError, httpx.TransportError) as error:
                    pause, failed = pause_after_failed_look(error, look, delay), error
                    break  # the others are looked at after the pause
                if grading.done:
                    done[grading_id] = grading
            if len(done) == len(distinct):
                return [done[i] for i in ids]
            remaining = deadline - time.monotonic()
            if remaining <= 0:  # polled once more at the deadline
                still = len(distinct) - len(done)
                raise TimeoutError(f"{still} gradings still pending") from failed
            await asyncio.sleep(min(pause, remaining))
            delay = min(poll, delay * 2)

    async def override(
        self,
        grading_id: str,
        *,
        reason: str,
        question_id: str | None = None,
        answer: str | None = None,
        verdict: str | None = None,
        withdraw: str | None = None,
        revision: int | None = None,
    ) -> Grading:
        """Override one answer (``question_id`` + ``answer``), the ``verdict``, or
        ``withdraw`` an override. Without ``revision`` the current one is read first;
        a stale one raises :class:`~sre_judge_client.PreconditionFailed`."""
        if revision is None:
            revision = (await self.get(grading_id)).revision
        body = {
            "reason": reason,
            "question_id": question_id,
            "answer": answer,
            "verdict": verdict,
            "withdraw": withdraw,
        }
        return await self._send_for(Grading, _calls.override(grading_id, revision, body))

    async def label(
        self, grading_id: str, answers: dict[str, str], *, verdict: str | None = None
    ) -> dict[str, Any]:
        """Store an adjudicator's own answers (question id -> ``yes``/``no``)."""
        return dict(await self._send(_calls.label(grading_id, answers, verdict)))

    async def register_scenario(
        self,
        scenario_id: str,
        ground_truth: str,
        *,
        title: str | None = None,
        tags: builtins.list[str] | None = None,
        exist_ok: bool = False,
    ) -> dict[str, Any] | None:
        """Register a scenario (admin) as version 1 of its ground truth.

        With ``exist_ok`` an id that exists with the same ground truth is no error (None);
        one that exists with another raises :class:`~sre_judge_client.GroundTruthConflict`
        naming both SHA-256 hashes (give the scenario a new version with
        ``scenarios.update``). Without ``exist_ok`` any existing id raises ``Conflict``.
        """
        call = _calls.register_scenario(scenario_id, ground_truth, title=title, tags=tags)
        try:
            return dict(await self._send(call))
        except Conflict:
            if not exist_ok:
                raise
        stored = await self.scenarios.get(scenario_id)
        conflict = ground_truth_conflict(
            scenario_id, stored.ground_truth or "", stored.version, ground_truth
        )
        if conflict is not None:
            raise conflict
        return None

    async def start_regrade(self, **job: Any) -> RegradeJob:
        """Start a regrade job (admin): ``filter``, ``rubric``, ``judge``, ``mode``, ..."""
        return await self._send_for(RegradeJob, _calls.start_regrade(job))

    async def regrade_job(self, job_id: str) -> RegradeJob:
        """A regrade job with its progress."""
        return await self._send_for(RegradeJob, _calls.get_regrade_job(job_id))

    async def follow_regrade(
        self,
        job_id: str,
        *,
        poll: float = 2.0,
        timeout: float = 3600.0,  # noqa: ASYNC109 - Client.follow_regrade's keywords
    ) -> AsyncIterator[RegradeJob]:
        """The job's state every ``poll`` seconds until it finishes (the last one included);
        ``TimeoutError`` after ``timeout``, a server busy or away past a look's retries
        being no answer yet (see :meth:`Client.follow_regrade`)."""
        deadline = time.monotonic() + timeout
        while True:
            look = within_deadline(_calls.get_regrade_job(job_id), deadline)
            try:
                job = await self._send_for(RegradeJob, look)
            except (ApiError, httpx.TransportError) as error:
                await asyncio.sleep(pause_after_failed_look(error, look, poll))
                continue
            yield job
            if job.finished:
                return
            delay = poll_delay(deadline, poll)
            if delay is None:
                raise TimeoutError(f"regrade job {job_id} still {job.state}")
            await asyncio.sleep(delay)


async def submit_and_wait(
    client: AsyncClient, diagnosis: str, *, wait: float, **fields: Any
) -> Grading:
    """:func:`sre_judge_client.client.submit_and_wait`, awaited: submit ``diagnosis``
    (``fields`` as :meth:`AsyncClient.submit` takes them) and wait for its grading ``wait``
    seconds in all, counted from before the request; a grading still pending then is
    returned pending (a handle for :meth:`AsyncClient.wait`)."""
    deadline = time.monotonic() + wait
    server_wait = min(wait, SERVER_WAIT_MAX) or None
    grading = await client.submit(diagnosis, wait=server_wait, retry_within=wait or None, **fields)
    remaining = deadline - time.monotonic()
    if grading.done or remaining <= 0:
        return grading
    try:
        return await client.wait(grading.id, timeout=remaining)
    except TimeoutError:
        return grading
