"""Full-text search of diagnoses, override reasons and failure-tag notes.

One small query syntax, the same on SQLite (FTS5) and PostgreSQL (``tsvector``):

- words are ANDed: ``oom kill`` finds texts holding both words, in any order;
- ``"disk full"`` is a phrase: the words next to each other, in that order;
- a trailing ``*`` makes a prefix: ``kube*`` finds ``kubelet`` and ``kubernetes``;
- a leading ``-`` excludes: ``memory -leak`` finds texts with ``memory`` but not ``leak``.

Case does not matter: each engine folds the query's words as it folds the texts (the
query is never lowered here: Python's rules differ from both, e.g. ``İ`` or a final
``Σ``). Words are runs of letters and digits with their combining marks (a decomposed
accent, Indic vowel signs), as FTS5 keeps them; PostgreSQL's index takes a mark for
punctuation (``[[:punct:]]`` in its UTF-8 locale) and splits the word there, so its
query is split alike, a phrase of the parts. A term is looked for in both of Unicode's
canonical forms, composed (NFC, ``é`` as U+00E9) and decomposed (NFD, ``e`` and U+0301,
as macOS often sends it): texts are indexed as written, and ``café`` typed either way
finds a text holding it either way. Every other character separates words, so
``user-service`` is the phrase ``"user service"`` and ``diagnosis:``, ``NEAR``, ``AND``,
``&``, ``|`` or ``!`` are plain words or nothing, never operators. A grading matches
when its submission's diagnosis, one of its override reasons or one of its failure tags'
notes (tags in force) matches the whole query.

The query is parsed here (:meth:`SearchQuery.parse`, :class:`InvalidSearch` on malformed
input) and written out for each engine from the parsed terms only, each word quoted, so
user text never reaches either engine's query language as operators. The index lives
beside the tables: on SQLite the FTS5 table ``search_text`` kept in step by triggers, on
PostgreSQL a generated ``tsvector`` column ``search_document`` beside each text column,
GIN-indexed (migration 0014); both see the text with every ASCII punctuation character
as a space, so they split words alike. FTS5 keeps ``İ`` apart where PostgreSQL lowers it
to ``i``: the SQLite index and query write it ``I`` (migration 0032).

PostgreSQL's ``tsvector`` keeps at most 256 positions of a word and none past 16,383, so
its phrase operator (``<->``) misses a phrase after the 256th "pod" of a pasted log or
past the 16,383rd word of a long diagnosis. There the index only finds the texts holding
every word of the query (a phrase's words joined by ``&``), and each phrase is confirmed
on the text itself, split into words as the index splits it: a regular expression over
the lowered text (:func:`_phrase_pattern`). An excluded phrase excludes the texts holding
its words where the expression finds it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    column,
    func,
    literal_column,
    not_,
    or_,
    select,
    table,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import Boolean, NullType, String
from sqlmodel import col

from storage.review_tables import FailureTagRecord, OverrideRecord
from storage.tables import GradingRecord, SubmissionRecord

__all__ = [
    "FTS_TABLE",
    "MAX_QUERY_LENGTH",
    "MAX_TERMS",
    "InvalidSearch",
    "SearchQuery",
    "SearchTerm",
    "TextMatches",
    "include_in_autogenerate",
    "parse_search",
]

#: the SQLite FTS5 table (and the prefix of its shadow tables)
FTS_TABLE = "search_text"
#: the PostgreSQL generated column beside each searched text, and its indexes
POSTGRES_DOCUMENT = "search_document"
POSTGRES_INDEXES = frozenset(
    {"ix_submission_diagnosis_search", "ix_override_reason_search", "ix_failure_tag_note_search"}
)
MAX_QUERY_LENGTH = 500
MAX_TERMS = 16
#: between two words of a text: anything but a letter or a digit
_BETWEEN_WORDS = "[^[:alnum:]]+"
#: the text columns PostgreSQL indexes, by table (migration 0014)
_TEXT_COLUMNS = {"submission": "diagnosis", "override": "reason", "failure_tag": "note"}

#: Greek sigma in its two lower-case forms (a word's last letter is ``ς``): PostgreSQL's
#: ``simple`` configuration lowers ``Σ`` to ``σ`` everywhere and keeps a written ``ς``
_SIGMA = re.compile("[σς]")


class InvalidSearch(ValueError):
    """A search query outside the syntax; ``field`` names the request parameter."""

    field = "q"


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """One term: its words (a phrase when several), whether the last one is a prefix,
    and whether texts holding it are excluded."""

    words: tuple[str, ...]
    prefix: bool = False
    excluded: bool = False

    def forms(self) -> tuple[SearchTerm, ...]:
        """The term composed (NFC) and decomposed (NFD), once each: a text holds its
        words in either form, and each engine indexes them as written."""
        forms = (
            SearchTerm(
                tuple(w for word in self.words for w in _words(unicodedata.normalize(form, word))),
                prefix=self.prefix,
                excluded=self.excluded,
            )
            for form in ("NFC", "NFD")
        )
        return tuple(dict.fromkeys(forms))


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed query: every positive term must match, no excluded one may."""

    terms: tuple[SearchTerm, ...]

    @classmethod
    def parse(cls, text: str) -> SearchQuery:
        """Parse ``text`` (see the module's syntax); raise :class:`InvalidSearch` for an
        unclosed quote, too long a query, too many terms or nothing to find."""
        if len(text) > MAX_QUERY_LENGTH:
            raise InvalidSearch(f"at most {MAX_QUERY_LENGTH} characters")
        terms = [term for term in _terms(text) if term.words]  # ``&``, ``|``: nothing
        if len(terms) > MAX_TERMS:
            raise InvalidSearch(f"at most {MAX_TERMS} words or phrases")
        if all(term.excluded for term in terms):
            raise InvalidSearch("give at least one word to find (letters or digits)")
        return cls(tuple(terms))

    def fts5(self) -> str:
        """The FTS5 MATCH expression: each word a quoted string, joined by AND and NOT."""
        wanted = " AND ".join(_fts5_term(t) for t in self.terms if not t.excluded)
        expression = f"({wanted})"
        for term in self.terms:
            if term.excluded:
                expression = f"({expression} NOT {_fts5_term(term)})"
        return expression

    def tsquery(self) -> str:
        """The ``to_tsquery`` text the PostgreSQL index is asked: each word single-quoted,
        prefixes with ``:*``, every word of a wanted term's form joined by ``&``, its
        forms by ``|``, and each form of an excluded term that is a single word with
        ``!``. A phrase's order and an excluded phrase are left to the confirmation on
        the text (:func:`_phrase_pattern`): the index cannot place a word after its 256th
        occurrence or past the 16,383rd word."""
        written = [
            _tsquery_term(term)
            if not term.excluded
            else " & ".join("!" + _tsquery_form(f) for f in term.forms() if _plain_word(f))
            for term in self.terms
        ]
        return " & ".join(w for w in written if w)


