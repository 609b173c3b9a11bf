"""Grading: a diagnosis in, a verdict out.

:mod:`~api.grading.intake` checks and stores a submission (ground-truth policy, attempt
limit, text checks and screening once) and its pending grading; the workers
(:mod:`~api.grading.workers`) claim pending gradings, ask the judge, apply the rule in
code, hold what is not earned (:mod:`~api.grading.confirmation`,
:mod:`~api.grading.self_preference`) and store results in group commits
(:mod:`~api.grading.group_commit`), regrade items from the judge cache in batches
(:mod:`~api.grading.regrade_fast`); pending work follows the configured judge
(:mod:`~api.grading.judge_moves`). The submission and grading routes and the ``grade``,
``submit`` and ``gradings`` commands present it. Building a grader, qualification and
who may read what are shared with other features (:mod:`api.service`).
"""
