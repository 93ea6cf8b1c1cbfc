"""Findings and verdicts survive the JSON round trip the database puts them through."""

from __future__ import annotations

import json

import pytest

from service.domain.classify import classify_log
from service.domain.verdict import Category, Finding, Stage, Subtype, TriageVerdict


def test_finding_json_round_trip() -> None:
    log = ("[1/2] Building CXX object a.o\n"
           "/src/a.cpp:6:16: error: cannot declare variable 'g' to be of abstract type 'A'\n"
           "/src/a.cpp:3:8: note:   because the following virtual functions are pure within "
           "'A':\n"
           "/t/c10/core/Allocator.h:226:16: note: \t'virtual void c10::Allocator::copy_data"
           "(void*, const void*, std::size_t) const'\n")
    finding = classify_log(log, Stage.BUILD)
    assert finding is not None
    stored = json.loads(json.dumps(finding.to_dict()))
    assert stored["category"] == "upstream" and stored["subtype"] == "new-pure-virtual"
    assert stored["line_number"] == 2
    assert stored["captures"]["symbol"] == "c10::Allocator::copy_data"
    assert Finding.from_dict(stored) == finding


def test_triage_verdict_round_trip() -> None:
    verdict = TriageVerdict(Category.FLAKE, Subtype.TIMEOUT, "passed on rerun")
    assert TriageVerdict.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict


@pytest.mark.parametrize(
    "row",
    [{}, {"category": "upstream"},
     {"category": "nope", "subtype": "crash", "rule": "r", "stage": "test", "line": "",
      "line_number": 0}],
)
def test_malformed_rows_raise_value_error(row: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Finding.from_dict(row)


def test_enum_values_fit_the_database_columns() -> None:
    # failures.category is String(16), subtype String(32), stage String(16).
    assert max(len(c.value) for c in Category) <= 16
    assert max(len(s.value) for s in Subtype) <= 32
    assert max(len(s.value) for s in Stage) <= 16
