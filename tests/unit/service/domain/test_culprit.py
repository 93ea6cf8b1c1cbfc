"""Culprit ranking: what implicates a commit, what clears it, and what the answer looks like
when nothing does."""

from __future__ import annotations

from service.domain.culprit import (
    Confidence,
    FailureEvidence,
    demangle_names,
    rank_culprits,
    source_paths_for_include,
    stack_frames,
)
from service.domain.upstream import FileChange, UpstreamCommit
from service.domain.verdict import Category, Stage, Subtype


def _commit(n: int, title: str, *files: FileChange, body: str = "") -> UpstreamCommit:
    sha = f"{n:040x}"
    pr = 110000 + n
    message = f"{title} (#{pr})\n\n{body}\n\nPull Request resolved: https://github.com/pytorch/pytorch/pull/{pr}"
    return UpstreamCommit(sha=sha, message=message, files=files, pr=pr)


def _revert(n: int, target: UpstreamCommit) -> UpstreamCommit:
    inverse = tuple(
        FileChange(f.filename, f.status, f.previous_filename, "\n".join(
            ("-" + x[1:]) if x.startswith("+") else ("+" + x[1:]) if x.startswith("-") else x
            for x in (f.patch or "").split("\n")))
        for f in target.files)
    message = (f'Revert "{target.title}"\n\nThis reverts commit {target.sha}.\n\n'
               f"Reverted https://github.com/pytorch/pytorch/pull/{target.pr} on behalf of "
               f"https://github.com/huydhn due to breaking trunk")
    return UpstreamCommit(sha=f"{n:040x}", message=message, files=inverse, pr=None)


def _patch(*lines: str) -> str:
    return "@@ -10,4 +10,4 @@ struct C10_API Allocator {\n" + "\n".join(lines)


def _filler(n: int) -> UpstreamCommit:
    return _commit(n, "[inductor] Fix a reduction hint", FileChange(
        "torch/_inductor/codegen/triton.py", "modified",
        patch=_patch("-        hint = ReductionHint.INNER", "+        hint = self.hint(node)")))


HEADER_MOVED = FailureEvidence(
    category=Category.UPSTREAM, subtype=Subtype.HEADER_MOVED, stage=Stage.BUILD,
    captures={"header": "ATen/core/CachingHostAllocator.h"},
    line="csrc/Host.cpp:8:10: fatal error: ATen/core/CachingHostAllocator.h: No such file or directory",
)

SYMBOL_REMOVED = FailureEvidence(
    category=Category.UPSTREAM, subtype=Subtype.SYMBOL_REMOVED, stage=Stage.BUILD,
    captures={"symbol": "isBarebonesUnsignedType", "scope": "c10"},
    line="csrc/Empty.cpp:13:13: error: 'isBarebonesUnsignedType' is not a member of 'c10'",
)


def test_moving_the_named_header_beats_editing_a_neighbouring_header() -> None:
    culprit = _commit(2, "[ATen] Move the caching host allocator", FileChange(
        "aten/src/ATen/core/alloc/CachingHostAllocator.h", "renamed",
        previous_filename="aten/src/ATen/core/CachingHostAllocator.h"))
    neighbour = _commit(3, "[ATen] Tidy the CUDA host allocator", FileChange(
        "aten/src/ATen/cuda/CachingHostAllocator.h", "modified",
        patch=_patch("-  // old note", "+  // a note on CachingHostAllocator")))
    ranking = rank_culprits([HEADER_MOVED], [_filler(1), culprit, neighbour, _filler(4)])
    assert ranking.top is not None and ranking.top.sha == culprit.sha
    assert ranking.top.reasons[0].startswith(
        "moves aten/src/ATen/core/CachingHostAllocator.h to aten/src/ATen/core/alloc/")
    assert "the header the compiler could not find" in ranking.top.reasons[0]
    others = {s.sha: s.score for s in ranking.suspects[1:]}
    assert all(score < ranking.top.score for score in others.values())


def test_removing_the_declaration_beats_a_doc_that_mentions_the_symbol() -> None:
    doc = _commit(1, "[docs] Mention isBarebonesUnsignedType", FileChange(
        "docs/source/tensor_attributes.rst", "modified",
        patch=_patch("+See ``isBarebonesUnsignedType`` for the barebones dtypes.")))
    culprit = _commit(2, "[c10] Fold the barebones unsigned check", FileChange(
        "c10/core/ScalarType.h", "modified",
        patch=_patch("-inline bool isBarebonesUnsignedType(ScalarType t) {",
                     "-  return t == ScalarType::UInt16;", "-}")))
    ranking = rank_culprits([SYMBOL_REMOVED], [doc, culprit])
    assert [s.sha for s in ranking.suspects] == [culprit.sha, doc.sha]
    assert "removes a line declaring `isBarebonesUnsignedType`" in ranking.suspects[0].reasons[0]
    assert ranking.suspects[1].score < 0.3


