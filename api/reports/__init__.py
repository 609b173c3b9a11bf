"""Reports and exports: what the gradings say in aggregate, and the gradings themselves.

Pass rates with their intervals (:mod:`~api.reports.rates`), two arms compared, per
question, per dimension, per failure tag and per attempt; judge-human and judge-judge
agreement (:mod:`~api.reports.agreement`); exports as JSON lines, CSV and SREGym's own
files, lossless for imported runs (:mod:`~api.reports.exports`,
:mod:`~api.reports.sregym_writer`). Presented by the ``/v1/stats`` and ``/v1/exports``
routes, the reports page, and the ``report`` and ``export`` commands; tables and charts
in :mod:`~api.reports.tables` and :mod:`~api.reports.charts`. The queries behind them
are built from :mod:`~api.reports.filters` (with :mod:`~api.reports.filter_scope`) and run
in :mod:`~api.reports.queries`.
"""
