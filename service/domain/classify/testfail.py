"""Classifying one failed or crashed test (a JUnit record), not a whole log.

``classify_test_failure(nodeid, message, details, stage=Stage.TEST, *, outcome=None)``

- A crash (``outcome == "crashed"``, or a fatal signal in the text) -> crash, unless the
  text names an infra cause (the runner reports a test it killed for hanging as crashed).
- Otherwise the test-stage rules refine it from the message/traceback: a PrivateUse1 hook
  or kernel the backend lacks -> new-hook-required, a dtype check -> new-dtype-check, a
  torch Python API gone -> symbol-removed, a pytest-timeout -> infra/timeout.
- Anything else is a test-regression whose evidence is the first line of the message.

The test's node id is always the ``test`` capture, so one test's failure groups across
nights even when its assertion values differ.
"""

from __future__ import annotations

from dataclasses import replace

from service.domain.classify.engine import LINE_CAP, find_decisive
from service.domain.classify.rules import RuleSet
from service.domain.fingerprint import with_fingerprint
from service.domain.states import Outcome
from service.domain.verdict import Category, Finding, Stage, Subtype

# How much of a JUnit message/traceback is classified: the cause is at the start or end.
TEXT_CAP = 1 << 20


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:LINE_CAP]
    return ""


def _bounded(text: str) -> str:
    if len(text) <= TEXT_CAP:
        return text
    half = TEXT_CAP // 2
    return text[:half] + "\n" + text[-half:]


def classify_test_failure(
    nodeid: str,
    message: str | None,
    details: str | None,
    stage: Stage = Stage.TEST,
    *,
    outcome: str | None = None,
    rules: RuleSet | None = None,
) -> Finding:
    """The finding for one failed test; never None (a failed test is always evidence)."""
    text = _bounded("\n".join(p for p in (message, details) if p))
    found = find_decisive(text, stage, rules=rules) if text else None
    evidence = _first_line(message or "") or _first_line(details or "") or f"{nodeid} failed"

    # A runner that killed a hung test reports it as crashed; the timeout says more.
    crash_unexplained = found is None or (
        found.subtype is not Subtype.CRASH and found.category is not Category.INFRA
    )
    if outcome == Outcome.CRASHED and crash_unexplained:
        found = Finding(
            category=Category.UPSTREAM,
            subtype=Subtype.CRASH,
            rule="test-crashed",
            stage=stage,
            line=evidence if message or details else f"{nodeid} crashed",
            line_number=0,
            explanation="the test process died (the runner reported it as crashed)",
        )
    elif found is None or found.subtype is Subtype.GENERIC:
        # An exception no rule names is still the evidence of a regression, not "unknown":
        # the test passed on the last green pin or it would not be in the contract suite.
        found = Finding(
            category=Category.UPSTREAM,
            subtype=Subtype.TEST_REGRESSION,
            rule="test-failed",
            stage=stage,
            line=found.line if found is not None else evidence,
            line_number=found.line_number if found is not None else 0,
            context_before=found.context_before if found is not None else (),
            context_after=found.context_after if found is not None else (),
            explanation="a contract test failed",
        )
    captures = {k: v for k, v in found.captures.items() if k != "message"}
    captures["test"] = nodeid
    return with_fingerprint(replace(found, stage=stage, captures=captures))
