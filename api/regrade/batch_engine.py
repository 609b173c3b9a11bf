"""Regrades through a batch engine: render, submit or write, import, then grade.

A job started with ``engine: batch`` (the OpenAI Batch API, or any server with the same
endpoints) or ``engine: offline`` (a requests file for a GPU fleet's batch runner, a
results file back) goes through four phases; its engine state
(``storage.regrade.batch_tables``) says which, so a restarted service goes on:

1. **render** (``rendering``): each item is graded by the very grader the workers use,
   with a judge that records what it is asked and answers nothing
   (``judge.batch.RequestRecorder``): exactly the requests a live grading would send
   first (those the judge cache does not answer; with per-question asking, every
   question's). Each is stored with its custom id, hash and
   body (``judge.backends.openai.chat_body``, as the live backend sends it);
2. **submit** (``submitting`` -> ``running``, Batch API): the open requests go up as a
   JSONL file and one batch, whose ids are stored before anything else happens; or
   **write** (``waiting``, offline): ``GET .../batch-requests`` serves them;
3. **import**: results (the batch's output and error files once it is completed,
   expired, cancelled or failed; or an uploaded results file) are checked against their
   requests (``judge.batch.check_results``) and each reply kept once under its custom id;
   failed and missing requests go in a new batch or are asked live (the job's ``retry``);
4. **grade** (``grading``): the items are released to the usual workers, whose grader
   answers from the kept replies (``judge.batch.BatchAnswers``) and asks the live judge
   anything else (a repair, a reply that was missing or failed). Verdicts, judge calls,
   audit, cache and flips are the live path's; each call answered from a batch says so
   (``via: batch <id>``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from api.regrade.batch_queries import BatchQueries, ImportReport, RenderedRequest
from api.regrade.job_queries import RegradeJobQueries
from api.service.errors import InvalidRequest
from api.service.judging import build_grader
from api.service.services import Services
from judge.batch import (
    BatchLineError,
    CheckedResults,
    CustomId,
    ExpectedRequest,
    RequestRecorder,
    check_results,
    parse_result_lines,
    request_hash,
    request_line,
)
from judge.errors import InputError
from judge.grader import Grader
from judge.spec import member_specs
from storage.errors import Conflict, NotFound
from storage.regrade.batch_tables import RegradeEngineRecord

if TYPE_CHECKING:  # the openai client is loaded once a batch engine is used
    import openai

    from judge.backends.openai import OpenAIBackend

__all__ = [
    "ENDED_BATCH_STATES",
    "check_engine_judge",
    "import_results_file",
    "poll_job",
    "render_job",
    "requests_file",
    "submit_job",
]

log = logging.getLogger("sre_judge.regrade.batch")

#: Batch API states whose results (what there is of them) can be read
ENDED_BATCH_STATES = ("completed", "expired", "cancelled", "failed")


def check_engine_judge(services: Services, judge_spec: str, engine: str) -> None:
    """Refuse (naming ``engine``) a judge a batch engine cannot ask: a panel, several
    samples, or a backend that does not speak OpenAI's chat completions."""
    if engine == "live":
        return
    if len(member_specs(judge_spec)) != 1 or services.settings.judge_samples != 1:
        raise InvalidRequest(
            f"engine {engine} grades with one judge asked once (no panel, no samples)",
            field="engine",
        )
    if services.backends.get(judge_spec).name != "openai":
        raise InvalidRequest(
            f"engine {engine} needs an OpenAI-compatible judge (openai:MODEL[@URL])",
            field="engine",
        )


def _live(services: Services, judge_spec: str) -> OpenAIBackend:
    from judge.backends.openai import OpenAIBackend

    backend = services.backends.get(judge_spec)
    if not isinstance(backend, OpenAIBackend):  # refused when the job was made
        raise TypeError(f"{judge_spec} is no OpenAI-compatible judge")
    return backend


