"""Scenarios: registered ground truths, versioned, listed and loaded as a dataset.

:mod:`~api.scenarios.use_cases` registers, reads, updates (``If-Match`` on the version)
and bulk-loads scenarios; :mod:`~api.scenarios.loading` reads JSON Lines and YAML
datasets; :mod:`~api.scenarios.queries` lists them with signed cursors and reads their
versions; :mod:`~api.scenarios.schemas` are their request and public forms;
:mod:`~api.scenarios.routes` (``/v1/scenarios``) and :mod:`~api.scenarios.cli`
(``sre-judge scenarios``) present them. The scenario table and its repository, which
submissions and imports resolve scenarios through, stay in :mod:`storage.scenarios`.
"""
