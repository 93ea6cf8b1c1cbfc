"""The culprit corpus: every mutant kind and RFC-0030 row, ranked by the real ranking."""

from __future__ import annotations

import json

import pytest

from evals.culprit import DEFAULT_CORPUS, commit_from_github, load_case, run_corpus
from evals.mutants.catalogue import names as mutant_names

RFC_0030_PRS = {120969, 119142, 119545, 114367, 113797, 107586, 116594, 113396}


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    return run_corpus()


def test_the_corpus_meets_the_accuracy_bar(report) -> None:  # type: ignore[no-untyped-def]
    assert len(report.results) >= 12
    assert report.top1 >= 0.8, report.render()
    assert report.top3 == 1.0, report.render()


def test_the_corpus_covers_every_mutant_kind_and_rfc_row() -> None:
    cases = [json.loads(p.read_text()) for p in sorted(DEFAULT_CORPUS.glob("*.json"))]
    assert {c["mutant"] for c in cases if c["mutant"]} == set(mutant_names())
    covered = {c["expected"]["pr"] for c in cases} | {
        pr for c in cases for pr in c["related_prs"]}
    assert covered >= RFC_0030_PRS
    for c in cases:
        assert 30 <= c["compare"]["total_commits"] <= 150, c["case"]
        assert c["about"].startswith("Synthesized")


def test_suspects_name_the_expected_pr(report) -> None:  # type: ignore[no-untyped-def]
    for result in report.results:
        if result.case.expected_sha and result.rank == 1:
            assert result.ranking.suspects[0].pr == result.case.expected_pr, result.case.name


def test_the_no_suspect_case_answers_no_suspect(report) -> None:  # type: ignore[no-untyped-def]
    [case] = [r for r in report.results if r.case.expected_sha is None]
    assert case.ranking.suspects == ()
    assert case.rank == 1


def test_cases_are_in_githubs_shape() -> None:
    data = json.loads((DEFAULT_CORPUS / "getcvar-migration.json").read_text())
    compare = data["compare"]
    assert compare["ahead_by"] == compare["total_commits"] == len(compare["commits"])
    first = compare["commits"][0]
    assert first["parents"][0]["sha"] == compare["base_commit"]["sha"]
    for earlier, later in zip(compare["commits"], compare["commits"][1:], strict=False):
        assert later["parents"][0]["sha"] == earlier["sha"]
    detail = data["commits"][first["sha"]]
    assert set(detail["files"][0]) >= {"filename", "status", "additions", "deletions",
                                       "changes", "patch"}
    commit = commit_from_github(detail)
    assert commit.sha == first["sha"] and commit.files


def test_the_generator_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "make_cases", DEFAULT_CORPUS / "make_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_cases", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    [case] = [c for c in module.cases() if c.name == "getcvar-migration"]
    built = module.build(case)
    recorded = json.loads((DEFAULT_CORPUS / "getcvar-migration.json").read_text())
    assert json.loads(json.dumps(built)) == recorded
    assert load_case(DEFAULT_CORPUS / "getcvar-migration.json").expected_pr == 113797
