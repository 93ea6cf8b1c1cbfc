"""The sandbox probe (``probe``): what works is told apart from what does not, with its
checks run side by side (``_work``)."""

from __future__ import annotations

import os
import shutil

import pytest

from workers.pipeline.isolation.sandbox import _work, probe


def _refuse() -> None:
    raise OSError("unshare: Operation not permitted")


def test_each_check_answers_for_itself() -> None:
    worked = _work([
        (["false"], None),
        (["true"], _refuse),  # the child's set-up fails, as an unshare without the right
        (["/nonexistent/bwrap", "--", "true"], None),
        (["sh", "-c", "exit 0"], None),
    ])
    assert worked == [False, False, False, True]


def test_a_broken_bwrap_is_not_used_and_the_rest_still_probed() -> None:
    probe.cache_clear()
    try:
        support = probe(65534, "/bin/false")
    finally:
        probe.cache_clear()
    assert support.bwrap is None
    if os.geteuid() != 0:
        pytest.skip("setpriv is probed under root only")
    assert support.setpriv == shutil.which("setpriv") and support.netns
