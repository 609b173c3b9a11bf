"""Which submissions a regrade job covers: a filter over current gradings.

A submission is covered when its current grading is finished (graded or unscored)
and matches the filter. Submissions without a grading (SREGym attempts that timed
out, failed to deploy or submitted nothing) are never covered, and pending gradings
are left to the workers that already have them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, String, case, func, literal, or_, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlmodel import col

from judge.masking import mask_passwords
from judge.rubric import split_rubric_ref
from judge.spec import PANEL_PREFIX, member_specs, panel_specs_named, split_spec
from storage.canonical import iso_utc
from storage.gradings import where_equal
from storage.tables import RESULT_STATUSES, GradingRecord, ScenarioRecord, SubmissionRecord

__all__ = [
    "RegradeFilter",
    "candidates_query",
    "check_graded_judge",
    "masked_filter",
    "matching_scenarios",
    "totals_query",
]


def masked_filter(stored: dict[str, Any]) -> dict[str, Any]:
    """A job's stored filter as it may be shown or audited: the graded judge it names
    with a credential of its base URL masked (the stored filter keeps it: the selection
    matches gradings by the exact spec)."""
    return {k: mask_passwords(v) if k == "judge" and v else v for k, v in stored.items()}


@dataclass(frozen=True)
class RegradeFilter:
    """The filter of a regrade job; None (or no tags) means "any".

    ``created_after`` (inclusive) and ``created_before`` (exclusive) apply to the
    submission's time (for imports, when the run happened). ``rubric_version`` is
    ``id@version`` or a bare id or version; ``judge`` is ``BACKEND:MODEL[@BASE_URL]`` of the
    current grading (``external:sregym`` for imported SREGym verdicts) or a panel,
    ``panel:SPEC1,SPEC2`` or ``panel:SPEC1+SPEC2``. ``tags`` are scenario tags, all
    required.
    """

    agent: str | None = None
    model: str | None = None
    scenario_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    rubric_version: str | None = None
    judge: str | None = None
    passed: bool | None = None
    tags: tuple[str, ...] = ()
    #: only scenarios of this set (``public``, ``held-out``, ...)
    scenario_set: str | None = None
    run_id: str | None = None
    #: ``scenario`` or ``inline``: where the submission's ground truth came from
    ground_truth_source: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The filter as stored with the job: given keys only, datetimes in ISO 8601."""
        stored: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if value is None or value == ():
                continue
            stored[key] = iso_utc(value) if isinstance(value, datetime) else value
        if "tags" in stored:
            stored["tags"] = list(stored["tags"])
        return stored


#: what a filter's ``judge`` may name (docs/imports-regrades.md, "Batch regrading")
_GRADED_JUDGE_FORMS = (
    "give BACKEND:MODEL (e.g. external:sregym), BACKEND:MODEL@URL, or a panel, "
    "panel:SPEC1,SPEC2 or panel:SPEC1+SPEC2"
)


def _names_a_judge(spec: str) -> bool:
    """Whether ``spec`` has the shape of a judge spec a grading records: a backend, a
    model and, after an ``@``, a base URL (read as recorded, not validated: a judge no
    longer configured, or ``external:sregym`` of imported verdicts, still names one)."""
    backend, model, base_url = split_spec(spec.strip())
    return bool(backend.strip() and model.strip() and (base_url is None or base_url.strip()))


def check_graded_judge(text: str) -> None:
    """ValueError, naming the accepted forms, unless ``text`` has the shape of a judge a
    grading records (:func:`_names_a_judge`), or of a panel of such members in one of
    its spellings: a blank text, ``scripted:``, ``:pass``, ``scripted:pass@`` or
    ``panel:`` names no grading's judge, and a filter by it would select nothing. The
    error quotes ``text`` with its base URLs' credentials masked."""
    if not text.strip():
        raise ValueError(f"the judge is empty; {_GRADED_JUDGE_FORMS}, or omit it")
    if text.startswith(PANEL_PREFIX):
        readings = [member_specs(spec) for spec in panel_specs_named(text)]
        if not any(all(map(_names_a_judge, members)) for members in readings):
            raise ValueError(
                f"{mask_passwords(text)!r} names no panel of judges BACKEND:MODEL[@URL]; "
                f"{_GRADED_JUDGE_FORMS}"
            )
    elif not _names_a_judge(text):
        raise ValueError(f"{mask_passwords(text)!r} names no judge; {_GRADED_JUDGE_FORMS}")


def _judge_clauses(judge: str) -> list[Any]:
    """The gradings by ``judge``: a panel by its members' specs as its gradings record
    them (``judge.spec.panel_specs_named``), a judge without a base URL at any address."""
    panels = panel_specs_named(judge)
    if panels:
        return [col(GradingRecord.judge_spec).in_(panels)]
    backend, model, base_url = split_spec(judge)
    if base_url is None:
        return [
            col(GradingRecord.judge_backend) == backend,
            col(GradingRecord.judge_model) == model,
        ]
    return [col(GradingRecord.judge_spec) == judge]