async def _batch_client(services: Services, judge_spec: str) -> openai.AsyncOpenAI:
    """A Batch API client of the job's judge, its files and batches resources loaded.

    The client imports a resource's modules on first use (0.27 s of CPU here for the
    first batch a process sends): loaded in a worker thread, the event loop every grading
    shares never waits for it."""
    client = _live(services, judge_spec).batch_client()
    await asyncio.to_thread(lambda: (client.files, client.batches))
    return client


async def render_job(services: Services, job_id: str, *, actor: str) -> str | None:
    """Phase 1: store every request the grader would send for each item of the job.

    Returns the engine's new state, or None when the job was rendered already.
    """
    view = await RegradeJobQueries(services.store.db).get_job(job_id)
    live = _live(services, view.job.judge_spec)
    rendered: list[RenderedRequest] = []
    for claim in await BatchQueries(services.store.db).items_to_render(job_id):
        # the item's own rubric (a job that names none keeps each submission's)
        rubric = await services.rubrics.resolve(claim.rubric_id, claim.rubric_version)
        if rubric is not None:  # else the workers store it unscored (rubric_unknown)
            rendered.extend(await _render_item(services, live, rubric, claim))
    return await BatchQueries(services.store.db).store_rendered(job_id, rendered, actor=actor)


async def _render_item(
    services: Services, live: OpenAIBackend, rubric: Any, claim: Any
) -> list[RenderedRequest]:
    """The requests one item's grading would send first: the workers' grader (its cache
    read as theirs is, never written) with a judge that records and answers nothing."""
    built = build_grader(services, claim.judge_spec, namespace=claim.cache_namespace, regrade=True)
    if not isinstance(built, Grader):  # refused when the job was made (one judge, once)
        raise TypeError(f"{claim.judge_spec} is not one judge asked once")
    recorder = RequestRecorder(built.backend)
    grader = dataclasses.replace(built, backend=recorder)
    try:
        await grader.grade(rubric, claim.ground_truth, claim.diagnosis, screening=claim.screened())
    except InputError:  # the worker stores it unscored (invalid_input): nothing to ask
        return []
    seen: Counter[str] = Counter()
    out = []
    for call, request in enumerate(recorder.requests):
        digest = request_hash(request)
        custom_id = CustomId(claim.grading_id, call, seen[digest])
        seen[digest] += 1
        out.append(RenderedRequest(custom_id, digest, live.model, live.batch_body(request)))
    return out


async def _engine(services: Services, job_id: str) -> RegradeEngineRecord:
    await RegradeJobQueries(services.store.db).get_job(job_id)  # NotFound for an unknown job
    engine = await BatchQueries(services.store.db).engine(job_id)
    if engine is None:
        raise InvalidRequest(
            "this job is graded live: it has no batch requests or results", field="engine"
        )
    return engine


def _no_more_results(state: str) -> Conflict:
    """Why an offline job whose engine is past ``waiting`` neither offers requests nor
    takes results."""
    return Conflict(
        f"the job takes no more results (its engine is {state}): what was still open is asked live"
    )


async def requests_file(services: Services, job_id: str, *, actor: str) -> list[str]:
    """Phase 2 (offline): the request lines of the job's requests with no reply yet,
    rendering them first if that is still to do. Conflict for a cancelled job not
    rendered yet (its items are out: it is rendered once resumed) and for a job that
    takes no more results (what it would offer, it would refuse the results of)."""
    engine = await _engine(services, job_id)
    if engine.engine != "offline":
        raise InvalidRequest(
            "the Batch API sends this job's requests itself (engine batch)", field="engine"
        )
    batches = BatchQueries(services.store.db)
    if engine.state == "rendering":
        await render_job(services, job_id, actor=actor)
        engine = await batches.engine(job_id) or engine
    if engine.state == "rendering":  # not rendered: the job is cancelled
        job = (await RegradeJobQueries(services.store.db).get_job(job_id)).job
        raise Conflict(f"the job is {job.state}: resume it, then download its requests")
    if engine.state != "waiting":
        raise _no_more_results(engine.state)
    return [request_line(c, b) for c, b in await batches.open_requests(job_id)]


