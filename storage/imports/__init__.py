"""What every feature shares of imported runs: their tables.

The importing itself (parsing SREGym results folders and JSON lines, storing what was
parsed, the background jobs) is the imports feature, :mod:`api.imports`; the reports
read the original rows back for the lossless SREGym export
(:mod:`api.reports.sregym_row_reads`).
"""

from __future__ import annotations

from storage.imports.tables import (
    IMPORT_JOB_STATES,
    SREGYM_JUDGE_SPEC,
    SREGYM_RUBRIC_VERSION,
    ImportJobRecord,
    ImportUploadRecord,
    SregymOriginalRowRecord,
)

__all__ = [
    "IMPORT_JOB_STATES",
    "SREGYM_JUDGE_SPEC",
    "SREGYM_RUBRIC_VERSION",
    "ImportJobRecord",
    "ImportUploadRecord",
    "SregymOriginalRowRecord",
]
