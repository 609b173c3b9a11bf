"""Helpers shared by the table modules: ids, row values, JSON column defaults."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from sqlalchemy import inspect as sa_inspect
from sqlmodel import SQLModel

__all__ = ["empty_dict", "empty_list", "new_id", "row_values"]


def new_id() -> str:
    """A fresh 32-hex-digit id (uuid4)."""
    return uuid4().hex


def row_values(record: SQLModel) -> dict[str, Any]:
    """A record's column values keyed by column name, for a Core INSERT of the record."""
    mapper = sa_inspect(type(record))
    return {attr.columns[0].key: getattr(record, attr.key) for attr in mapper.column_attrs}


def empty_dict() -> dict[str, Any]:
    """A new empty dict: the default factory of JSON object columns.

    A Python function, not the ``dict`` type: pydantic inspects a default factory's
    signature on every model construction, and for builtins that means parsing their
    text signature (a tenth of a submission's CPU in bench/overhead.py).
    """
    return {}


def empty_list() -> list[Any]:
    """A new empty list: the default factory of JSON array columns (see ``empty_dict``)."""
    return []
