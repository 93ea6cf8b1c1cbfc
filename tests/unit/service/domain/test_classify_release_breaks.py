"""The classifier on real release breaks (tests/fixtures/logs/releases/).

Each log is the real output of the bundled backend built with one of its ``COMPAT(>= X.Y)``
branches forced to the side written for the older release, against a newer torch
(``make_release_cases.py`` beside the logs). The ``expect:`` line's category and subtype
are the case's intended verdict, not what the classifier said when the log was made.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from evals.classifier import golden
from tests.support.paths import FIXTURES

DIR = FIXTURES / "logs" / "releases"
LOGS = sorted(DIR.glob("*.log"))
GENERIC = re.compile(r"ninja: build stopped|\[?exit code -?\d+\]?|error: command .*failed|"
                     r"^FAILED: |subprocess-exited-with-error|^FAILED |AssertionError")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_release_cases", DIR / "make_release_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_release_case_has_a_golden_log_with_its_verdict() -> None:
    cases = {c.name: c for c in _generator().CASES if c.expect}
    assert {p.stem for p in LOGS} == set(cases)
    for path in LOGS:
        log, case = golden.load(path), cases[path.stem]
        assert {k: log.expect[k] for k in ("stage", "category", "subtype")} == case.expect


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LOGS])
def test_golden_release_log(path: Path) -> None:
    log = golden.load(path)
    assert len(path.read_bytes()) < golden.MAX_BYTES + 4096
    finding = log.classify()
    assert finding is not None, "no rule matched"
    assert (finding.stage.value, finding.category.value, finding.subtype.value) == (
        log.expect["stage"], log.expect["category"], log.expect["subtype"]), finding.line
    assert finding.rule == log.expect["rule"]
    for name, value in log.captures.items():
        assert finding.captures.get(name) == value, name
    # The evidence is the specific line, never a "something failed" one.
    assert not GENERIC.search(finding.line), finding.line