def parse_search(text: str | None) -> SearchQuery | None:
    """The query of a ``q`` parameter, or None when it is absent or blank (no search);
    raises :class:`InvalidSearch`."""
    if text is None or not text.strip():
        return None
    return SearchQuery.parse(text)


def _terms(text: str) -> list[SearchTerm]:
    """The terms of ``text`` as written, before dropping those without a word."""
    terms: list[SearchTerm] = []
    at, end = 0, len(text)
    while at < end:
        if text[at].isspace():
            at += 1
            continue
        excluded = text[at] == "-"
        at += excluded
        if at < end and text[at] == '"':
            closing = text.find('"', at + 1)
            if closing < 0:
                raise InvalidSearch("a quote is not closed")
            raw, at = text[at + 1 : closing], closing + 1
        else:
            start = at
            while at < end and not text[at].isspace() and text[at] != '"':
                at += 1
            raw = text[start:at]
        prefix = raw.endswith("*") or (at < end and text[at] == "*")
        at += at < end and text[at] == "*"
        words = tuple(_words(raw))
        terms.append(SearchTerm(words, prefix=prefix, excluded=excluded))
    return terms


def _words(raw: str, *, marks: bool = True) -> list[str]:
    """The words of ``raw``: runs of letters and digits with their combining marks (none
    with ``marks=False``: a mark separates too), as written (each engine folds case);
    ``_`` and everything else separates them."""
    words, word = [], []
    for character in raw:
        if character.isalnum():
            word.append(character)
            continue
        if marks and word and unicodedata.category(character).startswith("M"):
            word.append(character)
            continue
        if word:
            words.append("".join(word))
            word = []
    if word:
        words.append("".join(word))
    return words


