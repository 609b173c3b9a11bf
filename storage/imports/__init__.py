"""Importing historic runs: SREGym results folders and JSON lines of submissions.

Parsing (``sregym``, ``jsonl``, ``problems``) touches no database; ``store`` writes
what was parsed. Every problem names its file and line.
"""

from __future__ import annotations

from storage.imports.jsonl import JsonlLine, JsonlSubmission, read_jsonl
from storage.imports.problems import ImportFileError, ImportProblem, read_problems
from storage.imports.rows import SREGYM_JUDGE_SPEC, SREGYM_RUBRIC_VERSION
from storage.imports.sregym import SregymAnswer, SregymAttempt, read_sregym_folder
from storage.imports.store import ImportAborted, ImportProgress, ImportReport, ImportRepository
from storage.imports.tables import ImportJobRecord, ImportUploadRecord, SregymOriginalRowRecord

__all__ = [
    "SREGYM_JUDGE_SPEC",
    "SREGYM_RUBRIC_VERSION",
    "ImportAborted",
    "ImportFileError",
    "ImportJobRecord",
    "ImportProblem",
    "ImportProgress",
    "ImportReport",
    "ImportRepository",
    "ImportUploadRecord",
    "JsonlLine",
    "JsonlSubmission",
    "SregymAnswer",
    "SregymAttempt",
    "SregymOriginalRowRecord",
    "read_jsonl",
    "read_problems",
    "read_sregym_folder",
]
