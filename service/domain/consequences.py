"""Consequences: failures that only repeat an earlier failure's cause, folded into it.

When ``import torch`` (or the backend's import, through autoload or a test module) raises
in a pytest process, torch is left half-imported: every later test module that imports it
fails again, but with the *second* import's symptom — "Only a single TORCH_LIBRARY can be
used to register the namespace triton", "partially initialized module 'torch'" — and the
process then dies at exit. Seen on a real flat-layout backend: one ModuleNotFoundError,
then eleven such collection errors and a ``<session exit>`` crash, 13 findings and 12
breakages, 11 of them blamed on upstream. They are one cause.

``fold(failures)`` takes the step's failures in the order they happened and returns, for
each one that is a consequence, the index of the failure it follows from: the first import
failure of the step. Only collection errors that carry a re-import symptom, or the same
fingerprint as that first failure, and a crash at session exit after it, are folded;
anything else stands on its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from service.domain.nodeids import IMPORT_NODEID, SESSION_EXIT_NODEID

# What importing torch again says after its first import raised half-way.
REIMPORT_SYMPTOMS = re.compile(
    r"Only a single TORCH_LIBRARY can be used to register the namespace"
    r"|partially initialized module '?torch"
    r"|already has a docstring"
    r"|Tried to register an operator .* multiple times"
    r"|registered twice"
    r"|duplicate registration",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class StepFailure:
    """What folding needs of one failure."""

    nodeid: str | None
    stage: str  # service.domain.verdict.Stage value
    message: str
    fingerprint: str | None = None

    @property
    def is_collection_error(self) -> bool:
        return self.stage == "import" and self.nodeid is not None and "::" not in self.nodeid


def _is_root(failure: StepFailure) -> bool:
    return failure.nodeid == IMPORT_NODEID or (
        failure.is_collection_error and not REIMPORT_SYMPTOMS.search(failure.message or "")
    )


def fold(failures: Sequence[StepFailure]) -> dict[int, int]:
    """``{index of a consequence: index of its cause}``; empty when nothing folds."""
    root: int | None = None
    folded: dict[int, int] = {}
    for i, failure in enumerate(failures):
        if root is None:
            if _is_root(failure):
                root = i
            continue
        cause = failures[root]
        same = failure.fingerprint is not None and failure.fingerprint == cause.fingerprint
        repeats = failure.is_collection_error and (
            same or REIMPORT_SYMPTOMS.search(failure.message or "") is not None)
        if repeats or failure.nodeid == SESSION_EXIT_NODEID:
            folded[i] = root
    return folded
