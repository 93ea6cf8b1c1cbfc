"""The PR comment as the drain posts it (``reporter.pr_body`` over real rows): it links the
PR's ootci page only under OOTCI_PUBLIC_URL, and a red run's quarantined failures are listed
apart, never as the breakage nor as its decisive line."""

from __future__ import annotations

from sqlalchemy import Engine

from service.db import session_scope
from service.github.reporter import ReportSettings, pr_body, pr_reports
from service.models import Failure
from tests.support.factories import make_backend, make_breakage, make_run

PR = 165
REAL = "error: 'allocate' marked 'override', but does not override"
FLAKY = "tests/test_ops.py::test_flip"


def _cfg(public_url: str) -> ReportSettings:
    return ReportSettings(repo="pytorch/pytorch", label="x", min_score=0.5, public_url=public_url,
                          unlabel_on_fix=False, can_write=False)


def _breakage_with_a_quarantined_failure(engine: Engine) -> int:
    with session_scope(engine) as s:
        backend = make_backend(s, "acme")
        red = make_run(s, backend, git="c" * 40, state="failed", verdict="upstream")
        breakage = make_breakage(s, backend, red, culprits=[
            {"sha": "9" * 40, "pr": PR, "title": "Refactor", "score": 0.9, "reasons": ["edits it"]}])
        s.add_all([
            Failure(run_id=red.id, step_name="build", stage="build", line=REAL,
                    triage="upstream", breakage_id=breakage.id),
            # Written after the real one: the newest failure, but quarantined.
            Failure(run_id=red.id, step_name="test", stage="test", nodeid=FLAKY,
                    line="AssertionError: flip at /var/lib/ootci/work/run-9/x.py", triage="flake",
                    quarantined=True, breakage_id=breakage.id),
        ])
        return red.id


def test_the_comment_links_the_pr_page_and_lists_quarantined_failures_apart(engine: Engine) -> None:
    red_id = _breakage_with_a_quarantined_failure(engine)
    cfg = _cfg("https://ootci.example.org")
    with session_scope(engine) as s:
        body = pr_body(s, PR, pr_reports(s, PR, cfg), cfg)
    breaks, _, quarantined = body.partition("### Quarantined as flaky, not counted")
    assert f"[ootci PR #{PR}](https://ootci.example.org/prs/{PR})" in breaks
    assert REAL in breaks and FLAKY not in breaks and "flip" not in breaks
    assert f"`acme` [run {red_id}](https://ootci.example.org/runs/{red_id}): `{FLAKY}`" in quarantined


def test_without_a_public_url_the_comment_has_no_link_at_all(engine: Engine) -> None:
    red_id = _breakage_with_a_quarantined_failure(engine)
    cfg = _cfg("")
    with session_scope(engine) as s:
        body = pr_body(s, PR, pr_reports(s, PR, cfg), cfg)
    assert "/prs/" not in body and "http" not in body
    assert f"`acme` run {red_id}: `{FLAKY}`" in body
