"""The rules engine on crafted inputs: choice of the decisive line, rule data, bad input."""

from __future__ import annotations

import time

import pytest

from service.domain.classify import RuleError, classify_log, default_rules, parse_rules
from service.domain.verdict import Category, Stage, Subtype

OVERRIDE = (
    "/src/csrc/OpenRegHooks.cpp:10:8: error: 'bool openreg::OpenRegHooks::"
    "hasPrimaryContext(int) const' marked 'override', but does not override"
)
REMOVED = "/src/csrc/Other.cpp:3:9: error: 'getFoo' is not a member of 'c10'"


def test_empty_and_clean_logs_have_no_finding() -> None:
    assert classify_log("", Stage.BUILD) is None
    assert classify_log(b"", Stage.BUILD) is None
    clean = "[1/2] Building CXX object a.o\n[2/2] Linking CXX shared library libx.so\n"
    assert classify_log(clean, Stage.BUILD) is None


def test_binary_junk_is_decoded_not_fatal() -> None:
    junk = bytes(range(256)) * 2000 + b"\n" + OVERRIDE.encode() + b"\n\xff\xfe\x00"
    finding = classify_log(junk, Stage.BUILD)
    assert finding is not None and finding.subtype is Subtype.SIGNATURE_CHANGED
    assert finding.captures["symbol"] == "hasPrimaryContext"


def test_first_error_of_first_unit_wins_over_later_errors_and_noise() -> None:
    log = "\n".join([
        "[1/3] Building CXX object a.o",
        "/src/a.cpp:1:1: warning: unused variable 'x' [-Wunused-variable]",
        "FAILED: CMakeFiles/t.dir/csrc/OpenRegHooks.cpp.o",
        OVERRIDE,
        REMOVED,
        "FAILED: CMakeFiles/t.dir/csrc/Other.cpp.o",
        "ninja: build stopped: subcommand failed.",
    ])
    finding = classify_log(log, Stage.BUILD)
    assert finding is not None
    assert (finding.rule, finding.line_number) == ("cxx-override-mismatch", 4)
    assert finding.context_before[-1].startswith("FAILED:")
    assert finding.context_after[0] == REMOVED


def test_generic_lines_only_when_nothing_specific() -> None:
    noise = "FAILED: x.o\nninja: build stopped: subcommand failed.\n"
    only_generic = classify_log(noise, Stage.BUILD)
    assert only_generic is not None and only_generic.subtype is Subtype.GENERIC
    # The highest-priority fallback wins even when a lower one comes first.
    assert only_generic.rule == "ninja-failed"
    specific = classify_log(noise + OVERRIDE + "\n", Stage.BUILD)
    assert specific is not None and specific.rule == "cxx-override-mismatch"


def test_dominant_line_beats_an_earlier_error() -> None:
    log = OVERRIDE + "\n" + "x\n" * 1000 + "cp: error writing 'f': No space left on device\n"
    finding = classify_log(log, Stage.BUILD)
    assert finding is not None
    assert (finding.category, finding.subtype) == (Category.INFRA, Subtype.DISK)
    assert finding.line_number == 1002


def test_requires_sends_non_torch_symbols_to_the_next_rule() -> None:
    mine = "/src/a.cpp:3:9: error: 'orMalloc' is not a member of 'openreg'"
    finding = classify_log(mine, Stage.BUILD)
    assert finding is not None and finding.rule == "cxx-error"
    torch = classify_log(REMOVED, Stage.BUILD)
    assert torch is not None and torch.rule == "cxx-not-member-removed"
    assert torch.captures == {"symbol": "getFoo", "scope": "c10"}


def test_follow_probe_names_the_new_pure_virtual() -> None:
    log = "\n".join([
        "a.cpp:6:16: error: cannot declare variable 'g' to be of abstract type 'Alloc'",
        "a.cpp:3:8: note:   because the following virtual functions are pure within 'Alloc':",
        "In file included from a.cpp:1:",
        "/x/torch/include/c10/core/Allocator.h:226:16: note: \t'virtual void "
        "c10::Allocator::copy_data(void*, const void*, std::size_t) const'",
    ])
    finding = classify_log(log, Stage.BUILD)
    assert finding is not None and finding.subtype is Subtype.NEW_PURE_VIRTUAL
    assert finding.captures["class"] == "Alloc"
    assert finding.captures["symbol"] == "c10::Allocator::copy_data"


def test_stage_limits_the_rules() -> None:
    line = "FAILED tests/test_memory.py::test_alloc - assert 1 == 2"
    assert classify_log(line, Stage.BUILD) is None
    finding = classify_log(line, Stage.TEST)
    assert finding is not None and finding.captures["test"] == "tests/test_memory.py::test_alloc"


def test_overlong_lines_are_capped() -> None:
    line = "x" * 5_000_000 + " " + OVERRIDE[OVERRIDE.index("error:"):] + " " + "y" * 5_000_000
    finding = classify_log(line, Stage.BUILD)
    assert finding is not None and finding.rule == "cxx-override-mismatch"
    assert len(finding.line) < 3000


