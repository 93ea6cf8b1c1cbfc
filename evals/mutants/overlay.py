"""Overlays: a mutant torch install in a new directory without copying torch.

``build_overlay(torch_dir, out, mutant)`` mirrors the ``torch`` package into ``out/torch``
with hard links (symlinks when ``out`` is on another filesystem): ~15k files cost a few
inodes, not 750 MB. Only the files a mutant edits become real files, and an edit never
writes through a link: the link is removed first, so the original install cannot change.
``path:<out>`` is then a torch spec the pipeline can run (``out`` first on PYTHONPATH).
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evals.mutants.edits import MutantError, Tree
from evals.mutants.mutant import Mutant

MANIFEST = "ootci-overlay.json"
_VERSION = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)


def installed_torch_dir() -> Path:
    """The ``torch`` package of this interpreter, found without importing it (seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise MutantError("no torch installed in this interpreter; pass --torch-dir")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def resolve_torch_dir(source: Path) -> Path:
    """Accept the ``torch`` package dir or a dir containing it (site-packages, an overlay)."""
    source = Path(source)
    for candidate in (source, source / "torch"):
        if (candidate / "__init__.py").is_file() and (candidate / "version.py").is_file():
            return candidate.resolve()
    raise MutantError(
        f"{source} is not a torch install: expected torch/__init__.py and torch/version.py "
        "(give the torch package dir or the site-packages dir that holds it)"
    )


def torch_version(torch_dir: Path) -> str:
    m = _VERSION.search((torch_dir / "version.py").read_text(encoding="utf-8"))
    if m is None:
        raise MutantError(f"{torch_dir}/version.py has no __version__")
    return m.group(1)


class MemoryTree(Tree):
    """A read-only torch install seen through in-memory edits (checking a mutant applies,
    without touching any file)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.changed: dict[str, str | None] = {}  # path -> new text, None = removed

    def read(self, path: str) -> str:
        if path in self.changed:
            text = self.changed[path]
            if text is None:
                raise FileNotFoundError(path)
            return text
        return (self.root / path).read_text(encoding="utf-8", errors="surrogateescape")

    def write(self, path: str, text: str) -> None:
        self.changed[path] = text

    def remove(self, path: str) -> None:
        self.changed[path] = None

    def exists(self, path: str) -> bool:
        if path in self.changed:
            return self.changed[path] is not None
        return (self.root / path).is_file()

    def files_under(self, prefix: str, suffixes: tuple[str, ...]) -> Iterable[str]:
        return [p for p in _walk(self.root, prefix, suffixes)
                if self.changed.get(p, "") is not None]


def _walk(root: Path, prefix: str, suffixes: tuple[str, ...]) -> Iterator[str]:
    base = root / prefix
    for dirpath, _dirs, files in os.walk(base):
        rel = Path(dirpath).relative_to(root).as_posix()
        for name in files:
            if name.endswith(suffixes):
                yield f"{rel}/{name}"


class _OverlayTree(Tree):
    """The overlay's ``torch`` dir: every write replaces the link with a private file."""

    def __init__(self, root: Path, source: Path) -> None:
        self.root = root
        self.source = source
        self.written: set[str] = set()
        self.removed: set[str] = set()

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8", errors="surrogateescape")

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        if target.exists() or target.is_symlink():
            target.unlink()  # breaks the link; opening it for writing would patch the original
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", errors="surrogateescape")
        original = self.source / path
        if original.exists():
            shutil.copymode(original, target)
        self.written.add(path)
        self.removed.discard(path)
        if path.endswith(".py"):
            _drop_bytecode(target)

    def remove(self, path: str) -> None:
        (self.root / path).unlink()
        self.removed.add(path)
        self.written.discard(path)

    def exists(self, path: str) -> bool:
        return (self.root / path).is_file()

    def files_under(self, prefix: str, suffixes: tuple[str, ...]) -> Iterable[str]:
        return list(_walk(self.root, prefix, suffixes))


def _drop_bytecode(source_file: Path) -> None:
    # The linked .pyc belongs to the unpatched source; Python would notice the mismatch, but
    # an overlay should not carry bytecode that contradicts its sources.
    cache = source_file.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{source_file.stem}.*.pyc"):
            pyc.unlink()


@dataclass
class Overlay:
    root: Path  # the dir to put first on PYTHONPATH: path:<root>
    torch_dir: Path
    source: Path
    version: str
    mutant: str | None
    linked: int = 0
    symlinked: int = 0
    patched: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def spec(self) -> str:
        return f"path:{self.root}"

    def to_dict(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "mutant": self.mutant,
            "torch_version": self.version,
            "source": str(self.source),
            "hard_links": self.linked,
            "symlinks": self.symlinked,
            "patched": self.patched,
            "removed": self.removed,
        }


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise MutantError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise MutantError(f"{out} is not empty: give a new or empty directory for the overlay")


def _mirror(source: Path, dest: Path, overlay: Overlay) -> None:
    use_symlinks = False
    for dirpath, dirnames, filenames in os.walk(source):
        rel = Path(dirpath).relative_to(source)
        target_dir = dest / rel
        target_dir.mkdir(exist_ok=True)
        dirnames.sort()
        for name in filenames:
            src, dst = Path(dirpath) / name, target_dir / name
            if not use_symlinks:
                try:
                    os.link(src, dst, follow_symlinks=False)
                    overlay.linked += 1
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                        raise
                    use_symlinks = True  # another filesystem: every later link fails too
            os.symlink(src, dst)
            overlay.symlinked += 1


def build_overlay(torch_dir: Path, out: Path, mutant: Mutant | None) -> Overlay:
    """Mirror ``torch_dir`` into ``out/torch`` and apply ``mutant`` (None: a clean overlay,
    the baseline the corpus compares against). Raises MutantError on bad input; on a
    mutant that does not apply, the half-made overlay is removed."""
    source = resolve_torch_dir(torch_dir)
    out = Path(out).absolute()
    _check_out_dir(out)
    version = torch_version(source)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    overlay = Overlay(root=out, torch_dir=out / "torch", source=source, version=version,
                      mutant=mutant.name if mutant else None)
    try:
        _mirror(source, overlay.torch_dir, overlay)
        if mutant is not None:
            tree = _OverlayTree(overlay.torch_dir, source)
            mutant.apply(tree, version)
            overlay.patched = sorted(tree.written)
            overlay.removed = sorted(tree.removed)
    except BaseException:
        shutil.rmtree(out if created else out / "torch", ignore_errors=True)
        raise
    (out / MANIFEST).write_text(json.dumps(overlay.to_dict(), indent=2) + "\n", encoding="utf-8")
    return overlay


def check_applies(torch_dir: Path, mutant: Mutant) -> MemoryTree:
    """Apply ``mutant`` in memory (no files written) and verify every edit is in place."""
    source = resolve_torch_dir(torch_dir)
    tree = MemoryTree(source)
    mutant.apply(tree, torch_version(source))
    mutant.verify(tree)
    return tree
