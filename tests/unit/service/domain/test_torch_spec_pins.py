"""The pinning forms of the torch-spec grammar: nightly:DATE, commit:SHA, run:ID."""

from __future__ import annotations

import datetime as dt

import pytest

from service.domain.torch_spec import SourceKind, TorchSpecError, nightly_date_of, parse_spec

INDEX = "file:///srv/nightly"


def test_nightly_with_a_date_pins_that_night() -> None:
    spec = parse_spec("nightly:2026-11-21", nightly_index_url=INDEX)
    assert (spec.kind, spec.nightly_date, spec.index_url) == (
        SourceKind.NIGHTLY, dt.date(2026, 11, 21), INDEX
    )
    assert spec.pins_upstream
    assert not parse_spec("nightly", nightly_index_url=INDEX).pins_upstream


@pytest.mark.parametrize("text", ["nightly:2026-11-31", "nightly:20261121", "nightly:yesterday"])
def test_a_date_that_is_no_date_is_refused(text: str) -> None:
    with pytest.raises(TorchSpecError, match="nightly"):
        parse_spec(text)


def test_commit_takes_a_hex_sha_of_7_to_40_digits_in_any_case() -> None:
    spec = parse_spec("commit:ABCDEF1234", nightly_index_url=INDEX)
    assert (spec.kind, spec.commit, spec.index_url) == (SourceKind.COMMIT, "abcdef1234", INDEX)
    for bad in ("commit:abc", "commit:" + "a" * 41, "commit:main", "commit:"):
        with pytest.raises(TorchSpecError):
            parse_spec(bad)


def test_run_takes_a_positive_id() -> None:
    assert parse_spec("run:17").run_id == 17
    for bad in ("run:0", "run:-3", "run:abc", "run:"):
        with pytest.raises(TorchSpecError):
            parse_spec(bad)


@pytest.mark.parametrize(
    ("version", "date"),
    [
        ("2.14.0.dev20261120+cpu", dt.date(2026, 11, 20)),
        ("2.14.0.dev20261120", dt.date(2026, 11, 20)),
        ("2.13.0", None),
        ("2.14.0.dev20261399", None),  # not a date: no nightly of any day
    ],
)
def test_the_date_a_nightly_version_carries(version: str, date: dt.date | None) -> None:
    assert nightly_date_of(version) == date
