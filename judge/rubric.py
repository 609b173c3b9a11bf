"""Rubrics: dimensions of yes/no questions and the pass rule, loaded from YAML.

A rubric's version is its human label plus a hash of its normalized content, so two
files that differ in anything that changes grading have different versions, while
comments and key order do not matter.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from judge.errors import RubricError
from judge.yaml_text import load_yaml

__all__ = [
    "DEFAULT_RUBRIC_DIR",
    "Dimension",
    "PassRule",
    "Question",
    "Rubric",
    "load_rubric",
    "load_rubric_dir",
    "named_rubric_ref",
    "rubric_from_mapping",
    "split_rubric_ref",
]

#: the rubric folder of this checkout
DEFAULT_RUBRIC_DIR = Path(__file__).resolve().parent.parent / "rubrics"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


class Question(_Strict):
    """One yes/no question."""

    id: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")
    text: str = Field(min_length=1)
    hint: str = ""
    #: a "yes" must be backed by a verbatim quote from the diagnosis
    requires_quote: bool
    #: a necessary condition of a "yes", checked in code (``judge.grounding``): the
    #: diagnosis names the ground truth's ``component`` (or points at it:
    #: ``origin_consistent``), or one of its concrete ``values``
    #: ``consistent_values``: no quantity of the diagnosis contradicts the ground truth's
    #: value of the same thing (``judge.quantities``)
    grounding: Literal["component", "origin_consistent", "values", "consistent_values"] | None = (
        None
    )
    #: the question worded the other way round (its yes is this question's no), and its
    #: hint: small judges answer "does it avoid X?" worse than "does it X?"
    positive_text: str = ""
    positive_hint: str = ""
    #: ``positive``: ask ``positive_text`` and invert the answer in code; the answer is
    #: recorded in this question's own polarity. SRE_JUDGE_JUDGE_ASK_AS overrides
    ask_as: Literal["as_written", "positive"] = "as_written"
    #: in ``extraction`` asking, the comparison of the diagnosis' extracted claims with
    #: the ground truth that answers this question in code (``judge.extraction``)
    claims: Literal["origin", "no_other_cause", "values"] | None = None

    @model_validator(mode="after")
    def _positive_needs_text(self) -> Question:
        if self.ask_as == "positive" and not self.positive_text:
            raise ValueError("ask_as: positive needs positive_text")
        if self.positive_text and self.requires_quote:
            # its yes would be the judge's no, which quotes nothing
            raise ValueError("positive_text is for questions without requires_quote")
        return self


class Dimension(_Strict):
    """A group of questions about one aspect of the diagnosis."""

    id: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")
    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    questions: tuple[Question, ...]

    @field_validator("questions")
    @classmethod
    def _not_empty(cls, value: tuple[Question, ...]) -> tuple[Question, ...]:
        if not value:
            raise ValueError("a dimension needs at least one question")
        return value


class PassRule(_Strict):
    """Pass when yes_count >= min_yes and every dimension has min_yes_per_dimension yes."""

    #: numbers written as such: YAML's ``yes`` is no count and no weight
    min_yes: StrictInt
    min_yes_per_dimension: StrictInt
    #: composite weights, one per dimension, applied to each dimension's yes share
    weights: tuple[StrictFloat, ...]


class Rubric(_Strict):
    """A versioned rubric."""

    id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    label: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")
    title: str = ""
    unverified_yes: Literal["review", "downgrade"] = "review"
    #: a judge "yes" that fails its grounding condition counts as no (``veto``) or is
    #: kept and sent to review (``flag``)
    grounding_failure: Literal["veto", "flag"] = "veto"
    #: how the judge is asked: ``single`` (one call, every question) or ``per_question``
    #: (one short call per question after a shared prefix) or ``extraction`` (the
    #: diagnosis' claims extracted, questions with ``claims`` answered in code, the rest
    #: per question: ``judge.extraction``); SRE_JUDGE_JUDGE_ASKING overrides
    asking: Literal["single", "per_question", "extraction"] = "single"
    #: what the judge writes per question: ``full`` (reasoning, evidence, answer,
    #: confidence) or ``compact`` (the answer, and a quote for [quote] questions);
    #: SRE_JUDGE_JUDGE_REPLY_FORMAT overrides
    reply_format: Literal["full", "compact"] = "full"
    control_scenario: str = Field(min_length=1)
    rule: PassRule
    dimensions: tuple[Dimension, ...]

    @property
    def version(self) -> str:
        """``label+hash``: the label for people, the hash of the normalized content."""
        return f"{self.label}+{self.content_hash[:12]}"

    @property
    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of everything but the label."""
        return _content_hash(self)

    @cached_property
    def questions(self) -> tuple[Question, ...]:
        """All questions in order (computed once: the rule and the grader ask often)."""
        return tuple(q for d in self.dimensions for q in d.questions)

    def dimension_of(self, question_id: str) -> Dimension:
        """The dimension a question belongs to."""
        for dimension in self.dimensions:
            if any(q.id == question_id for q in dimension.questions):
                return dimension
        raise KeyError(question_id)

    def question(self, question_id: str) -> Question:
        """A question by id."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)


#: keys added after the first rubrics, with their defaults
_LATER_KEYS = {"asking": "single", "reply_format": "full"}
_LATER_QUESTION_KEYS = {
    "positive_text": "",
    "positive_hint": "",
    "ask_as": "as_written",
    "claims": None,
}


def _without_defaults(payload: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    for key, default in defaults.items():
        if payload.get(key) == default:
            del payload[key]
    return payload


@lru_cache(maxsize=256)
def _content_hash(rubric: Rubric) -> str:
    """The hash of a rubric's content, kept per distinct (equal-field) rubric."""
    # keys added later stay out of the hash at their defaults: versions of rubrics
    # written before they existed do not change
    payload = _without_defaults(rubric.model_dump(mode="json", exclude={"label"}), _LATER_KEYS)
    for dimension in payload["dimensions"]:
        for question in dimension["questions"]:
            _without_defaults(question, _LATER_QUESTION_KEYS)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_semantics(rubric: Rubric) -> list[str]:
    faults: list[str] = []
    dim_ids = [d.id for d in rubric.dimensions]
    q_ids = [q.id for q in rubric.questions]
    for kind, ids in (("dimension", dim_ids), ("question", q_ids)):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            faults.append(f"duplicate {kind} id(s): {', '.join(dupes)}")
    if not rubric.dimensions:
        faults.append("the rubric has no dimensions")
        return faults
    rule = rubric.rule
    total = len(q_ids)
    if len(rule.weights) != len(rubric.dimensions):
        faults.append(
            f"rule.weights has {len(rule.weights)} weights for {len(rubric.dimensions)} dimensions"
        )
    # a sum a little under 1 is taken (thirds written 0.33), none over it: the composite
    # of nine yes is at most 1
    if not all(math.isfinite(w) and w >= 0 for w in rule.weights) or not (
        0.989 <= sum(rule.weights) <= 1.0 + 1e-9
    ):
        faults.append("rule.weights must be non-negative and sum to 1 (0.99 taken for thirds)")
    smallest = min(len(d.questions) for d in rubric.dimensions)
    if rule.min_yes > total or rule.min_yes_per_dimension > smallest:
        faults.append(
            f"the rule can never pass: min_yes={rule.min_yes} of {total} questions, "
            f"min_yes_per_dimension={rule.min_yes_per_dimension} with {smallest} in the "
            "smallest dimension"
        )
    if rule.min_yes <= 0 and rule.min_yes_per_dimension <= 0:
        faults.append("the rule always passes: min_yes and min_yes_per_dimension are both <= 0")
    return faults


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def rubric_from_mapping(data: Any, *, source: str) -> Rubric:
    """Validate a parsed rubric; raise RubricError naming ``source`` and every fault."""
    if not isinstance(data, dict):
        raise RubricError(f"{source}: a rubric must be a mapping, got {type(data).__name__}")
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as exc:
        raise RubricError(f"{source}: {_describe_validation(exc)}") from None
    faults = _check_semantics(rubric)
    if faults:
        raise RubricError(f"{source}: {'; '.join(faults)}")
    return rubric