def _fts5_term(term: SearchTerm) -> str:
    """``term`` for FTS5: each form a quoted string (a phrase of its words), the forms
    joined by OR."""
    forms = [_fts5_form(form) for form in term.forms()]
    return forms[0] if len(forms) == 1 else "(" + " OR ".join(forms) + ")"


def _fts5_form(term: SearchTerm) -> str:
    # words hold letters and digits only, so no quote can close the string early; ``İ``
    # is written ``I`` as the index has it (migration 0032), so FTS5 folds it to ``i``
    words = " ".join(term.words).replace("İ", "I")
    return '"' + words + '"' + ("*" if term.prefix else "")


def _tsquery_word(word: str, prefix: bool) -> str:
    """One word for ``to_tsquery`` (``prefix``: ``:*``); a Greek one holding a sigma as
    either spelling of its sigmas (``ΚΟΜΒΟΣ`` is indexed ``κομβοσ``, ``κόμβος`` as
    written), as FTS5 folds them alike."""
    suffix = ":*" if prefix else ""
    if not _SIGMA.search(lowered := word.lower()):
        return f"'{word}'{suffix}"
    medial = lowered.replace("ς", "σ")
    final = re.sub(r"σ\b", "ς", medial)
    if final == medial:
        return f"'{medial}'{suffix}"
    return f"('{medial}'{suffix} | '{final}'{suffix})"


def _postgres_parts(term: SearchTerm) -> list[str]:
    """The words of ``term`` as PostgreSQL's index has them: it splits words at combining
    marks too, so a word may be a phrase of its parts."""
    return [part for word in term.words for part in _words(word, marks=False)]


def _without_marks(word: str) -> str:
    """``word`` without its combining marks, as PostgreSQL's index has it."""
    return "".join(_words(word, marks=False))


def _plain_word(term: SearchTerm) -> bool:
    """Whether the PostgreSQL index alone tells where ``term`` occurs: one word, without
    a mark."""
    return not _is_phrase(term) and all(w == _without_marks(w) for w in term.words)


def _is_phrase(term: SearchTerm) -> bool:
    """Whether ``term`` is a phrase on PostgreSQL (the order of its words matters)."""
    return len(_postgres_parts(term)) > 1


def _tsquery_term(term: SearchTerm) -> str:
    """``term`` for ``to_tsquery``: its forms (:meth:`SearchTerm.forms`) joined by ``|``,
    bracketed: ``&`` binds tighter than ``|``, so the terms beside it stay required."""
    return "(" + " | ".join(_tsquery_form(form) for form in term.forms()) + ")"


def _tsquery_form(term: SearchTerm) -> str:
    """One form's words for ``to_tsquery``, joined by ``&``: which words a text holds."""
    parts = _postgres_parts(term)
    last = len(parts) - 1
    quoted = [_tsquery_word(part, term.prefix and at == last) for at, part in enumerate(parts)]
    return "(" + " & ".join(quoted) + ")"


def _sql_text(value: str) -> ColumnElement[Any]:
    """A constant of this module (never user text) as an SQL string literal."""
    assert "'" not in value and "\\" not in value
    return literal_column(f"'{value}'")


def _lowered(text: ColumnElement[Any]) -> ColumnElement[Any]:
    """``text`` as :func:`_phrase_pattern` reads it: lowered as the index's ``simple``
    configuration lowers each word.

    The index reads the text with every run of ``[[:punct:][:space:]]`` as one space
    (migration 0014), but those characters are never ``[[:alnum:]]`` (POSIX keeps the
    classes apart), and the pattern tells only letters and digits from the rest: it sees
    the same words in the text as written, without a second pass over it (a pass that
    cost more than the match itself)."""
    return func.lower(text)


def _one_sigma(text: ColumnElement[Any]) -> ColumnElement[Any]:
    """``text`` with every final sigma ``ς`` written ``σ``."""
    return func.translate(text, _sql_text("ς"), _sql_text("σ"))


