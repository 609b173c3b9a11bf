"""The grading domain: rubrics, prompts, judge backends, reply parsing, evidence, rule.

No web and no database here: ``api`` and ``storage`` build on these names. Import them
from their modules (``judge.grader``, ``judge.rubric``, ...): this package imports
nothing itself, so that reading a rubric does not load the judge clients.
"""
