"""Verification on the culprit corpus: every mutant-backed culprit, its hunks exact, is
confirmed by undoing it in an overlay of the mutant torch; no decoy ever is."""

from __future__ import annotations

import pytest

from evals.culprit_verify import evaluate, source_path
from evals.paths import CULPRIT_CASES
from service.domain.verification import VerifyState, installed_path


@pytest.mark.parametrize("source", ["c10/core/Allocator.h", "aten/src/ATen/detail/CUDAHooksInterface.h",
                                    "torch/csrc/api/include/torch/types.h", "torch/random.py"])
def test_source_path_inverts_installed_path(source: str) -> None:
    installed = installed_path(source)
    assert installed is not None and source_path(installed) == source


@pytest.mark.slow  # 15 overlays of the installed torch (hard links): ~50 s
def test_every_mutant_culprit_is_confirmed_and_no_decoy_is() -> None:
    report = evaluate(CULPRIT_CASES.glob("*.json"))
    culprits = [a for a in report.answers if a.culprit]
    assert len(culprits) == 15  # the cases that name a mutant
    assert all(a.state is VerifyState.CONFIRMED for a in culprits), report.render()
    decoys = [a for a in report.answers if not a.culprit]
    assert decoys and not any(a.state is VerifyState.CONFIRMED for a in decoys), report.render()
