"""The undone torch on disk: restored files are new files (the red install is never
written through a link), a restore that cannot be done writes nothing, and the overlay
appears whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.domain.upstream import FileChange
from service.domain.verification import RestoreError, plan_undo, unified_patch
from workers.jobs.verify_overlay import build_overlay, restored_contents, undone_version

GREEN = "#pragma once\nstruct A {\n  virtual void f(int d) = 0;\n};\n"
RED = GREEN.replace("int d", "long d")
BASE = "b" * 40


def _red_torch(root: Path) -> Path:
    torch = root / "site" / "torch"
    (torch / "include" / "c10" / "core").mkdir(parents=True)
    (torch / "__init__.py").write_text("__version__ = '2.14.0'\n")
    (torch / "version.py").write_text("__version__ = '2.14.0'\ngit_version = '" + "c" * 40 + "'\n")
    (torch / "include" / "c10" / "core" / "A.h").write_text(RED)
    (torch / "utils.py").write_text("x = 1\n")
    return torch


def _no_contents(path: str, ref: str) -> bytes | None:
    return None


def test_the_overlay_links_the_red_torch_and_writes_restored_files_anew(tmp_path: Path) -> None:
    torch = _red_torch(tmp_path)
    plan = plan_undo([FileChange("c10/core/A.h", "modified", patch=unified_patch(GREEN, RED)),
                      FileChange("c10/cuda/CUDAOnly.h", "modified", patch="@@ -1 +1 @@\n-a\n+b")])
    contents, skipped = restored_contents(torch, plan, BASE, _no_contents)
    assert contents == {"torch/include/c10/core/A.h": GREEN.encode()}
    assert skipped == ("c10/cuda/CUDAOnly.h",)  # a CPU wheel has no CUDA headers
    overlay = build_overlay(torch, tmp_path / "overlay", contents)
    assert (overlay / "torch" / "include" / "c10" / "core" / "A.h").read_text() == GREEN
    assert (torch / "include" / "c10" / "core" / "A.h").read_text() == RED  # untouched
    assert os.stat(overlay / "torch" / "utils.py").st_ino == os.stat(torch / "utils.py").st_ino
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_removed_file_comes_back_from_the_contents_api_and_a_404_says_so(tmp_path: Path) -> None:
    torch = _red_torch(tmp_path)
    plan = plan_undo([FileChange("c10/core/Gone.h", "removed", patch=None)])
    served = {("c10/core/Gone.h", BASE): b"#pragma once\n"}
    contents, _ = restored_contents(torch, plan, BASE, lambda p, r: served.get((p, r)))
    assert contents == {"torch/include/c10/core/Gone.h": b"#pragma once\n"}
    with pytest.raises(RestoreError, match=r"c10/core/Gone.h at bbbbbbbbbbbb: the contents API answered 404"):
        restored_contents(torch, plan, BASE, _no_contents)


def test_a_patch_that_does_not_reverse_apply_names_the_file(tmp_path: Path) -> None:
    torch = _red_torch(tmp_path)
    plan = plan_undo([FileChange("c10/core/A.h", "modified", patch=unified_patch(GREEN, GREEN + "x\n"))])
    with pytest.raises(RestoreError, match=r"^c10/core/A.h: hunk 1 .* does not reverse-apply"):
        restored_contents(torch, plan, BASE, _no_contents)


def test_an_overlay_that_fails_half_way_leaves_nothing_behind(tmp_path: Path) -> None:
    torch = _red_torch(tmp_path)
    with pytest.raises(RestoreError, match="outside the torch package"):
        build_overlay(torch, tmp_path / "overlay", {"torch/include/ok.h": b"1", "torch/../../evil": b"x"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    assert not (tmp_path / "evil").exists()


def test_the_overlay_has_a_git_version_of_its_own(tmp_path: Path) -> None:
    # A pass on the undone torch must not read as a pass on the red one in triage's history.
    torch = _red_torch(tmp_path)
    (rel, text), = undone_version(torch, "9c384d5049ce" + "0" * 28).items()
    assert rel == "torch/version.py"
    assert f"git_version = '{'c' * 40}-undo-9c384d5049ce'" in text.decode()
    assert "__version__ = '2.14.0'" in text.decode()


def test_the_red_torch_is_found_through_layered_envs_without_running_them(tmp_path: Path) -> None:
    """A run's env is a venv layered over the shared env by a .pth; the red wheel's own
    .pth files would run as the worker if ootci started that interpreter to ask."""
    from workers.jobs.verify_overlay import _site_packages, red_torch_dir
    from workers.pipeline.env.layered import layered_venv

    base = tmp_path / "shared"
    base_site = _site_packages(base)
    base_site.mkdir(parents=True)
    (base_site / "torch").mkdir()
    (base_site / "torch" / "__init__.py").write_text("")
    marker = tmp_path / "ran"
    (base_site / "evil.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    python = layered_venv(tmp_path / "run-env", [base_site], pth="_ootci_layers.pth")

    assert red_torch_dir("nightly", str(python)) == base_site / "torch"
    assert not marker.exists()

    (base_site / "torch" / "__init__.py").unlink()
    with pytest.raises(RestoreError, match="not at"):
        red_torch_dir("nightly", str(python))
