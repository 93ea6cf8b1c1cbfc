"""The regression range of a red run: which torch it last passed on, which it failed on.

A *track* is what a run's torch spec follows: the nightly series (`nightly`) moves, a pin
(`pip:torch==2.13.0`, `nightly:2026-11-20`, `commit:<sha>`) is a track of its own. The
range is (base = the torch of the newest passed run of the same backend on the same
track before the red one, head = the red run's torch). Pure: the caller finds the runs.
"""

from __future__ import annotations

from dataclasses import dataclass

# What torch.version.git_version says when a build did not record its commit.
_UNKNOWN_SHAS = {"", "unknown", "Unknown", "None"}


@dataclass(frozen=True)
class TorchPoint:
    run_id: int
    version: str
    git_version: str


@dataclass(frozen=True)
class RegressionRange:
    head: TorchPoint
    base: TorchPoint | None
    # Why there is no usable range; None when base..head can be listed.
    note: str | None = None

    @property
    def complete(self) -> bool:
        return self.note is None and self.base is not None


def known_sha(git_version: str | None) -> bool:
    return bool(git_version) and git_version not in _UNKNOWN_SHAS


def regression_range(head: TorchPoint, base: TorchPoint | None, track: str) -> RegressionRange:
    """The range, or why there is none; never a guess."""
    if not known_sha(head.git_version):
        return RegressionRange(
            head, base, f"run #{head.run_id}'s torch {head.version} records no git_version"
        )
    if base is None:
        return RegressionRange(
            head, None,
            f"no passed run of this backend on track {track} before run #{head.run_id}: "
            "nothing to compare with (give a base run explicitly)",
        )
    if not known_sha(base.git_version):
        return RegressionRange(
            head, base, f"the last green run #{base.run_id}'s torch {base.version} records no git_version"
        )
    if base.git_version == head.git_version:
        return RegressionRange(
            head, base,
            f"the last green run #{base.run_id} used the same torch ({head.git_version[:12]}): "
            "upstream did not change in between",
        )
    return RegressionRange(head, base)