async def import_results_file(
    services: Services, job_id: str, text: str, *, actor: str
) -> ImportReport:
    """Phase 3 (offline): check a results file against the job's requests and keep each
    reply once; a line that cannot be read refuses the whole file (nothing stored)."""
    engine = await _engine(services, job_id)
    if engine.engine != "offline":
        raise InvalidRequest(
            "the Batch API's results are fetched by the service (engine batch)", field="engine"
        )
    if engine.state == "rendering":
        raise Conflict("the job's requests are not written yet: download them first")
    expected, answered, failed = await BatchQueries(services.store.db).expectations(job_id)
    try:
        checked = await asyncio.to_thread(_checked, [text], expected, answered, failed, None)
    except BatchLineError as exc:
        raise InvalidRequest(str(exc), field=exc.field) from None
    if not (checked.answers or checked.failures or checked.duplicates):
        # nothing in it is one of this job's requests: the wrong file, most likely; taken
        # as is, it would send every request of the round to the live judge
        why = "; ".join(f"line {r.line}: {r.reason}" for r in checked.refused[:3])
        raise InvalidRequest(
            f"no result in this file answers one of this job's requests ({why or 'empty'})",
            field="file",
        )
    if engine.state not in ("running", "waiting") and (checked.answers or checked.failures):
        # its open requests went to the live judge (or the job ended): a reply now would
        # be dropped, so the file is refused whole rather than taken with a 200
        raise _no_more_results(engine.state)
    report = await BatchQueries(services.store.db).import_results(
        job_id, checked, actor=actor, engine_kind="offline"
    )
    if report.state == "grading":
        services.waiters.regrade_queued()
    return report


async def submit_job(services: Services, job_id: str, *, actor: str) -> str | None:
    """Phase 2 (Batch API): upload the open requests and create a batch; the remote id.

    The batch row is stored before the upload; a submission cut short by a restart is
    found again by the batch's metadata (``sre_judge_batch``) rather than sent twice.
    """
    batches = BatchQueries(services.store.db)
    batch = await batches.new_batch(job_id, actor=actor)
    if batch is None:
        return None
    job = (await RegradeJobQueries(services.store.db).get_job(job_id)).job
    client = await _batch_client(services, job.judge_spec)
    try:
        remote = await _find_remote(client, batch.id)
        if remote is None:
            lines = [request_line(c, b) for c, b in await batches.batch_requests(batch.id)]
            data = ("\n".join(lines) + "\n").encode("utf-8")
            upload = await client.files.create(
                file=(f"regrade-{batch.id}.jsonl", data), purpose="batch"
            )
            await batches.update_batch(batch.id, input_file_id=upload.id)
            remote = await client.batches.create(
                input_file_id=upload.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"sre_judge_batch": batch.id, "regrade_job": job_id},
            )
        await batches.update_batch(
            batch.id,
            remote_id=remote.id,
            input_file_id=remote.input_file_id,
            state=remote.status,
        )
        log.info("regrade batch submitted", extra={"job_id": job_id, "batch": remote.id})
        return str(remote.id)
    finally:
        await client.close()


async def _find_remote(client: Any, batch_id: str) -> Any:
    """The Batch API batch made for our batch ``batch_id`` before a restart, if any."""
    try:
        page = await client.batches.list(limit=100)
    except Exception:  # a server without the listing: submit
        return None
    for remote in page.data:
        if (remote.metadata or {}).get("sre_judge_batch") == batch_id:
            return remote
    return None


async def poll_job(services: Services, job_id: str, *, actor: str) -> list[ImportReport]:
    """Phase 3 (Batch API): ask the state of the job's batches under way (sent, their
    results not imported: a batch found again after a cut-short submission may have
    ended already); import the results of each that ended (completed, or expired,
    cancelled, failed: what came back is kept, the rest is retried)."""
    batches = BatchQueries(services.store.db)
    job = (await RegradeJobQueries(services.store.db).get_job(job_id)).job
    reports = []
    client = await _batch_client(services, job.judge_spec)
    try:
        for batch in await batches.batches(job_id, under_way=True):
            assert batch.remote_id is not None  # one with none: its submission resumes
            remote = await client.batches.retrieve(batch.remote_id)
            if remote.status not in ENDED_BATCH_STATES:
                if remote.status != batch.state:
                    await batches.update_batch(batch.id, state=remote.status)
                continue
            report = await _import_remote(services, client, job_id, batch.id, remote, actor)
            if report is not None:
                reports.append(report)
    finally:
        await client.close()
    if any(r.state == "grading" for r in reports):
        services.waiters.regrade_queued()
    return reports


