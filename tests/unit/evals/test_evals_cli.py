"""`python -m evals` as a user meets it: the culprit corpus score."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import evals


def test_corpus_meets_the_accuracy_bar_and_lists_every_case(tmp_path: Path) -> None:
    proc = evals(tmp_path, "culprit", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["top1"] >= 0.8 and doc["top3"] == 1.0
    assert len(doc["cases"]) >= 12