def test_100_mb_log_is_classified_in_bounded_time() -> None:
    chunk = ("[12/340] Building CXX object CMakeFiles/torch_openreg.dir/csrc/aten/Op.cpp.o\n"
             "/usr/bin/c++ -DUSE_C10D -isystem /x/torch/include -O3 -Werror=return-type -c x\n")
    body = chunk * (100_000_000 // len(chunk))
    log = body + OVERRIDE + "\nninja: build stopped: subcommand failed.\n"
    started = time.perf_counter()
    finding = classify_log(log, Stage.BUILD)
    elapsed = time.perf_counter() - started
    assert finding is not None and finding.rule == "cxx-override-mismatch"
    assert finding.line_number == body.count("\n") + 1
    assert elapsed < 30, f"{elapsed:.1f}s for 100 MB"


def test_ansi_colours_are_stripped_from_evidence() -> None:
    coloured = ("\x1b[01m\x1b[Ka.cpp:3:9:\x1b[m\x1b[K \x1b[01;31m\x1b[Kerror: \x1b[m\x1b[K"
                "‘\x1b[01m\x1b[KgetFoo\x1b[m\x1b[K’ is not a member of ‘\x1b[01m\x1b[Kc10"
                "\x1b[m\x1b[K’")
    finding = classify_log(coloured, Stage.BUILD)
    assert finding is not None
    assert finding.line == "a.cpp:3:9: error: ‘getFoo’ is not a member of ‘c10’"
    assert finding.captures["symbol"] == "getFoo"


def test_packaged_rules_are_valid_and_ordered() -> None:
    rules = default_rules().rules
    names = [r.name for r in rules]
    assert len(names) == len(set(names))
    # Every fallback comes after every normal rule, or a generic rule could shadow one.
    weights = [r.weight.value for r in rules]
    first_fallback = weights.index("fallback")
    assert "normal" not in weights[first_fallback:]


RULE = ("[[rule]]\nname='a'\ncategory='upstream'\nsubtype='{subtype}'\nstages=['build']\n"
        "triggers=['{trigger}']\npatterns=['{pattern}']\nexplain='x'\n{extra}")
SCAN = "[scan]\nanchors = ['e']\n"


def _rule(subtype: str = "crash", trigger: str = "e", pattern: str = "e", extra: str = "") -> str:
    return RULE.format(subtype=subtype, trigger=trigger, pattern=pattern, extra=extra)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("x = 1", "no [[rule]]"),
        (_rule(), "needs [scan] anchors"),
        (SCAN + _rule(trigger="boom"), "none of the [scan] anchors"),
        (SCAN + _rule(subtype="nope"), "subtype='nope'"),
        (SCAN + _rule(pattern="("), "not a valid regex"),
        (SCAN + _rule(pattern="(?P<s>e)", extra="requires={t='x'}"), "not a pattern group"),
        (SCAN + _rule(extra="colour='red'"), "unknown field"),
        (SCAN + _rule() + _rule(), "defined twice"),
        (SCAN + _rule(extra="sets={standard=20}"), "sets must be a table"),
    ],
)
def test_malformed_rules_are_refused_with_a_reason(toml: str, message: str) -> None:
    with pytest.raises(RuleError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_rules(toml)


def test_a_changed_rule_set_changes_the_verdict() -> None:
    rules = parse_rules(
        "[scan]\nanchors = ['is not']\n"
        "[[rule]]\nname='openreg-api'\ncategory='backend'\nsubtype='symbol-removed'\n"
        "stages=['build']\ntriggers=['is not a member of']\n"
        "patterns=['''[‘'](?P<symbol>\\w+)[’'] is not a member of [‘']openreg[’']''']\n"
        "explain='the backend broke its own API'\n"
    )
    log = "/src/a.cpp:3:9: error: 'orMalloc' is not a member of 'openreg'"
    finding = classify_log(log, Stage.BUILD, rules=rules)
    assert finding is not None
    assert (finding.rule, finding.category, finding.captures["symbol"]) == (
        "openreg-api", Category.BACKEND, "orMalloc")


def test_rules_digest_changes_with_the_rules() -> None:
    base = SCAN + _rule()
    assert parse_rules(base).digest == parse_rules(base).digest
    assert parse_rules(base).digest != parse_rules(base + "\n# edited\n").digest
    assert len(default_rules().digest) == 16


def test_classes_in_anonymous_namespaces_are_named() -> None:
    # The reference backend defines its hooks in an anonymous namespace; gcc spells it so.
    line = ("/b/csrc/runtime/OpenRegHooks.cpp:27:8: error: ‘bool openreg::{anonymous}::"
            "OpenRegHooks::hasPrimaryContext(c10::DeviceIndex) const’ marked ‘override’, but "
            "does not override")
    finding = classify_log(line, Stage.BUILD)
    assert finding is not None and finding.rule == "cxx-override-mismatch"
    assert finding.captures["class"] == "openreg::{anonymous}::OpenRegHooks"
    assert finding.captures["symbol"] == "hasPrimaryContext"


def test_sets_adds_a_constant_capture_the_log_does_not_override() -> None:
    rules = parse_rules(SCAN + _rule(pattern="(?:n=(?P<standard>[^ ]+) )?e", extra="sets={standard='C++20'}"))
    bare = classify_log("e", Stage.BUILD, rules=rules)
    named = classify_log("n=C++23 e", Stage.BUILD, rules=rules)
    assert bare is not None and bare.captures["standard"] == "C++20"
    assert named is not None and named.captures["standard"] == "C++23"
