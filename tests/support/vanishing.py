"""A step's real sandbox with one of its writable dirs removed after ``prepare``'s check:
bwrap then refuses to start the command (``Can't find source path``), as it would after a
cache GC or an operator's ``rm`` between the check and the step."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from workers.pipeline.isolation.procs import SetupWitness
from workers.pipeline.isolation.sandbox import StepSandbox


class Vanishing:
    """The step's real sandbox, except that ``gone`` (one of its writable dirs) is removed
    just before the ``at``-th command matching ``which`` is wrapped: the dir passed
    ``prepare``'s check and is missing when bwrap binds it for that command."""

    def __init__(self, inner: StepSandbox, gone: Path, *, at: int = 0,
                 which: str = "") -> None:
        self._inner, self._gone, self._at, self._which = inner, gone, at, which
        self.wrapped = 0

    def command(self, cmd: Sequence[str], cwd: Path,
                witness: SetupWitness | None = None) -> list[str]:
        if self._which in " ".join(cmd):
            if self.wrapped == self._at:
                shutil.rmtree(self._gone, ignore_errors=True)
            self.wrapped += 1
        return self._inner.command(cmd, cwd, witness)

    def installing_into(self, target: Path) -> Vanishing:
        """pip's sandbox (``StepSandbox.installing_into``), vanishing alike."""
        return Vanishing(self._inner.installing_into(target), self._gone, at=self._at,
                          which=self._which)

    def also_writing(self, path: Path) -> Vanishing:
        """The run's compile cache added (``StepSandbox.also_writing``), vanishing alike."""
        return Vanishing(self._inner.also_writing(path), self._gone, at=self._at,
                          which=self._which)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)
