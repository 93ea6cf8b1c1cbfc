"""Undoing a suspect's change: where the wheel installs each file, reverse-applying
GitHub's hunks to the red torch's copy, the plan per suspect and what a run says."""

from __future__ import annotations

import pytest

from service.domain.upstream import FileChange
from service.domain.verification import (
    How,
    RestoreError,
    Verification,
    VerifyState,
    apply_to_suspects,
    installed_path,
    outcome,
    plan_undo,
    reverse_apply,
    to_verify,
    unified_patch,
)

BASE = "\n".join(["#pragma once", "namespace c10 {", "struct Allocator {",
                  "  virtual ~Allocator() = default;", "",
                  "  virtual DataPtr allocate(size_t n) = 0;", "",
                  "  // Clones an allocation.", "};", "}  // namespace c10", ""])
HEAD = BASE.replace("allocate(size_t n) = 0;", "allocate(size_t n) const = 0;")


@pytest.mark.parametrize(("source", "installed"), [
    ("c10/core/Allocator.h", "torch/include/c10/core/Allocator.h"),
    ("aten/src/ATen/detail/PrivateUse1HooksInterface.h",
     "torch/include/ATen/detail/PrivateUse1HooksInterface.h"),
    ("torch/csrc/distributed/c10d/TraceUtils.h", "torch/include/torch/csrc/distributed/c10d/TraceUtils.h"),
    ("torch/utils/backend_registration.py", "torch/utils/backend_registration.py"),
    ("c10/core/CPUAllocator.cpp", None),
    ("aten/src/ATen/native/TypeProperties.cpp", None),
    ("torch/csrc/utils/tensor_dtypes.cpp", None),
    ("CMakeLists.txt", None),
    ("test/test_torch.py", None),
])
def test_installed_path_maps_headers_and_python_and_nothing_compiled(source: str, installed: str | None) -> None:
    assert installed_path(source) == installed


def test_reverse_apply_restores_the_base_exactly_even_when_lines_drifted() -> None:
    patch = unified_patch(BASE, HEAD)
    assert reverse_apply(HEAD, patch) == BASE
    # The red torch has 3 more lines above the hunk than the PR's head had.
    drifted = "// a\n// b\n// c\n" + HEAD
    assert reverse_apply(drifted, patch) == "// a\n// b\n// c\n" + BASE


def test_reverse_apply_of_a_patch_whose_change_is_not_there_raises_and_says_which_hunk() -> None:
    patch = unified_patch(BASE, HEAD)
    with pytest.raises(RestoreError, match="hunk 1 .* does not reverse-apply"):
        reverse_apply(BASE, patch)  # the file never had the change
    with pytest.raises(RestoreError, match="not a unified diff"):
        reverse_apply(HEAD, "@@ -1,2 +1,2 @@\n?garbage")
    with pytest.raises(RestoreError, match="no hunk"):
        reverse_apply(HEAD, "")


def test_reverse_apply_handles_several_hunks_and_a_missing_final_newline() -> None:
    before = "\n".join(f"line {i}" for i in range(40))
    after = before.replace("line 3\n", "line three\n").replace("line 30", "line thirty\nextra")
    assert reverse_apply(after, unified_patch(before, after) + "\n\\ No newline at end of file") == before


def test_plan_undo_sorts_installed_files_from_compiled_ones() -> None:
    plan = plan_undo([
        FileChange("c10/core/Allocator.h", "modified", patch="@@ -1 +1 @@\n-a\n+b"),
        FileChange("c10/core/CPUAllocator.cpp", "modified", patch="@@ -1 +1 @@\n-a\n+b"),
        FileChange("c10/util/Float8_new.h", "added", patch="@@ -0,0 +1 @@\n+x"),
        FileChange("torch/random.py", "modified", patch=None),  # truncated: GitHub omits it
        FileChange("aten/src/ATen/core/alloc/CachingHostAllocator.h", "renamed",
                   previous_filename="aten/src/ATen/core/CachingHostAllocator.h"),
    ])
    assert plan.verifiable and plan.compiled == ("c10/core/CPUAllocator.cpp",)
    assert [(r.installed, r.how) for r in plan.restores] == [
        ("torch/include/c10/core/Allocator.h", How.PATCH),
        ("torch/include/c10/util/Float8_new.h", How.DELETE),
        ("torch/random.py", How.CONTENTS),
        ("torch/include/ATen/core/alloc/CachingHostAllocator.h", How.DELETE),
        ("torch/include/ATen/core/CachingHostAllocator.h", How.CONTENTS),
    ]
    assert plan.restores[-1].base_source == "aten/src/ATen/core/CachingHostAllocator.h"


