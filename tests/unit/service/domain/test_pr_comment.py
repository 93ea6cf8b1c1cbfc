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
