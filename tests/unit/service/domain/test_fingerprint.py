"""Fingerprints group the same break across nights, torch builds and machines, and only it."""

from __future__ import annotations

import re
import sys

import pytest

from service.domain.classify import classify_log, classify_test_failure
from service.domain.fingerprint import FINGERPRINT_VERSION, fingerprint, mask, signature
from service.domain.verdict import Category, Finding, Stage, Subtype
from tests.support.paths import FIXTURES

sys.path.insert(0, str(FIXTURES / "logs"))
import golden_logs as golden  # noqa: E402

GOLDENS = golden.all_goldens()


def _elsewhere(log: str) -> str:
    """The same failure as another machine on another night would print it: other venv and
    temp dirs, another torch build (version, header line numbers), other pids/addresses,
    more output before it."""
    log = log.replace("/work/main/.venv", "/home/ci/.cache/ootci/envs/9c1f0e2a7b/venv")
    log = re.sub(r"/tmp/ootci-fixture-([\w]+?)-[a-z0-9_]{8}\b",
                 r"/var/tmp/runner-17/job-88213/ootci-fixture-\1-q1w2e3r4", log)
    log = log.replace("2.13.0+cpu", "2.14.0.dev20251101+cu128")
    log = re.sub(r":(\d+):(\d+):", lambda m: f":{int(m[1]) + 7}:{int(m[2]) + 1}:", log)
    log = re.sub(r"0x[0-9a-f]{8,16}", "0x00007fd3c0ffee00", log)
    log = re.sub(r"line (\d+): (\d+) Killed", r"line \1: 99121 Killed", log)
    return "-- nightly 2026-11-27 on worker-b\n" * 40 + log


@pytest.mark.parametrize("case", GOLDENS, ids=[g.name for g in GOLDENS])
def test_same_break_elsewhere_has_the_same_fingerprint(case: golden.Golden) -> None:
    stage = Stage(case.expect["stage"])
    here = classify_log(case.body, stage)
    there = classify_log(_elsewhere(case.body), stage)
    assert here is not None and there is not None
    assert there.rule == here.rule
    assert there.fingerprint == here.fingerprint, (
        signature(here.rule, here.captures, here.line),
        signature(there.rule, there.captures, there.line),
    )


def test_fingerprints_of_the_corpus_are_distinct() -> None:
    seen: dict[str, str] = {}
    # These pairs are the same break on purpose: plain vs coloured diagnostics, UTF-8 vs C
    # locale quotes, one TU vs two failing TUs with the same first error, the same missing
    # symbol found by `import` vs by ctypes.
    same = {"build_no_matching_call_colour": "build_no_matching_call",
            "build_c_locale_pure_virtual": "build_new_pure_virtual",
            "build_two_failing_units": "build_override_deviceindex",
            "import_ctypes_undefined_symbol": "import_undefined_symbol"}
    for case in GOLDENS:
        finding = classify_log(case.body, Stage(case.expect["stage"]))
        assert finding is not None
        if case.name in same:
            continue
        assert finding.fingerprint not in seen, (case.name, seen.get(finding.fingerprint))
        seen[finding.fingerprint] = case.name
    by_name = {v: k for k, v in seen.items()}
    for twin, original in same.items():
        case = next(g for g in GOLDENS if g.name == twin)
        finding = classify_log(case.body, Stage(case.expect["stage"]))
        assert finding is not None and finding.fingerprint == by_name[original], twin


def test_a_different_symbol_is_a_different_break() -> None:
    line = "/src/a.cpp:7:29: error: ‘{}’ is not a member of ‘at’"
    one = classify_log(line.format("registerPrivateUse1Backend"), Stage.BUILD)
    two = classify_log(line.format("registerPrivateUse1Backend2"), Stage.BUILD)
    assert one is not None and two is not None
    assert one.rule == two.rule and one.fingerprint != two.fingerprint


def test_tests_group_by_node_id_not_by_values() -> None:
    a = classify_test_failure("tests/test_memory.py::test_stats", "assert 4096 == 8192", None)
    b = classify_test_failure("tests/test_memory.py::test_stats", "assert 512 == 1024", None)
    c = classify_test_failure("tests/test_memory.py::test_reset", "assert 4096 == 8192", None)
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_signature_is_versioned_and_ignores_locations() -> None:
    sig = signature("r", {"symbol": "x", "file": "/a/b.cpp", "library": "/x/_C.so"}, "")
    assert sig == f"v{FINGERPRINT_VERSION}\nr\nsymbol=x"
    finding = classify_log("/src/a.cpp:1:2: error: ‘f’ is not a member of ‘c10’", Stage.BUILD)
    assert finding is not None
    assert fingerprint(finding) == finding.fingerprint
    assert finding.fingerprint_version == FINGERPRINT_VERSION
    assert re.fullmatch(r"[0-9a-f]{32}", finding.fingerprint)


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        ("/home/u/venv/lib/python3.11/site-packages/torch/include/c10/core/Allocator.h:226:16:",
         "<torch>/include/c10/core/Allocator.h:<n>:<n>:"),
        ("/opt/conda/lib/python3.12/site-packages/numpy/core/x.py",
         "<site>/numpy/core/x.py"),
        ("/tmp/pytest-of-ci/pytest-7/test_a0/build/OpenRegHooks.cpp:10:8: error",
         "<path>/OpenRegHooks.cpp:<n>:<n>: error"),
        ("Current thread 0x00007f6c65a84b80", "Current thread <hex>"),
        ("torch 2.14.0.dev20251101+cu128 (git 4c1e2d3f9a)", "torch <ver> (git <sha>)"),
        ("line 6: 23254 Killed", "line <n>: <n> Killed"),
        ("c10::Float8_e4m3fn and int64_t", "c10::Float8_e4m3fn and int64_t"),
    ],
)
def test_mask(raw: str, masked: str) -> None:
    assert mask(raw) == masked


def test_captures_keep_digits_that_matter() -> None:
    cxx17 = signature("toolchain-cxx-standard", {"standard": "C++17"}, "")
    cxx20 = signature("toolchain-cxx-standard", {"standard": "C++20"}, "")
    assert cxx17 != cxx20


def test_a_named_break_groups_across_tests_and_parametrisations() -> None:
    """One op missing for Autocast in five tests is one breakage, not five."""
    def finding(test: str, **captures: str) -> Finding:
        return Finding(
            category=Category.UPSTREAM, subtype=Subtype.TEST_REGRESSION, rule="r",
            stage=Stage.TEST, line="Could not run 'aten::matmul' for Autocast", line_number=0,
            captures={"test": test, **captures},
        )

    op = {"op": "aten::matmul"}
    assert fingerprint(finding("t.py::test_a[dtype0]", **op)) == fingerprint(finding("t.py::test_b", **op))
    assert fingerprint(finding("t.py::test_a", **op)) != fingerprint(
        finding("t.py::test_a", op="aten::mm")
    )
    # With nothing but the test to go on, the test is the break; its parametrisations group.
    assert fingerprint(finding("t.py::test_a[dtype0]")) == fingerprint(finding("t.py::test_a[dtype1]"))
    assert fingerprint(finding("t.py::test_a")) != fingerprint(finding("t.py::test_b"))
