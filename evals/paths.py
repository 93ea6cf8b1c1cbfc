"""Where the evaluators' data lives: the defaults of their ``--logs`` / ``--cases`` options."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
# Golden logs of live mutant runs, one <mutant>.log each (evals.classifier.golden).
MUTANT_LOGS = DATA / "mutants"
# The culprit corpus: <case>.json regression ranges written by make_cases.py there.
CULPRIT_CASES = DATA / "culprit"
# The directory that holds the ``evals`` package: a child interpreter needs it on its path.
ROOT = DATA.parents[1]
