"""The mutant catalogue and overlays against the real installed torch (2.13).

Every mutant must apply to the installed torch with its patched text in place; an overlay
must share every unpatched file with the install (same inode) and never change the install.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.mutants import catalogue
from evals.mutants.edits import MutantError
from evals.mutants.overlay import (
    MANIFEST,
    build_overlay,
    check_applies,
    installed_torch_dir,
    resolve_torch_dir,
    torch_version,
)
from service.domain.verdict import INFRA_SUBTYPES, Category, Subtype

TORCH = installed_torch_dir()
ALLOCATOR_H = "include/c10/core/Allocator.h"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_catalogue_covers_every_upstream_subtype() -> None:
    assert len(catalogue.MUTANTS) >= 14
    assert len(set(catalogue.names())) == len(catalogue.MUTANTS)
    # Not code breaks a header/source mutant can make: the build machine's toolchain, the
    # run's environment, a torch that does not import at all (their golden logs are in
    # tests/fixtures/logs/).
    not_mutants = {Subtype.GENERIC, Subtype.TOOLCHAIN, Subtype.ENVIRONMENT, Subtype.TORCH_UNUSABLE}
    wanted = set(Subtype) - INFRA_SUBTYPES - not_mutants
    covered = {m.expect.subtype for m in catalogue.MUTANTS}
    assert wanted <= covered, f"no mutant for {sorted(s.value for s in wanted - covered)}"
    for m in catalogue.MUTANTS:
        assert m.expect.category is Category.UPSTREAM
        assert m.expect.captures, f"{m.name}: a verdict must name what broke"
        assert m.imitates and (m.pr is None or m.pr > 0)


@pytest.mark.parametrize("mutant", catalogue.MUTANTS, ids=catalogue.names())
def test_mutant_applies_to_installed_torch(mutant: catalogue.Mutant) -> None:
    tree = check_applies(TORCH, mutant)
    # Every file the mutant names changed (or moved away); nothing else did.
    assert set(tree.changed) >= set(mutant.touched)
    for path in mutant.touched:
        if path in tree.changed and tree.changed[path] is not None and (TORCH / path).exists():
            assert tree.changed[path] != (TORCH / path).read_text(encoding="utf-8")


def test_overlay_links_everything_and_copies_only_patched_files(tmp_path: Path) -> None:
    patched = TORCH / ALLOCATOR_H
    before = (_digest(patched), patched.stat().st_ino)
    overlay = build_overlay(TORCH, tmp_path / "ov", catalogue.get("allocate-const"))

    assert overlay.spec == f"path:{tmp_path / 'ov'}"
    assert overlay.patched == [ALLOCATOR_H]
    assert overlay.symlinked == 0 and overlay.linked == sum(
        len(files) for _, _, files in os.walk(TORCH))
    # An unpatched file is the very same inode as the install's.
    init = overlay.torch_dir / "__init__.py"
    assert init.stat().st_ino == (TORCH / "__init__.py").stat().st_ino
    assert (TORCH / "__init__.py").stat().st_nlink >= 2
    # The patched file is a private copy with the new text; the install is untouched.
    mine = overlay.torch_dir / ALLOCATOR_H
    assert mine.stat().st_ino != patched.stat().st_ino and mine.stat().st_nlink == 1
    assert "virtual DataPtr allocate(size_t n) const = 0;" in mine.read_text()
    assert (_digest(patched), patched.stat().st_ino) == before
    assert "allocate(size_t n) const = 0" not in patched.read_text()
    assert (tmp_path / "ov" / MANIFEST).is_file()
    assert resolve_torch_dir(tmp_path / "ov") == overlay.torch_dir.resolve()


def test_moved_header_leaves_the_install_alone(tmp_path: Path) -> None:
    mutant = catalogue.get("host-allocator-header-moved")
    overlay = build_overlay(TORCH, tmp_path / "ov", mutant)
    old = "include/ATen/core/CachingHostAllocator.h"
    assert not (overlay.torch_dir / old).exists() and (TORCH / old).is_file()
    assert (overlay.torch_dir / "include/ATen/core/alloc/CachingHostAllocator.h").is_file()
    assert old in overlay.removed
    # torch's own users of the header follow it; the install's copies do not change.
    cuda = "include/ATen/cuda/CachingHostAllocator.h"
    assert "<ATen/core/alloc/CachingHostAllocator.h>" in (overlay.torch_dir / cuda).read_text()
    assert "<ATen/core/CachingHostAllocator.h>" in (TORCH / cuda).read_text()


def _fake_torch(root: Path, allocator_text: str) -> Path:
    torch = root / "torch"
    (torch / "include/c10/core").mkdir(parents=True)
    (torch / "__init__.py").write_text("")
    (torch / "version.py").write_text("__version__ = '9.9.9'\n")
    (torch / ALLOCATOR_H).write_text(allocator_text)
    return torch


def test_missing_anchor_fails_loudly_and_leaves_nothing(tmp_path: Path) -> None:
    fake = _fake_torch(tmp_path / "site", "struct Allocator {};\n")
    with pytest.raises(MutantError) as err:
        build_overlay(fake, tmp_path / "ov", catalogue.get("allocate-const"))
    assert str(err.value).startswith(
        "mutant allocate-const does not apply to torch 9.9.9: anchor not found in "
        "include/c10/core/Allocator.h")
    assert not (tmp_path / "ov").exists()


def test_symlinks_across_filesystems(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem to link across")
    fake = _fake_torch(tmp_path / "site",
                       "  virtual DataPtr allocate(size_t n) = 0;\n")
    out = shm / f"ootci-test-{os.getpid()}"
    try:
        overlay = build_overlay(fake, out, catalogue.get("allocate-const"))
        assert overlay.linked == 0 and overlay.symlinked == 3
        assert (out / "torch/__init__.py").is_symlink()
        mine = out / "torch" / ALLOCATOR_H
        assert not mine.is_symlink() and "const = 0" in mine.read_text()
        assert "const" not in (fake / ALLOCATOR_H).read_text()
    finally:
        import shutil

        shutil.rmtree(out, ignore_errors=True)


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(MutantError, match="unknown mutant 'nope'; known mutants: allocate-const"):
        catalogue.get("nope")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    with pytest.raises(MutantError, match="is not empty"):
        build_overlay(TORCH, busy, None)
    with pytest.raises(MutantError, match="is not a torch install"):
        build_overlay(tmp_path / "busy", tmp_path / "ov", None)
    assert torch_version(TORCH).startswith("2.13")


def test_cli_list_and_apply(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["mutants", "list", "--json"])
    assert listed.exit_code == 0
    assert "allocate-const" in listed.output and "120969" in listed.output

    unknown = runner.invoke(app, ["mutants", "apply", "nope", "--out", str(tmp_path / "a")])
    assert unknown.exit_code == 2
    assert "known mutants" in unknown.output and not (tmp_path / "a").exists()

    bad_src = runner.invoke(app, ["mutants", "apply", "allocate-const", "--out",
                                  str(tmp_path / "b"), "--torch-dir", str(tmp_path)])
    assert bad_src.exit_code == 2 and "not a torch install" in bad_src.output

    ok = runner.invoke(app, ["mutants", "apply", "cxx23-required", "--out", str(tmp_path / "c")])
    assert ok.exit_code == 0, ok.output
    assert f"path:{tmp_path / 'c'}" in ok.output
    assert "C++23 or later" in (tmp_path / "c/torch/include/c10/macros/Macros.h").read_text()

    again = runner.invoke(app, ["mutants", "apply", "cxx23-required", "--out",
                                str(tmp_path / "c")])
    assert again.exit_code == 2 and "not empty" in again.output

    corpus = runner.invoke(app, ["classifier", "--only", "nope"])
    assert corpus.exit_code == 2 and "unknown mutant" in corpus.output
