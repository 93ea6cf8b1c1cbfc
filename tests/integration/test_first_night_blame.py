"""Issue #27's acceptance on real torch headers: a header mutant of the corpus (an upstream
change imitated on the installed torch, with a version of its own) breaks a vendor's build
on a fresh home with no history at all, and the run blames upstream, with the corpus's
subtype, through its isolate step on the unpatched pin (``python -m evals.blame`` runs the
whole set)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.blame import run_case
from evals.mutants.catalogue import get

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.parametrize("name", ["allocate-const", "cxx23-required"])
def test_a_first_night_header_break_is_upstream_through_isolation(name: str, tmp_path: Path) -> None:
    case = run_case(get(name), tmp_path)
    assert case.isolated, case
    assert case.verdict == case.expected, case
    assert case.reason.startswith("isolated: backend "), case.reason
    assert "pin 'installed'): it builds there, so only torch's change breaks it" in case.reason
