"""The CLI's imports run without the cyclic collector (``service/cli/startup.py``), and the
collector is on again afterwards: a command that runs for hours (a suite, ``ootci serve``)
must still collect the cycles it makes."""

from __future__ import annotations

import gc
import subprocess
import sys

from service.cli.startup import importing
from tests.support.paths import REPO_ROOT


def test_no_collection_inside_and_the_collector_restored_after() -> None:
    assert gc.isenabled()
    frozen_before = gc.get_freeze_count()
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with importing():
            assert not gc.isenabled()
            made = [[] for _ in range(50_000)]  # would pass gen0's threshold many times
            for inner in made:
                inner.append(inner)  # cycles, as class and module objects make
        assert collections == []
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen_before + len(made)
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()


def test_it_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with importing():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_command_line_starts_frozen_with_the_collector_on() -> None:
    """What ``ootci`` (the console script imports ``service.cli``) leaves behind."""
    probe = "import gc, service.cli; print(gc.isenabled(), gc.get_freeze_count() > 10_000)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "True"], out