def test_identifiers_match_on_boundaries_only() -> None:
    longer = _commit(1, "[c10] Add isBarebonesUnsignedTypeV2", FileChange(
        "c10/core/ScalarType.h", "modified",
        patch=_patch("-inline bool isBarebonesUnsignedTypeV2(ScalarType t) {")))
    ranking = rank_culprits([SYMBOL_REMOVED], [longer])
    assert ranking.confidence is Confidence.NO_SUSPECT


def test_a_reverted_commit_is_cleared_and_its_reland_is_the_suspect() -> None:
    removal = FileChange("c10/core/ScalarType.h", "modified", patch=_patch(
        "-inline bool isBarebonesUnsignedType(ScalarType t) {", "+inline bool isUnsignedType(ScalarType t) {"))
    first = _commit(2, "[c10] Drop isBarebonesUnsignedType", removal)
    revert = _revert(3, first)
    reland = _commit(5, "[reland] [c10] Drop isBarebonesUnsignedType", removal)
    ranking = rank_culprits([SYMBOL_REMOVED], [_filler(1), first, revert, _filler(4), reland])
    assert [s.sha for s in ranking.suspects] == [reland.sha]
    assert any(r.startswith("relands #110002") for r in ranking.suspects[0].reasons)
    cleared = dict(ranking.cleared)
    assert set(cleared) == {first.sha, revert.sha}


def test_a_revert_without_a_reland_leaves_no_suspect() -> None:
    removal = FileChange("c10/core/ScalarType.h", "modified", patch=_patch(
        "-inline bool isBarebonesUnsignedType(ScalarType t) {"))
    first = _commit(1, "[c10] Drop isBarebonesUnsignedType", removal)
    ranking = rank_culprits([SYMBOL_REMOVED], [first, _revert(2, first)])
    assert ranking.suspects == ()
    assert ranking.confidence is Confidence.NO_SUSPECT


def test_no_evidence_means_no_suspect_not_the_newest_commit() -> None:
    ranking = rank_culprits([SYMBOL_REMOVED], [_filler(i) for i in range(1, 40)])
    assert ranking.suspects == ()
    assert ranking.confidence is Confidence.NO_SUSPECT
    assert ranking.commits_considered == 39


def test_scores_stay_in_unit_range_and_ranking_is_stable() -> None:
    # A commit that matches every clue many times over still scores at most 1.
    noisy = _commit(1, "[c10] Rework everything", *(
        FileChange(f"c10/core/File{i}.h", "modified", patch=_patch(
            "-inline bool isBarebonesUnsignedType(ScalarType t) {",
            "+inline bool isBarebonesUnsignedType(ScalarType t, bool strict) {"))
        for i in range(30)))
    twins = [_commit(n, "[c10] same change", FileChange("c10/core/ScalarType.h", "modified",
                                                         patch=_patch("+  // isBarebonesUnsignedType")))
             for n in (2, 3, 4)]
    commits = [noisy, *twins]
    first = rank_culprits([SYMBOL_REMOVED, SYMBOL_REMOVED], commits)
    again = rank_culprits([SYMBOL_REMOVED, SYMBOL_REMOVED], list(commits))
    assert first == again
    assert all(0.0 < s.score <= 1.0 for s in first.suspects)
    assert first.suspects[0].sha == noisy.sha
    # Equal scores keep range order.
    assert [s.sha for s in first.suspects[1:]] == [c.sha for c in twins]


def test_a_rename_is_recognised_from_the_compilers_suggestion() -> None:
    evidence = FailureEvidence(
        category=Category.UPSTREAM, subtype=Subtype.SYMBOL_RENAMED, stage=Stage.BUILD,
        captures={"symbol": "RegisterPrivateUse1HooksInterface", "scope": "at",
                  "suggestion": "registerPrivateUse1HooksInterface"})
    rename = _commit(1, "[PrivateUse1] camelCase", FileChange(
        "aten/src/ATen/detail/PrivateUse1HooksInterface.h", "modified", patch=_patch(
            "-TORCH_API void RegisterPrivateUse1HooksInterface(",
            "+TORCH_API void registerPrivateUse1HooksInterface(")))
    ranking = rank_culprits([evidence], [rename])
    assert ranking.top is not None
    assert ranking.top.reasons[0].startswith(
        "renames `RegisterPrivateUse1HooksInterface` to `registerPrivateUse1HooksInterface`")
    assert ranking.confidence is Confidence.HIGH


def test_a_new_check_is_found_by_the_message_it_raises() -> None:
    evidence = FailureEvidence(
        category=Category.UPSTREAM, subtype=Subtype.NEW_DTYPE_CHECK, stage=Stage.TEST,
        line="RuntimeError: Unsupported dtype: float64 (Double) dtype is not supported by this device")
    check = _commit(1, "[ATen] empty_generic: refuse float64", FileChange(
        "aten/src/ATen/EmptyTensor.h", "modified", patch=_patch(
            "+  TORCH_CHECK(scalar_type != ScalarType::Double,",
            '+      "Unsupported dtype: float64 (Double) dtype is not supported by this device");')))
    ranking = rank_culprits([evidence], [_filler(2), check])
    assert ranking.top is not None and ranking.top.sha == check.sha


