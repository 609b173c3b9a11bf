"""Adjudication: people checking the judge, on the API and on the workbench's pages.

:mod:`~api.adjudication.use_cases` overrides answers and verdicts, claims and finishes
review items, labels gradings blind and tags what an agent got wrong, always in the
caller's name; its HTTP routes (``override_routes``, ``review_routes``, ``tag_routes``)
and the workbench's pages (``grading_pages`` with :mod:`~api.adjudication.grading_view`
and :mod:`~api.adjudication.highlight` for the grading page, ``submitter_view`` for a
submitter's own grading, ``queue_pages``, ``label_pages``, ``tag_pages``) present them.
Who may read a grading and how it is shown are shared with the grading service
(:mod:`api.service.visibility`, :mod:`api.service.presenters`).
"""
