"""``sre-judge grade``: grade one diagnosis without the server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.edge import load_settings, run
from api.cli.options import checked_judge, checked_rubric, format_option
from api.cli.output import echo_json, stdout_console

if TYPE_CHECKING:  # the judge clients are imported when a grading starts, not for --help
    from api.service.settings import Settings
    from judge.verdict import GradingResult

__all__ = ["EXIT_UNSCORED", "EXIT_USAGE", "grade_command"]

EXIT_USAGE = 2
EXIT_UNSCORED = 3


def _read_text(value: str | None, path: str | None, *, name: str, max_bytes: int) -> str:
    """The text of ``--NAME`` or of the file ``--NAME-file`` names (``-``: stdin); bad
    usage for a file that cannot be read as text. A file is read up to ``max_bytes``
    (``SRE_JUDGE_MAX_TEXT_BYTES``) and one byte more: one longer is refused there, not
    read whole (``/dev/zero``, a pipe that does not end)."""
    if (value is None) == (path is None):
        raise click.UsageError(f"give exactly one of --{name} and --{name}-file")
    if value is not None:
        return value
    assert path is not None
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with Path(path).open("rb") as file:
                raw = file.read(max_bytes + 1)
    except OSError as exc:
        raise click.UsageError(f"--{name}-file {path}: {exc.strerror}") from None
    if len(raw) > max_bytes:
        raise click.UsageError(
            f"--{name}-file {path}: over the limit of {max_bytes} bytes (SRE_JUDGE_MAX_TEXT_BYTES)"
        )
    if b"\x00" in raw:
        raise click.UsageError(f"--{name}-file {path}: contains NUL bytes; expected text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.UsageError(
            f"--{name}-file {path}: not valid UTF-8 (byte {exc.start})"
        ) from None


def _check_reply_budget(settings: Settings, spec_text: str) -> None:
    """Bad usage when the judge's reply budget leaves no room for a prompt in its
    context window (settings or its profile): the grading could only end unscored."""
    from api.service.grader_factory import check_reply_budget

    try:
        check_reply_budget(settings, [spec_text])
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


async def _grade(
    settings: Settings, spec_text: str, rubric_id: str, truth: str, diag: str
) -> GradingResult:
    """Grade once with a judge spec and a rubric the caller checked, asking as live
    grading asks that judge (``SRE_JUDGE_JUDGE_SAMPLES`` samples and their majority)."""
    from api.service.grader_factory import grader_for, sampled
    from judge.backends import build_backend
    from judge.rubric import load_rubric_dir
    from judge.spec import parse_judge_spec

    rubrics = load_rubric_dir(settings.rubric_dir)
    backend = build_backend(parse_judge_spec(spec_text), limits=settings.stream_limits())
    try:
        grader = sampled(settings, grader_for(settings, backend), spec_text)
        return await grader.grade(rubrics[rubric_id], truth, diag)
    finally:
        await backend.aclose()


@click.command("grade")
@click.option("--ground-truth", "ground_truth", help="the scenario's ground truth (may be empty)")
@click.option(
    "--ground-truth-file", type=str, help="read the ground truth from a file (- for stdin)"
)
@click.option("--diagnosis", help="the agent's diagnosis")
@click.option("--diagnosis-file", type=str, help="read the diagnosis from a file (- for stdin)")
@click.option("--judge", "judge_spec", help="BACKEND:MODEL[@BASE_URL]; default SRE_JUDGE_JUDGE")
@click.option("--rubric", "rubric_id", help="rubric id; default SRE_JUDGE_RUBRIC")
@format_option("table", "json", legacy_json=True)
def grade_command(
    ground_truth: str | None,
    ground_truth_file: str | None,
    diagnosis: str | None,
    diagnosis_file: str | None,
    judge_spec: str | None,
    rubric_id: str | None,
    fmt: str,
) -> None:
    """Grade one diagnosis. Exit 0 graded (pass or fail), 3 unscored, 2 bad usage.

    \b
    Example:
      sre-judge grade --ground-truth-file truth.txt --diagnosis-file - --format json < d.txt
    """
    if ground_truth_file == "-" and diagnosis_file == "-":
        raise click.UsageError("only one of the files can be read from stdin")
    settings = load_settings()
    spec = checked_judge(settings.judge if judge_spec is None else judge_spec)
    _check_reply_budget(settings, spec)
    rubric = checked_rubric(
        settings.rubric if rubric_id is None else rubric_id, settings.rubric_dir
    )
    limit = settings.max_text_bytes
    truth = _read_text(ground_truth, ground_truth_file, name="ground-truth", max_bytes=limit)
    diag = _read_text(diagnosis, diagnosis_file, name="diagnosis", max_bytes=limit)
    result = run(_grade(settings, spec, rubric, truth, diag))
    from api.service.presenters import result_public

    grading = result_public(result).model_dump(mode="json")
    if fmt == "json":
        echo_json(grading, indent=2)
    else:
        from api.cli.render import render_grading

        render_grading(grading, stdout_console())
    if result.status == "unscored":
        sys.exit(EXIT_UNSCORED)
