"""Regrading: historic gradings judged again with another rubric, judge or ground truth.

:mod:`~api.regrade.use_cases` starts a job (with its :mod:`~api.regrade.estimate`),
steers it and reads it and its flips (:mod:`~api.regrade.flips`: what changed, old
beside new, with kappa); :mod:`~api.regrade.schemas` are the job's request and public
forms; :mod:`~api.regrade.routes` (``/v1/regrade-jobs``), :mod:`~api.regrade.pages`
(``/regrades``) and :mod:`~api.regrade.cli` (``sre-judge regrade``) present them. The
job's items are gradings: the grading workers judge them, and the queue keeps each job's
bookkeeping in the transaction that stores an item (:mod:`storage.regrade`).
"""
