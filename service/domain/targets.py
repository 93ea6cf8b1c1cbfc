"""The torch targets a registered backend is built against when it changes or each night:
the operator's pins plus the newest nightly, each once, in configured order."""

from __future__ import annotations

NIGHTLY = "nightly"


def nightly_targets(pins: list[str]) -> list[str]:
    return list(dict.fromkeys([*pins, NIGHTLY]))