def load_rubric(path: str | Path) -> Rubric:
    """Load and validate one rubric file (a text parsed before is not parsed again)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RubricError(f"{path}: cannot read: {exc.strerror}") from None
    return _parsed_rubric(text, str(path))


@lru_cache(maxsize=64)
def _parsed_rubric(text: str, source: str) -> Rubric:
    """The rubric a file's text gives; cached by text, as a rubric is immutable and every
    runtime (each test's app, each worker process) loads the same few files."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise RubricError(f"{source}: not valid YAML: {exc}") from None
    return rubric_from_mapping(data, source=source)


def load_rubric_dir(directory: str | Path = DEFAULT_RUBRIC_DIR) -> dict[str, Rubric]:
    """Load every ``*.yaml`` rubric of a folder, keyed by id; duplicate ids are an error."""
    rubrics: dict[str, Rubric] = {}
    for path in sorted(Path(directory).glob("*.y*ml")):
        rubric = load_rubric(path)
        if rubric.id in rubrics:
            raise RubricError(f"{path}: rubric id {rubric.id!r} is defined twice")
        rubrics[rubric.id] = rubric
    return rubrics


def split_rubric_ref(text: str) -> tuple[str, str | None]:
    """``id@version`` -> (id, version); a text without ``@`` -> (text, None).

    ValueError for ``id@`` (or a version of blanks): an empty version names no version
    (not the current one, which is the bare ``id``), so a reference built from a version
    that was not found is refused rather than read as whatever rubric is current."""
    name, at, version = text.partition("@")
    if at and not version.strip():
        raise ValueError(f"{text!r}: the version after '@' is empty (give id or id@version)")
    return (name, version) if at else (text, None)


def named_rubric_ref(text: str) -> tuple[str, str | None]:
    """As :func:`split_rubric_ref`, and ValueError for an empty (or blank) id too: a
    filter or a target naming ``""``, ``" "`` or ``@VERSION`` names no rubric."""
    name, version = split_rubric_ref(text)
    if not name.strip():
        raise ValueError(f"{text!r}: the rubric id is empty (give id or id@version)")
    return name, version
