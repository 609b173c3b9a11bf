"""Importing historic runs: SREGym results folders and JSON lines of submissions.

Parsing (:mod:`~api.imports.sregym`, :mod:`~api.imports.jsonl`,
:mod:`~api.imports.problems`) touches no database and names every problem's file and
line; :mod:`~api.imports.queries` stores what was parsed, each row once however often it
is imported; :mod:`~api.imports.use_cases` runs an import for the command line and the
background jobs (:mod:`~api.imports.jobs`, run by :mod:`~api.imports.runner`), which
``POST /v1/imports`` (:mod:`~api.imports.routes`) queues. ``sre-judge import``
(:mod:`~api.imports.cli`) imports into the database or, with ``--server``, uploads
(:mod:`~api.imports.remote`). The tables live in :mod:`storage.imports`.
"""
