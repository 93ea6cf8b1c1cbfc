"""Runs that are experiments about a breakage, not observations of a target.

A bisection probe runs the backend on a nightly inside a breakage's range; a culprit
verification runs it on the red torch with a suspect's change undone. Each repeats only
the red run's failing tests and is read by its own job (``workers/jobs/bisect.py``,
``workers/jobs/verify.py``). Neither is a matrix target, an occurrence of a breakage, a
fix of one, or the history a later run's triage compares with: a partial suite on a night
nobody tracks (or on a made-up torch) must not be "the last run where it passed".
"""

from __future__ import annotations

from service.domain.bisect import TRIGGER as BISECT
from service.domain.verification import TRIGGER as VERIFY

EXPERIMENTS = frozenset({BISECT, VERIFY})
