"""Judges: calibrating a judge on a labelled gold set, and the judges page.

:mod:`~api.judges.calibration` grades the gold set, stores the run with the judge's
identity and its agreement, and reports drift against the previous run;
:mod:`~api.judges.cli` (``sre-judge calibrate``) and :mod:`~api.judges.pages`
(``/judges``: each identity qualified or provisional) present it. Reading a judge's
qualification while grading, and moving pending work between judges, is the grading
service's (:mod:`api.service.qualification`, :mod:`api.grading.judge_moves`).
"""