def _filtered(query: Select[Any], f: RegradeFilter, scenarios: list[str] | None) -> Select[Any]:
    g, s = GradingRecord, SubmissionRecord
    query = query.where(col(g.is_current).is_(True), col(g.status).in_(RESULT_STATUSES))
    equal = [
        (s.agent, f.agent),
        (s.model, f.model),
        (s.scenario_id, f.scenario_id),
        (s.run_id, f.run_id),
        (s.ground_truth_source, f.ground_truth_source),
    ]
    query = where_equal(query, equal)
    if f.created_after is not None:
        query = query.where(col(s.created_at) >= f.created_after)
    if f.created_before is not None:
        query = query.where(col(s.created_at) < f.created_before)
    if f.passed is not None:
        query = query.where(col(g.passed).is_(f.passed))
    if f.rubric_version is not None:
        rubric_id, version = split_rubric_ref(f.rubric_version)
        if version is None:  # an id or a version alone
            query = query.where(
                or_(col(g.rubric_id) == rubric_id, col(g.rubric_version) == rubric_id)
            )
        else:
            query = query.where(col(g.rubric_id) == rubric_id, col(g.rubric_version) == version)
    if f.judge is not None:
        query = query.where(*_judge_clauses(f.judge))
    if scenarios is not None:
        query = query.where(col(s.scenario_id).in_(scenarios))
    if f.scenario_set is not None:
        members = select(col(ScenarioRecord.id)).where(
            col(ScenarioRecord.scenario_set) == f.scenario_set
        )
        query = query.where(col(s.scenario_id).in_(members))
    return query


def _joined(*columns: Any) -> Select[Any]:
    return (
        select(*columns)
        .select_from(GradingRecord)
        .join(SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id))
    )


def matching_scenarios(rows: list[ScenarioRecord], tags: tuple[str, ...]) -> list[str]:
    """Ids of the scenarios carrying every tag."""
    wanted = set(tags)
    return [r.id for r in rows if wanted <= set(r.tags or [])]


def candidates_query(
    f: RegradeFilter, scenarios: list[str] | None, *, texts: bool = False, latest: bool = False
) -> Select[Any]:
    """``(grading_id, submission_id, scenario_version, rubric_id, rubric_version[,
    diagnosis, ground_truth, scenario_id, submitted_by])`` of covered submissions: the
    submission's own version and ground truth, or with ``latest`` its scenario's newest
    (an inline ground truth stays as it was), and the rubric its current grading has."""
    g, s, sc = GradingRecord, SubmissionRecord, ScenarioRecord
    version: Any = col(s.scenario_version)  # a column, or a CASE of two
    truth: Any = col(s.ground_truth)
    if latest:
        version = case((col(s.scenario_id).is_(None), version), else_=col(sc.version))
        truth = case((col(s.scenario_id).is_(None), truth), else_=col(sc.ground_truth))
    columns: list[Any] = [col(g.id), col(g.submission_id), version]
    columns += [col(g.rubric_id), col(g.rubric_version)]
    if texts:
        columns += [col(s.diagnosis), truth, col(s.scenario_id), col(s.submitted_by)]
    query = _joined(*columns)
    if latest:
        query = query.outerjoin(sc, col(sc.id) == col(s.scenario_id))
    query = _filtered(query, f, scenarios)
    return query.order_by(col(s.created_at), col(s.id))


#: the white space ``str.strip`` removes: the space, line breaks, tabs, separators,
#: no-break, em and ideographic spaces
_WHITE_SPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())


class _stripped(FunctionElement[str]):
    """A text without the :data:`_WHITE_SPACE` at either end: SQLite's ``trim(x, chars)``,
    PostgreSQL's ``btrim(x, chars)`` (a plain ``trim`` strips the space alone)."""

    type = String()
    inherit_cache = True


@compiles(_stripped, "sqlite")
def _stripped_sqlite(element: _stripped, compiler: Any, **kw: Any) -> str:
    return f"trim({compiler.process(element.clauses, **kw)})"


@compiles(_stripped, "postgresql")
def _stripped_postgres(element: _stripped, compiler: Any, **kw: Any) -> str:
    return f"btrim({compiler.process(element.clauses, **kw)})"


def _blank(text: Any) -> Any:
    """Whether ``text`` is blank as the grader reads it (``str.strip``: no judge call)."""
    return func.length(_stripped(text, literal(_WHITE_SPACE))) == 0


def totals_query(
    f: RegradeFilter,
    scenarios: list[str] | None,
    *,
    latest: bool = False,
    by_rubric: bool = False,
) -> Select[Any]:
    """Covered submissions, their text lengths, and how many have an empty diagnosis
    (``latest``: the lengths of the ground truths they will be graded against, each
    scenario's newest, as :func:`candidates_query` takes them); ``by_rubric``: a row for
    each rubric (id, version) of their current gradings, those two columns first."""
    g, s, sc = GradingRecord, SubmissionRecord, ScenarioRecord
    truth: Any = col(s.ground_truth)
    if latest:
        truth = case((col(s.scenario_id).is_(None), truth), else_=col(sc.ground_truth))
    text_chars = func.length(s.diagnosis) + func.length(truth)
    empty = func.sum(case((_blank(s.diagnosis), 1), else_=0))
    rubric = [col(g.rubric_id), col(g.rubric_version)] if by_rubric else []
    columns = (func.count(), func.coalesce(func.sum(text_chars), 0), func.coalesce(empty, 0))
    query = _joined(*rubric, *columns)
    if latest:
        query = query.outerjoin(sc, col(sc.id) == col(s.scenario_id))
    query = _filtered(query, f, scenarios)
    return query.group_by(*rubric) if by_rubric else query
