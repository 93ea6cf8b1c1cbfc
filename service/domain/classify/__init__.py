"""Breakage classification: rules as data (rules.toml), the engine, test failures.

Stable entry points for the pipeline:

- ``classify_log(text, stage) -> Finding | None``: the decisive failure of a step's log.
- ``classify_test_failure(nodeid, message, details, stage, outcome=...) -> Finding``: one
  failed or crashed test (from JUnit XML).
- ``parse_rules`` / ``default_rules`` / ``RuleError``: load a rules file (for
  ``ootci reclassify`` with changed rules); ``RuleSet.digest`` identifies the rules that
  produced a verdict. Both entry points take ``rules=`` to classify with another set.

- ``blame_own_module(finding, backend_packages(name))``: a missing module of the backend's
  own package is the backend's, not the environment's.

Both return fingerprinted Findings; store ``Finding.to_dict()``.
"""

from service.domain.classify.engine import classify_log, find_decisive
from service.domain.classify.ownership import backend_packages, blame_own_module
from service.domain.classify.rules import RuleError, RuleSet, default_rules, parse_rules
from service.domain.classify.testfail import classify_test_failure

__all__ = [
    "RuleError",
    "RuleSet",
    "backend_packages",
    "blame_own_module",
    "classify_log",
    "classify_test_failure",
    "default_rules",
    "find_decisive",
    "parse_rules",
]
