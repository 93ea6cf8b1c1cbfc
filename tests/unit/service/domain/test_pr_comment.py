from service.domain.pr_comment import MARKER, BreakageReport, render


def _report(**kw: object) -> BreakageReport:
    base: dict[str, object] = dict(
        breakage_id=3, backend="torch_openreg", category="upstream", subtype="signature-changed",
        title="signature-changed: allocate", decisive_line="error: 'allocate' marked 'override', but does not override",
        base_version="2.14.0.dev20261120", head_version="2.14.0.dev20261121",
        base_sha="a" * 40, head_sha="b" * 40, occurrences=1, resolved=False, score=0.91,
        reasons=("edits c10/core/Allocator.h, the header that declares allocate",),
        url="https://ootci.example/breakages/3",
    )
    base.update(kw)
    return BreakageReport(**base)  # type: ignore[arg-type]


def test_open_report_names_backend_kind_range_line_reasons_and_link() -> None:
    body = render(120969, [_report()])
    assert body.startswith(MARKER)
    assert "`torch_openreg`" in body and "upstream/signature-changed" in body
    assert "2.14.0.dev20261120 (`aaaaaaaaaaaa`) → 2.14.0.dev20261121 (`bbbbbbbbbbbb`)" in body
    assert "marked 'override', but does not override" in body
    assert "edits c10/core/Allocator.h" in body and "score 0.91" in body
    assert "(https://ootci.example/breakages/3)" in body


def test_all_resolved_says_resolved_and_an_open_one_keeps_it_open() -> None:
    assert "resolved" in render(1, [_report(resolved=True)]).splitlines()[1]
    mixed = render(1, [_report(resolved=True), _report(breakage_id=4, backend="vendor_x")])
    assert "top suspect for 1 break " in mixed and "`vendor_x`" in mixed.splitlines()[1]


def test_a_backtick_in_the_log_line_cannot_break_out_of_its_block() -> None:
    body = render(1, [_report(decisive_line="error: ``` injected")])
    assert "````\nerror: ``` injected\n````" in body


def test_a_confirmed_suspect_says_confirmed_with_what_was_undone() -> None:
    evidence = ("undoing this PR's changes to c10/core/Allocator.h makes torch_openreg build "
                "and pass its tests")
    body = render(1, [_report(verification="confirmed", evidence=evidence)])
    assert f"**confirmed**: {evidence}" in body
    assert "suspected" not in body.split("<sub>")[0]


def test_an_unverified_suspect_says_suspected_and_why_not() -> None:
    assert "**suspected** (not verified: no verification has run)" in render(1, [_report()])
    why = "its change is to compiled code only (aten/src/ATen/native/TypeProperties.cpp)"
    body = render(1, [_report(verification="unverifiable", evidence=why)])
    assert f"**suspected** (not verified: {why})" in body and "**confirmed**" not in body


def test_the_pr_page_is_linked_only_under_the_public_url() -> None:
    from service.domain.pr_comment import pr_page_url

    assert pr_page_url("", 120969) is None
    assert render(120969, [_report()], page_url=pr_page_url("", 120969)).count("/prs/") == 0
    url = pr_page_url("https://ootci.example/", 120969)
    assert url == "https://ootci.example/prs/120969"
    assert f"[ootci PR #120969]({url})" in render(120969, [_report()], page_url=url)


def test_quarantined_failures_are_listed_apart_and_never_as_a_break() -> None:
    from service.domain.pr_comment import QuarantinedFailure

    flaky = QuarantinedFailure(backend="vendor_x", run_id=41, nodeid="tests/test_ops.py::test_`flip`",
                               line="AssertionError", url="https://ootci.example/runs/41")
    body = render(120969, [_report()], quarantined=[flaky])
    head, _, section = body.partition("### Quarantined as flaky, not counted")
    assert section, body
    assert "test_'flip'" in section and "[run 41](https://ootci.example/runs/41)" in section
    # The headline counts the breakage only, and names only its backend.
    assert "top suspect for 1 break " in head and "vendor_x" not in head
    assert "### Quarantined" not in render(120969, [_report()])


def test_why_nothing_was_reported_tells_the_real_reason() -> None:
    from service.domain.pr_comment import unreported_reason

    suspect = {"sha": "c" * 40, "pr": 5, "score": 0.82, "reasons": []}
    # The tour's bug: a 0.82 suspect over a 0.5 minimum is not "below the minimum".
    ready = unreported_reason([suspect], 0.5)
    assert "below" not in ready and "#5 (score 0.82)" in ready and "no report is queued" in ready
    assert unreported_reason([{**suspect, "score": 0.32}], 0.5) == (
        "the top suspect scores 0.32, below OOTCI_CULPRIT_MIN_SCORE=0.5")
    confirmed = {**suspect, "score": 0.1, "verification": {"state": "confirmed"}}
    assert "below" not in unreported_reason([confirmed], 0.5)
    assert "without a PR" in unreported_reason([{**suspect, "pr": None}], 0.5)
    refuted = {**suspect, "verification": {"state": "refuted"}}
    assert unreported_reason([refuted], 0.5) == "every suspect was refuted by undoing it"
    assert unreported_reason([], 0.5) == "there is no suspect to tell"
