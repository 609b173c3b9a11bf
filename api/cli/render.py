"""Rich rendering of grading objects for the terminal.

Every text that came from the server (evidence, reasons, a judge's name, the detail) is
made inert (``api.terminal.terminal_text``) and escaped from rich markup before it is
printed, and nothing is read as an emoji code (``:white_check_mark:`` in a quote stays
those characters): a diagnosis, or a judge that copied one, never acts on the terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from api.terminal import terminal_text
from judge.review_reasons import hold_explanation

__all__ = ["render_grading", "render_submitter_view"]


def _print(console: Console, *objects: Any, **options: Any) -> None:
    """``console.print`` with no emoji codes read (the markup is this module's own)."""
    console.print(*objects, emoji=False, **options)


def _cells(*markup: str) -> list[Text]:
    """Table cells from this module's markup, no emoji codes read."""
    return [Text.from_markup(cell, emoji=False) for cell in markup]


def _shown(text: str) -> str:
    """Text from the server as rich markup that prints it as it is, inert."""
    return escape(terminal_text(text))


def _answer_cell(answer: dict[str, Any]) -> str:
    text = answer["answer"]
    style = "green" if text == "yes" else "red"
    cell = f"[{style}]{text}[/{style}]"
    if answer["judge_answer"] != answer["answer"]:
        cell += f" (judge: {answer['judge_answer']})"
    return cell


def _verified_cell(answer: dict[str, Any]) -> str:
    """Whether the quote is in the diagnosis and, where it is not, why it does not count;
    a found quote is not green beside a yes that code vetoed or flagged."""
    verified = answer.get("evidence_verified")
    if verified is None:
        return "-"
    if not verified:
        reason = answer.get("evidence_reason") or "not in the diagnosis"
        return f"[yellow]not found[/yellow]: {_shown(reason)}"
    return "found" if answer.get("veto") else "[green]found[/green]"


def _veto_cell(answer: dict[str, Any]) -> str:
    """The check in code that vetoed or flagged the judge's yes, and what it looked for."""
    veto = answer.get("veto")
    if not veto:
        return ""
    style = "red" if veto["effect"] == "vetoed" else "yellow"
    effect, check, reason = (_shown(veto[k]) for k in ("effect", "check", "reason"))
    return f"[{style}]{effect}[/{style}] {check}: {reason}"


def _print_heading(grading: dict[str, Any], console: Console) -> bool:
    """Print the rubric and judge line, and the reason of an unscored grading; False when
    the grading is unscored (nothing more to print but its detail)."""
    rubric, judge = grading["rubric"], grading["judge"]
    _print(
        console,
        f"rubric [bold]{_shown(rubric['id'])}[/bold] {_shown(str(rubric['version']))}  "
        f"judge [bold]{_shown(judge['backend'])}:{_shown(judge['model'])}[/bold]",
    )
    if grading["status"] == "unscored":
        _print(
            console, f"[bold yellow]UNSCORED[/bold yellow]: {_shown(grading['unscored_reason'])}"
        )
        return False
    return True


def _score_line(grading: dict[str, Any]) -> str:
    """``7/9 yes  D1 3/3  D2 2/3  D3 2/3  composite 0.78``."""
    dims = "  ".join(f"{d['id']} {d['yes']}/{d['total']}" for d in grading["dimensions"])
    total = sum(d["total"] for d in grading["dimensions"])
    return f"{grading['yes_count']}/{total} yes  {dims}  composite {grading['composite']}"


def _verdict(passed: bool | None) -> str:
    """PASS, FAIL, or NO VERDICT for a graded grading without one (an SREGym attempt
    imported by earlier versions with neither a whole checklist nor a success): never a
    fail it was not."""
    if passed is None:
        return "[bold yellow]NO VERDICT[/bold yellow]"
    return "[bold green]PASS[/bold green]" if passed else "[bold red]FAIL[/bold red]"


def render_grading(grading: dict[str, Any], console: Console) -> None:
    """Print the nine answers with their evidence, then the verdict."""
    if not _print_heading(grading, console):
        if grading.get("detail"):
            _print(console, terminal_text(grading["detail"]), markup=False)
        return
    table = Table(show_lines=False)
    for column in ("question", "answer", "evidence", "quote", "check in code"):
        table.add_column(column, overflow="fold")
    for answer in grading["answers"]:
        evidence = answer["evidence"] or answer.get("reasoning") or ""
        table.add_row(
            *_cells(
                _shown(answer["question_id"]),
                _answer_cell(answer),
                _shown(evidence[:160]),
                _verified_cell(answer),
                _veto_cell(answer),
            )
        )
    _print(console, table)
    if grading.get("held"):
        why = hold_explanation(grading.get("review_reasons") or [])
        verdict = f"[bold yellow]HELD[/bold yellow] (a pass waiting for a human: {why})"
    else:
        verdict = _verdict(grading["passed"])
    _print(console, f"{verdict}  {_score_line(grading)}")
    if grading.get("detail"):
        _print(console, f"note: {terminal_text(grading['detail'])}", markup=False)
    if grading["needs_review"]:
        reasons = ", ".join(grading["review_reasons"])
        _print(console, f"[yellow]needs review[/yellow]: {_shown(reasons)}")


def render_submitter_view(grading: dict[str, Any], console: Console) -> None:
    """Print a submitter's view of a grading against a registered scenario: the verdict,
    and under the ``answers`` view each question's effective answer; nothing else was
    sent (``SRE_JUDGE_SUBMITTER_VIEW``)."""
    if not _print_heading(grading, console):
        return
    verdict = _verdict(grading["passed"])
    if grading.get("held"):
        verdict = "[bold yellow]HELD[/bold yellow] (a pass waiting for a human)"
    if grading["view"] != "answers":
        _print(console, f"{verdict}  (the server shows submitters the verdict only)")
        return
    table = Table(show_lines=False)
    for column in ("question", "answer"):
        table.add_column(column)
    for answer in grading["answers"]:
        style = "green" if answer["answer"] == "yes" else "red"
        table.add_row(
            *_cells(_shown(answer["question_id"]), f"[{style}]{answer['answer']}[/{style}]")
        )
    _print(console, table)
    _print(console, f"{verdict}  {_score_line(grading)}")