def test_a_patch_showing_fewer_lines_than_github_counts_is_truncated_and_taken_whole() -> None:
    cut = FileChange("c10/core/ScalarType.h", "modified", patch="@@ -1 +1 @@\n-a\n+b",
                     additions=400, deletions=12)
    whole = FileChange("c10/core/ScalarType.h", "modified", patch="@@ -1 +1 @@\n-a\n+b",
                       additions=1, deletions=1)
    assert [r.how for r in plan_undo([cut]).restores] == [How.CONTENTS]
    assert [r.how for r in plan_undo([whole]).restores] == [How.PATCH]


def test_a_compiled_only_change_is_not_verifiable_and_says_so() -> None:
    plan = plan_undo([FileChange("aten/src/ATen/native/TypeProperties.cpp", "modified", patch="@@")])
    assert not plan.verifiable
    assert "compiled code only (aten/src/ATen/native/TypeProperties.cpp)" in plan.why_not


def test_to_verify_takes_the_top_suspects_with_installed_files_only() -> None:
    suspects = [{"sha": s} for s in "abcde"]
    header = plan_undo([FileChange("c10/core/Allocator.h", "modified", patch="@@ -1 +1 @@\n-a\n+b")])
    compiled = plan_undo([FileChange("c10/core/CPUAllocator.cpp", "modified", patch="@@")])
    plans = {"a": compiled, "b": header, "c": header, "d": compiled, "e": header}
    assert to_verify(suspects, plans, top=2) == ["b", "c"]
    assert to_verify(suspects, plans, top=3) == ["b", "c", "e"]


def test_outcome_reads_the_run_on_the_undone_torch() -> None:
    common = dict(failing=["tests/test_x.py::test_y"], files=["c10/core/Allocator.h"], backend="vendor")
    state, why = outcome(run_state="passed", verdict="compatible", error_kind=None, error=None,
                         provisioned=True, **common)  # type: ignore[arg-type]
    assert state is VerifyState.CONFIRMED
    assert why == ("undoing this PR's changes to c10/core/Allocator.h makes vendor build and "
                   "pass tests/test_x.py::test_y")
    state, why = outcome(run_state="failed", verdict="upstream", error_kind=None,
                         error="build failed", provisioned=True, **common)  # type: ignore[arg-type]
    assert state is VerifyState.REFUTED and "still fails" in why
    # The same red run, but the suspect also changed libtorch: that part was not undone.
    state, why = outcome(run_state="failed", verdict="upstream", error_kind=None,
                         error="build failed", provisioned=True, compiled=["c10/core/Allocator.cpp"],
                         **common)  # type: ignore[arg-type]
    assert state is VerifyState.UNVERIFIABLE
    assert "its change to compiled code (c10/core/Allocator.cpp) cannot be undone" in why
    state, why = outcome(run_state="failed", verdict="upstream", error_kind="upstream",
                         error="torch does not import: SyntaxError", provisioned=False, **common)  # type: ignore[arg-type]
    assert state is VerifyState.ERROR and "did not import: torch does not import" in why
    state, why = outcome(run_state="cancelled", verdict=None, error_kind=None, error="cancelled",
                         provisioned=True, **common)  # type: ignore[arg-type]
    assert state is VerifyState.ERROR and "ended cancelled" in why
    state, _ = outcome(run_state="failed", verdict="infra", error_kind="infra", error="disk full",
                       provisioned=True, **common)  # type: ignore[arg-type]
    assert state is VerifyState.ERROR


def test_a_confirmed_suspect_outranks_every_score() -> None:
    suspects = [{"sha": "a", "score": 0.9}, {"sha": "b", "score": 0.4}, {"sha": "c", "score": 0.3}]
    ranked = apply_to_suspects(suspects, {
        "a": Verification("a", 1, VerifyState.REFUTED, "still fails", run_id=5),
        "b": Verification("b", 2, VerifyState.CONFIRMED, "undoing ...", run_id=6),
    })
    assert [s["sha"] for s in ranked] == ["b", "a", "c"]
    assert ranked[0]["verification"] == {"state": "confirmed", "run_id": 6, "evidence": "undoing ...",
                                         "files": []}
    assert "verification" not in ranked[2]
    # Without a confirmation the scorer's order stands.
    assert [s["sha"] for s in apply_to_suspects(suspects, {})] == ["a", "b", "c"]
