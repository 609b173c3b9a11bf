"""Importing historic runs: SREGym results folders and JSON lines of submissions.

The rubric is resolved like a submission's (``id`` or ``id@version``, the service's by
default). Imported diagnoses pass the same checks as submitted ones (text limits,
credentials redacted) in ``storage.imports``; each is stored once, however often the
same input is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from api.imports.jsonl import read_jsonl
from api.imports.queries import ImportQueries
from api.imports.report import ImportProgress, ImportReport
from api.imports.sregym import read_sregym_folder
from api.service.inline_ground_truth import inline_ground_truth_refusal
from api.service.services import Services

__all__ = ["import_jsonl_file", "import_sregym_folder"]


async def import_sregym_folder(
    services: Services,
    folder: Path,
    problems: Mapping[str, str],
    *,
    actor: str,
    job_id: str | None = None,
    rubric: str | None = None,
    progress: ImportProgress | None = None,
) -> ImportReport:
    """Import every attempt of an SREGym results folder; SREGym's verdicts are kept.

    Audited in the name of ``actor``, who imports, naming the import job ``job_id``
    that drives the import, if one does.

    Each problem of ``problems`` becomes the registered scenario of its id unless one
    exists; an attempt whose problem ``problems`` gives a ground truth that registered
    scenario never had is refused where a submission's own ground truth would be
    (``SRE_JUDGE_INLINE_GROUND_TRUTH``); an import is an admin's, so ``per_token`` takes it.
    """
    settings = services.settings
    target = await services.rubrics.require(rubric, default=settings.rubric)
    attempts = read_sregym_folder(folder, max_bytes=settings.max_text_bytes)
    return await ImportQueries(services.store.db, services.store.catalog).sregym(
        attempts,
        problems,
        rubric=target,
        actor=actor,
        job_id=job_id,
        progress=progress,
        refuse_ground_truth=inline_ground_truth_refusal(settings, granted=True),
    )


async def import_jsonl_file(
    services: Services,
    file: Path,
    *,
    actor: str,
    job_id: str | None = None,
    rubric: str | None = None,
    strict: bool = False,
    progress: ImportProgress | None = None,
) -> ImportReport:
    """Import historic submissions, one JSON object a line, queued for grading.

    Audited in the name of ``actor``, who imports, naming the import job ``job_id``
    that drives the import, if one does.

    With ``strict`` nothing is stored when any line is bad (``ImportAborted``). A line
    with its own ground truth is refused where a submission's would be
    (``SRE_JUDGE_INLINE_GROUND_TRUTH``); an import is an admin's, so ``per_token`` takes it.
    """
    settings = services.settings
    target = await services.rubrics.require(rubric, default=settings.rubric)
    # every line meets a submission's rules, the largest request body the API takes too
    lines = read_jsonl(
        file, max_bytes=settings.max_text_bytes, max_line_bytes=settings.max_body_bytes
    )
    report = await ImportQueries(services.store.db, services.store.catalog).jsonl(
        lines,
        rubric=target,
        actor=actor,
        job_id=job_id,
        # the service's judge as a submission's grading records it: the panel when set
        judge=settings.grading_judge(),
        refuse_own_family=settings.self_preference == "refuse",
        refuse_ground_truth=inline_ground_truth_refusal(settings, granted=True),
        strict=strict,
        progress=progress,
    )
    services.waiters.work.set()
    return report
