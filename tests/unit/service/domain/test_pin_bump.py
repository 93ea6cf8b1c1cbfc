"""The pin-bump rule: bump only to a newer green build, named reproducibly; hold with the
oldest open breakage and its top suspect as the reason."""

from __future__ import annotations

import datetime as dt

from service.domain.pin_bump import (
    OpenBreakage,
    Suspect,
    UpstreamBuild,
    recommend,
    reproducible_spec,
)

PIN = UpstreamBuild("nightly:2026-11-16", "2.14.0.dev20261116+cpu", "a" * 40)
GREEN = UpstreamBuild("nightly:2026-11-23", "2.14.0.dev20261123+cpu", "b" * 40, run_id=41)
HEADER = OpenBreakage(7, "header moved", "upstream/header-moved", dt.date(2026, 11, 19),
                      (Suspect(165001, "c" * 40, 0.91),))


def test_a_nightly_is_named_by_its_date_never_the_moving_nightly() -> None:
    assert reproducible_spec("nightly", "nightly", "2.14.0.dev20261123+cpu", "b" * 40) == "nightly:2026-11-23"
    assert reproducible_spec("commit:bbbbbbb", "commit", "2.14.0.dev20261123+cpu", "b" * 40) == "nightly:2026-11-23"
    assert reproducible_spec("pip:torch==2.13.0", "pip", "2.13.0", "d" * 40) == "pip:torch==2.13.0"
    assert reproducible_spec("installed", "installed", "2.13.0", "d" * 40) is None
    assert reproducible_spec("path:/src/torch", "path", "2.14.0a0", "e" * 40) is None


def test_bump_to_a_newer_green_build() -> None:
    rec = recommend("nightly:2026-11-16", PIN, GREEN, [])
    assert (rec.action, rec.spec) == ("bump", "nightly:2026-11-23")
    assert rec.reason == "bump to nightly:2026-11-23 (torch 2.14.0.dev20261123+cpu, passed in run 41)"


def test_hold_names_the_oldest_breakage_and_its_suspect() -> None:
    newer = OpenBreakage(9, "sig", "upstream/signature-changed", dt.date(2026, 11, 24))
    rec = recommend("nightly:2026-11-16", PIN, PIN, [newer, HEADER])
    assert (rec.action, rec.spec) == ("hold", None)
    assert rec.reason == (
        "hold: upstream/header-moved since 2026-11-19 (breakage 7), suspect #165001 (0.91) (+1 more open)"
    )


def test_hold_when_the_pin_is_the_newest_green_or_nothing_passed() -> None:
    assert recommend("nightly:2026-11-23", GREEN, GREEN, []).reason == (
        "hold: the pin nightly:2026-11-23 is the newest build that passed"
    )
    assert recommend(None, None, None, []).reason == "hold: no nightly/pin run has passed yet"


def test_an_older_green_build_is_no_bump() -> None:
    rec = recommend("nightly:2026-11-23", GREEN, PIN, [HEADER])
    assert rec.action == "hold"
