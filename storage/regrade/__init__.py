"""Regrade jobs: which submissions a job covers, its items, their life in the queue.

``jobs`` holds :class:`~storage.regrade.jobs.RegradeRepository` (``store.regrade``);
``lifecycle`` what happens in the queue's transactions (held back, started, item
completed, promoted, ended); ``carry`` how human overrides follow a regrade;
``select``, ``progress`` and ``flips`` the queries behind them.
"""