def test_helpers_read_what_the_classifier_captures() -> None:
    assert source_paths_for_include("ATen/core/Tensor.h") == ("aten/src/ATen/core/Tensor.h",)
    assert source_paths_for_include("include/c10/core/Allocator.h") == ("c10/core/Allocator.h",)
    assert demangle_names("_ZN2at26registerHostAllocatorStatsEN3c1010DeviceTypeE") == (
        "at", "registerHostAllocatorStats")
    assert demangle_names("c10::Allocator::copy_data(void*, void const*, unsigned long)") == (
        "c10", "Allocator", "copy_data")
    frames = stack_frames([
        'Current thread 0x1 (most recent call first):',
        '  File "/tmp/x/overlay/torch/utils/backend_registration.py", line 166 in _normalization_device',
        '  File "/tmp/x/overlay/torch/utils/backend_registration.py", line 228 in wrap_tensor_to',
        '  File "/tmp/x/backend/tests/test_misc.py", line 23 in test_generated',
    ])
    # Outermost first, whatever order the traceback printed.
    assert [f.function for f in frames] == ["wrap_tensor_to", "_normalization_device"]


def test_reformatting_a_declaration_is_not_changing_it() -> None:
    evidence = FailureEvidence(
        category=Category.UPSTREAM, subtype=Subtype.SIGNATURE_CHANGED, stage=Stage.BUILD,
        captures={"symbol": "allocate", "class": "openreg::OpenRegAllocator"})
    clang_format = _commit(1, "[BE] clang-format c10/core", FileChange(
        "c10/core/Allocator.h", "modified", patch=_patch(
            "-  virtual  DataPtr allocate(size_t n)  const = 0;",
            "+  virtual DataPtr allocate(size_t n) const = 0;")))
    culprit = _commit(2, "Turn Allocator::allocate into non-const", FileChange(
        "c10/core/Allocator.h", "modified", patch=_patch(
            "-  virtual DataPtr allocate(size_t n) const = 0;",
            "+  virtual DataPtr allocate(size_t n) = 0;")))
    ranking = rank_culprits([evidence], [clang_format, culprit])
    assert [s.sha for s in ranking.suspects] == [culprit.sha, clang_format.sha]
    assert ranking.suspects[0].reasons[0].startswith("changes the declaration of `allocate`")
    assert ranking.suspects[1].score < 0.2


def test_a_commit_explaining_every_failure_outranks_one_explaining_one() -> None:
    header_gone = HEADER_MOVED
    helper_gone = SYMBOL_REMOVED
    both = _commit(1, "[ATen] Move host allocator, drop the barebones helper",
                   FileChange("aten/src/ATen/core/CachingHostAllocator.h", "removed"),
                   FileChange("c10/core/ScalarType.h", "modified", patch=_patch(
                       "-inline bool isBarebonesUnsignedType(ScalarType t) {")))
    one = _commit(2, "[c10] Drop the barebones helper", FileChange(
        "c10/core/ScalarType.h", "modified", patch=_patch(
            "-inline bool isBarebonesUnsignedType(ScalarType t) {")))
    ranking = rank_culprits([header_gone, helper_gone], [one, both])
    assert [s.sha for s in ranking.suspects] == [both.sha, one.sha]
    assert ranking.suspects[0].score > ranking.suspects[1].score


def test_the_ranking_serialises_for_the_cli() -> None:
    culprit = _commit(1, "[c10] Fold the barebones unsigned check", FileChange(
        "c10/core/ScalarType.h", "modified",
        patch=_patch("-inline bool isBarebonesUnsignedType(ScalarType t) {")))
    data = rank_culprits([SYMBOL_REMOVED], [culprit]).to_dict()
    assert data["confidence"] == "high"
    assert data["suspects"] == [{
        "sha": culprit.sha, "pr": 110001, "title": "[c10] Fold the barebones unsigned check",
        "score": data["suspects"][0]["score"],  # type: ignore[index]
        "reasons": ["removes a line declaring `isBarebonesUnsignedType` (symbol) in "
                    "c10/core/ScalarType.h"],
    }]


def test_the_same_pr_merged_again_after_its_revert_is_the_suspect() -> None:
    removal = FileChange("c10/core/ScalarType.h", "modified", patch=_patch(
        "-inline bool isBarebonesUnsignedType(ScalarType t) {"))
    first = _commit(1, "[c10] Drop isBarebonesUnsignedType", removal)
    # pytorchmergebot's revert names the PR; the re-merge lands the same PR again.
    revert = UpstreamCommit(
        sha=f"{2:040x}", pr=None,
        message=('Revert "[c10] Drop isBarebonesUnsignedType (#110001)"\n\n'
                 "Reverted https://github.com/pytorch/pytorch/pull/110001 on behalf of "
                 "https://github.com/huydhn due to breaking trunk"))
    again = UpstreamCommit(sha=f"{3:040x}", message=first.message, files=first.files, pr=first.pr)
    ranking = rank_culprits([SYMBOL_REMOVED], [first, revert, again])
    assert [s.sha for s in ranking.suspects] == [again.sha]
    assert ranking.suspects[0].reasons[-1] == "relands #110001 after its revert"
