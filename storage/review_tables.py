"""Tables of human review: overrides, human labels, review claims, failure tags.

Overrides and labels are append-only: a correction is a new row pointing at what it
supersedes, and withdrawing one is another row. Review claims are queue bookkeeping
(who looks at what until when); each change of them is also an audit event.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, String, Text
from sqlmodel import Field, SQLModel

from storage.tables import _created, _when, new_id

__all__ = [
    "FailureTagRecord",
    "HumanLabelRecord",
    "OverrideRecord",
    "ReviewClaimRecord",
    "TagVocabularyRecord",
]


class OverrideRecord(SQLModel, table=True):
    """A human correction of one answer or of the verdict, or the withdrawal of one."""

    __tablename__ = "override"

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    grading_id: str = Field(sa_type=String(32), foreign_key="grading.id", index=True)
    #: answer | verdict | withdraw
    kind: str = Field(sa_type=String(16))
    question_id: str | None = Field(default=None, sa_type=String(32))
    answer: bool | None = None
    #: pass | fail, for verdict overrides
    verdict: str | None = Field(default=None, sa_type=String(8))
    #: the override this one replaces on the same target (answer or verdict), if any
    supersedes: str | None = Field(
        default=None, sa_column=Column(String(32), ForeignKey("override.id"), nullable=True)
    )
    #: for kind=withdraw: the override withdrawn
    withdraws: str | None = Field(
        default=None, sa_column=Column(String(32), ForeignKey("override.id"), nullable=True)
    )
    reason: str = Field(sa_type=Text)
    author_id: str = Field(sa_type=String(64))
    author_name: str = Field(sa_type=String(256))
    created_at: datetime = _created()
    #: the override a regrade copied this one from (None: made by a human): withdrawing
    #: the copy takes back the label its original recorded
    carried_from: str | None = Field(default=None, sa_type=String(32))


class HumanLabelRecord(SQLModel, table=True):
    """A human's own answer to a question (or verdict), blind or from an override."""

    __tablename__ = "human_label"
    __table_args__ = (Index("ix_human_label_grading_id_author_id", "grading_id", "author_id"),)

    id: int | None = Field(default=None, primary_key=True)
    grading_id: str = Field(sa_type=String(32), foreign_key="grading.id")
    #: None for a verdict label
    question_id: str | None = Field(default=None, sa_type=String(32))
    answer: bool | None = None
    verdict: str | None = Field(default=None, sa_type=String(8))
    #: blind | override
    source: str = Field(sa_type=String(16))
    author_id: str = Field(sa_type=String(64))
    author_name: str = Field(sa_type=String(256))
    created_at: datetime = _created()


class ReviewClaimRecord(SQLModel, table=True):
    """Who reviews a grading until when, whether the review is done, who skipped it last
    (with a note) and who it is assigned to."""

    __tablename__ = "review_claim"

    grading_id: str = Field(
        sa_column=Column(String(32), ForeignKey("grading.id"), primary_key=True)
    )
    claimed_by: str | None = Field(default=None, sa_type=String(64))
    claimed_by_name: str | None = Field(default=None, sa_type=String(256))
    claimed_until: datetime | None = _when()
    done_at: datetime | None = _when()
    done_by: str | None = Field(default=None, sa_type=String(64))
    #: the last skip: when, by whom (token id and name), with an optional note for the
    #: next adjudicator (None when none was given)
    skipped_at: datetime | None = _when()
    skipped_by: str | None = Field(default=None, sa_type=String(64))
    skipped_by_name: str | None = Field(default=None, sa_type=String(256))
    skip_note: str | None = Field(default=None, sa_type=Text)
    #: the adjudicator the item is assigned to (token id and name), by whom and when
    assigned_to: str | None = Field(default=None, sa_type=String(64), index=True)
    assigned_to_name: str | None = Field(default=None, sa_type=String(256))
    assigned_by: str | None = Field(default=None, sa_type=String(64))
    assigned_at: datetime | None = _when()

    def holder(self, now: datetime) -> str | None:
        """The name of who holds the item at ``now``; None when nobody does (no claim,
        or one that has run out: the item is back for everyone)."""
        if self.claimed_until is None or self.claimed_until <= now:
            return None
        return self.claimed_by_name


class FailureTagRecord(SQLModel, table=True):
    """What the agent got wrong, tagged by an adjudicator."""

    __tablename__ = "failure_tag"

    id: int | None = Field(default=None, primary_key=True)
    grading_id: str = Field(sa_type=String(32), foreign_key="grading.id", index=True)
    tag: str = Field(sa_type=String(64), index=True)
    note: str = Field(default="", sa_type=Text)
    author_id: str = Field(sa_type=String(64))
    author_name: str = Field(sa_type=String(256))
    created_at: datetime = _created()
    removed_at: datetime | None = _when()
    removed_by: str | None = Field(default=None, sa_type=String(64))

    def identity(self) -> tuple[str, str, str]:
        """What makes two tags one: the tag, its author and its note (a promote's copy
        keeps all three). Two adjudicators' tags, or one's with two notes, are two."""
        return self.tag, self.author_id, self.note


class TagVocabularyRecord(SQLModel, table=True):
    """A failure tag adjudicators may use: from the shipped file or added by an admin."""

    __tablename__ = "tag_vocabulary"

    tag: str = Field(primary_key=True, sa_type=String(64))
    description: str = Field(default="", sa_type=Text)
    #: file | admin
    source: str = Field(default="file", sa_type=String(16))
    created_by: str = Field(default="system", sa_type=String(64))
    created_at: datetime = _created()