def _phrase_pattern(name: str, term: SearchTerm) -> ColumnElement[Any]:
    """The regular expression that finds the phrase ``term`` in a :func:`_lowered`
    text, computed once per query (a scalar subquery).

    The phrase's words are lowered and split by PostgreSQL as the text is (a character
    its locale counts as no letter, such as ``²``, separates words there too), so they
    hold nothing but ``[[:alnum:]]`` characters, none of them an operator of a regular
    expression. PostgreSQL's parser takes the same runs of them for words (but for a few
    marks newer than the locale's tables, and ``1e5x``, which it reads as ``1e5 x``). The
    words follow one another with anything but a letter or digit between, the first
    starts a word and the last ends one (unless it is a prefix); ``σ`` and ``ς`` stand
    for either, as :func:`_tsquery_word` gives both spellings."""
    written = bindparam(name, " ".join(_postgres_parts(term)), type_=String)
    space, every = _sql_text(" "), _sql_text("g")
    words = func.btrim(
        func.regexp_replace(func.lower(written), _sql_text(_BETWEEN_WORDS), space, every)
    )
    between = func.replace(words, space, _sql_text(_BETWEEN_WORDS))
    sigmas = func.regexp_replace(between, _sql_text("[σς]"), _sql_text("[σς]"), every)
    end = "" if term.prefix else "(?:[^[:alnum:]]|$)"
    pattern = func.concat(_sql_text("(?:^|[^[:alnum:]])"), sigmas, _sql_text(end))
    return select(pattern).scalar_subquery()


class TextMatches(ColumnElement[bool]):
    """True for a grading (a row of ``grading``) whose diagnosis, override reasons or
    tag notes match ``query``; compiled for the engine at hand.

    ``reviews_where``: the condition under which a grading's override reasons and tag
    notes are searched at all (None: always), e.g. only where the caller may read them:
    a search must not tell anyone what a text it may not read holds."""

    inherit_cache = False
    type = NullType()  # type: ignore[assignment]  # no "= 1" where booleans are integers

    def __init__(
        self, query: SearchQuery, reviews_where: ColumnElement[bool] | None = None
    ) -> None:
        """Match ``query``."""
        self.query = query
        self.reviews_where = reviews_where


def _limited(
    diagnoses: ColumnElement[bool], reviews: ColumnElement[bool], element: TextMatches
) -> ColumnElement[bool]:
    if element.reviews_where is not None:
        reviews = and_(reviews, element.reviews_where)
    return or_(diagnoses, reviews)


def _fts_sources(element: TextMatches) -> ColumnElement[bool]:
    fts = table(FTS_TABLE, column("submission_id"), column("grading_id"))
    found = literal_column(FTS_TABLE).op("MATCH", return_type=Boolean)(element.query.fts5())
    diagnoses = select(fts.c.submission_id).where(found, fts.c.grading_id.is_(None))
    reviews = select(fts.c.grading_id).where(found, fts.c.grading_id.is_not(None))
    return _limited(
        col(GradingRecord.submission_id).in_(diagnoses), col(GradingRecord.id).in_(reviews), element
    )


