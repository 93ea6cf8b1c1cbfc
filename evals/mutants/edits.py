"""Text edits that turn a torch install into a mutant, anchored on exact upstream text.

An edit never guesses: its anchor must occur in the file exactly as many times as it says
(once, unless it is a replace-all), otherwise it raises ``AnchorNotFound`` and the mutant
refuses to apply. A torch release that changed the anchored text therefore fails loudly
instead of producing a mutant that no longer breaks anything.

Edits work on a ``Tree`` (paths relative to the ``torch`` package directory), so the same
catalogue can be checked in memory against the installed torch (unit tests) and written into
an overlay (``evals.mutants.overlay``).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass


class MutantError(Exception):
    """A mutant cannot be listed, applied or run as asked (bad name, bad dir, bad torch)."""


class AnchorNotFound(MutantError):
    """An edit's anchor text is not where the edit expects it."""

    def __init__(self, path: str, anchor: str, found: int, wanted: str) -> None:
        first = anchor.strip().splitlines()[0] if anchor.strip() else anchor
        super().__init__(
            f"anchor not found in {path} (wanted {wanted}, found {found}): {first[:80]!r}"
        )
        self.path = path


class Tree(ABC):
    """The files of one torch package, addressed by POSIX paths relative to ``torch/``."""

    @abstractmethod
    def read(self, path: str) -> str: ...

    @abstractmethod
    def write(self, path: str, text: str) -> None:
        """Replace (or create) a file; must never modify a file shared with another tree."""

    @abstractmethod
    def remove(self, path: str) -> None: ...

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def files_under(self, prefix: str, suffixes: tuple[str, ...]) -> Iterable[str]:
        """Every file below ``prefix`` whose name ends with one of ``suffixes``."""


class Edit(ABC):
    """One change to a tree. ``apply`` performs it, ``verify`` proves it is in place."""

    @abstractmethod
    def apply(self, tree: Tree) -> None: ...

    @abstractmethod
    def verify(self, tree: Tree) -> None:
        """Raise AssertionError if the tree does not show this edit."""

    @property
    @abstractmethod
    def paths(self) -> tuple[str, ...]:
        """The files this edit touches (for listings and the overlay's copy report)."""


def _count_or_fail(path: str, text: str, anchor: str, exactly: int | None) -> int:
    found = text.count(anchor)
    if exactly is None:
        if found == 0:
            raise AnchorNotFound(path, anchor, found, "at least once")
    elif found != exactly:
        raise AnchorNotFound(path, anchor, found, f"exactly {exactly}x")
    return found


@dataclass(frozen=True)
class Replace(Edit):
    """Replace ``old`` by ``new`` in one file; ``old`` must occur ``count`` times (None: any
    number >= 1, all replaced)."""

    path: str
    old: str
    new: str
    count: int | None = 1

    def apply(self, tree: Tree) -> None:
        text = tree.read(self.path)
        _count_or_fail(self.path, text, self.old, self.count)
        tree.write(self.path, text.replace(self.old, self.new))

    def verify(self, tree: Tree) -> None:
        text = tree.read(self.path)
        assert self.new in text, f"{self.path}: patched text missing"
        if self.old not in self.new:
            assert self.old not in text, f"{self.path}: original text still present"

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)


@dataclass(frozen=True)
class InsertAfter(Edit):
    """Insert ``text`` right after the single occurrence of ``anchor``."""

    path: str
    anchor: str
    text: str

    def apply(self, tree: Tree) -> None:
        body = tree.read(self.path)
        _count_or_fail(self.path, body, self.anchor, 1)
        tree.write(self.path, body.replace(self.anchor, self.anchor + self.text, 1))

    def verify(self, tree: Tree) -> None:
        assert self.anchor + self.text in tree.read(self.path), f"{self.path}: insert missing"

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)


_INCLUDE_SUFFIXES = (".h", ".hpp", ".cuh", ".hxx", ".inc")


@dataclass(frozen=True)
class MoveHeader(Edit):
    """Move a header under ``include/`` and rewrite every ``#include`` of it inside torch, as
    an upstream move does; code outside torch (the backend) keeps the old path and breaks."""

    old: str  # e.g. "ATen/core/CachingHostAllocator.h" (relative to include/)
    new: str

    def _includes(self, header: str) -> re.Pattern[str]:
        return re.compile(r'(#\s*include\s*[<"])' + re.escape(header) + r'([>"])')

    def apply(self, tree: Tree) -> None:
        src, dst = f"include/{self.old}", f"include/{self.new}"
        if not tree.exists(src):
            raise AnchorNotFound(src, self.old, 0, "the header to move")
        if tree.exists(dst):
            raise AnchorNotFound(dst, self.new, 1, "no file at the destination")
        body = tree.read(src)
        tree.remove(src)
        tree.write(dst, body)
        pattern = self._includes(self.old)
        for path in tree.files_under("include/", _INCLUDE_SUFFIXES):
            if path == dst:
                continue
            text = tree.read(path)
            # The substring test first: a regex over ~10k headers would dominate apply time.
            if self.old in text and pattern.search(text):
                tree.write(path, pattern.sub(lambda m: m.group(1) + self.new + m.group(2), text))

    def verify(self, tree: Tree) -> None:
        assert not tree.exists(f"include/{self.old}"), f"{self.old} still present"
        assert tree.exists(f"include/{self.new}"), f"{self.new} missing"

    @property
    def paths(self) -> tuple[str, ...]:
        return (f"include/{self.old}", f"include/{self.new}")