async def _file_text(client: Any, file_id: str | None) -> str:
    if not file_id:
        return ""
    content = await client.files.content(file_id)
    return str(content.text)


def _checked(
    texts: list[str],
    expected: dict[str, ExpectedRequest],
    answered: set[str],
    failed: dict[str, str],
    via: str | None,
) -> CheckedResults:
    """The results of ``texts`` (results files), read and checked against the job's
    requests (``BatchQueries.expectations``): run in a worker thread, as a file of 10,000
    replies takes about a second (BatchLineError for a line that cannot be read)."""
    results = [result for text in texts for result in parse_result_lines(text)]
    return check_results(results, expected, answered=answered, via=via, failed=failed)


async def _import_remote(
    services: Services, client: Any, job_id: str, batch_id: str, remote: Any, actor: str
) -> ImportReport | None:
    """Read an ended batch's output and error files and keep what they say; None when
    another runner imported them since this one saw the batch under way (nothing read)."""
    batches = BatchQueries(services.store.db)
    if await batches.imported(batch_id):
        return None
    sent = [c for c, _ in await batches.batch_requests(batch_id)]
    await batches.update_batch(
        batch_id, output_file_id=remote.output_file_id, error_file_id=remote.error_file_id
    )
    error = None
    errors = getattr(getattr(remote, "errors", None), "data", None) or []
    if errors:
        error = "; ".join(f"{e.code}: {e.message}" for e in errors[:5])[:1000]
    texts = [await _file_text(client, remote.output_file_id)]
    texts.append(await _file_text(client, remote.error_file_id))
    expected, answered, failed = await batches.expectations(job_id)
    try:
        via = f"batch {remote.id}"
        checked = await asyncio.to_thread(_checked, texts, expected, answered, failed, via)
    except BatchLineError as exc:  # an unreadable file: every request is retried
        checked, error = CheckedResults(), f"unreadable results: {exc}"
    report = await batches.import_results(
        job_id,
        checked,
        actor=actor,
        batch_id=batch_id,
        engine_kind="batch",
        sent=sent,
        batch_state=remote.status,
        error=error,
    )
    log.info(
        "regrade batch imported",
        extra={"job_id": job_id, "batch": remote.id, "status": remote.status, **report.counts()},
    )
    return report


async def advance(services: Services, engine: RegradeEngineRecord, *, actor: str) -> None:
    """Take one job's engine on (render, submit, poll), as its state says: rendered
    requests are submitted at once, not a poll interval later. A failed step is noted on
    the engine and tried again after a wait that doubles while it keeps failing
    (``BatchQueries.fail_engine``)."""
    try:
        state: str | None = engine.state
        if state == "rendering":  # None: rendered by another runner already
            state = await render_job(services, engine.job_id, actor=actor)
        if state == "submitting":
            if await submit_job(services, engine.job_id, actor=actor) is None:
                return  # another runner is submitting: nothing was tried here
        elif state == "running":
            await poll_job(services, engine.job_id, actor=actor)
    except NotFound:
        return
    except Exception as exc:  # the engine keeps its state: a later round tries again
        log.exception("regrade batch engine step failed", extra={"job_id": engine.job_id})
        await BatchQueries(services.store.db).fail_engine(
            engine.job_id,
            f"{type(exc).__name__}: {exc}",
            poll_seconds=services.settings.regrade_batch_poll_seconds,
        )
    else:
        if engine.failures:
            await BatchQueries(services.store.db).recovered(engine.job_id)