def _postgres_sources(element: TextMatches) -> ColumnElement[bool]:
    """The texts the index finds holding the query's words, each phrase confirmed on the
    text, in the three searched tables. Each form of a term (:meth:`SearchTerm.forms`)
    is one alternative: a wanted term matches where one of its forms does, an excluded
    one leaves out the texts where any does."""
    query = element.query
    simple: ColumnElement[Any] = literal_column("'simple'")
    tsquery = func.to_tsquery(simple, bindparam("search_q", query.tsquery()))
    forms = {n: term.forms() for n, term in enumerate(query.terms)}
    words = {
        (n, k): func.to_tsquery(simple, bindparam(f"search_t{n}_{k}", _tsquery_form(form)))
        for n, term_forms in forms.items()
        for k, form in enumerate(term_forms)
    }
    # a word of characters PostgreSQL's parser takes for none (``½``, ``①``) gives no
    # lexeme, and to_tsquery drops the term: ``½ -scanned`` would then match every text
    # without "scanned". A wanted term that gives no lexeme matches nothing instead.
    wanted = [
        or_(*(func.numnode(words[n, k]) > 0 for k in range(len(forms[n]))))
        for n, term in enumerate(query.terms)
        if not term.excluded
    ]
    phrases = {
        (n, k): _phrase_pattern(f"search_p{n}_{k}", form)
        for n, term_forms in forms.items()
        for k, form in enumerate(term_forms)
        if _is_phrase(form)
    }
    # the index drops a word's marks (a decomposed ``café`` is indexed ``cafe``): a
    # form's words that hold one are confirmed on the text, so that ``café`` typed
    # either way does not find ``cafe``, as on FTS5
    marked = {
        (n, k): [
            bindparam(f"search_m{n}_{k}_{i}", word, type_=String)
            for i, word in enumerate(w for w in form.words if w != _without_marks(w))
        ]
        for n, term_forms in forms.items()
        for k, form in enumerate(term_forms)
    }

    def matches(record: Any) -> ColumnElement[bool]:
        # the innermost ``FROM {table}``: the subquery's own, never the outer query's
        name = record.__tablename__
        document: ColumnElement[Any] = literal_column(f"{name}.{POSTGRES_DOCUMENT}")
        text = _lowered(literal_column(f"{name}.{_TEXT_COLUMNS[name]}"))

        def holds(n: int, k: int) -> ColumnElement[bool]:
            """Where the text holds form ``k`` of term ``n``: its words (the index), in
            order where it is a phrase, with their marks where they have some (the
            text)."""
            found: ColumnElement[bool] = document.op("@@", return_type=Boolean)(words[n, k])
            if (n, k) in phrases:
                found = and_(found, text.op("~", return_type=Boolean)(phrases[n, k]))
            for word in marked[n, k]:  # either sigma, as the index and the pattern read it
                held = func.strpos(_one_sigma(text), _one_sigma(func.lower(word))) > 0
                found = and_(found, held)
            return found

        conditions = [*wanted, document.op("@@", return_type=Boolean)(tsquery)]
        for n, term in enumerate(query.terms):
            confirmed = [k for k in range(len(forms[n])) if (n, k) in phrases or marked[n, k]]
            if term.excluded:  # an excluded word is the tsquery's, unless it is confirmed
                conditions.extend(not_(holds(n, k)) for k in confirmed)
            elif confirmed:
                conditions.append(or_(*(holds(n, k) for k in range(len(forms[n])))))
        return and_(*conditions)

    diagnoses = select(col(SubmissionRecord.id)).where(matches(SubmissionRecord)).correlate(None)
    reasons = select(col(OverrideRecord.grading_id)).where(matches(OverrideRecord))
    notes = select(col(FailureTagRecord.grading_id)).where(
        matches(FailureTagRecord), col(FailureTagRecord.removed_at).is_(None)
    )  # (uncorrelated: the outer query reads neither table)
    return _limited(
        col(GradingRecord.submission_id).in_(diagnoses),
        or_(col(GradingRecord.id).in_(reasons), col(GradingRecord.id).in_(notes)),
        element,
    )


# parenthesised: the OR inside must never bind to the conditions around it (the
# submitter's restriction above all)
@compiles(TextMatches, "sqlite")
def _compile_sqlite(element: TextMatches, compiler: SQLCompiler, **kw: Any) -> str:
    return "(" + compiler.process(_fts_sources(element), **kw) + ")"


@compiles(TextMatches, "postgresql")
def _compile_postgres(element: TextMatches, compiler: SQLCompiler, **kw: Any) -> str:
    return "(" + compiler.process(_postgres_sources(element), **kw) + ")"


def include_in_autogenerate(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Alembic's ``include_object``: leave the search index out of autogenerate's
    comparison (the FTS5 table and its shadow tables, the PostgreSQL generated columns
    and their indexes are made by migration 0014, not by the models)."""
    if not reflected or name is None:
        return True
    if type_ == "table":
        return not name.startswith(FTS_TABLE)
    if type_ == "column":
        return name != POSTGRES_DOCUMENT
    if type_ == "index":
        return name not in POSTGRES_INDEXES
    return True
