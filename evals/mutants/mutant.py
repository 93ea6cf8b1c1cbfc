"""What a mutant is: a named patch to a torch install plus the verdict it must produce."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from evals.mutants.edits import AnchorNotFound, Edit, MutantError, Tree
from service.domain.verdict import Category, Stage, Subtype


@dataclass(frozen=True)
class Expected:
    """The verdict a correct classifier gives for this mutant's decisive failure.

    ``captures`` maps a capture name to a regex that must *search*-match its value: the
    symbol/header the failure must name. The decisive failure is the first failure of the
    run in stage order (build, import, test) that did not also fail on the unpatched torch.
    """

    stage: Stage
    category: Category
    subtype: Subtype
    captures: Mapping[str, str] = field(default_factory=dict)

    def capture_problems(self, got: Mapping[str, str]) -> list[str]:
        """Human-readable reasons the captures are wrong; empty when they are right."""
        problems = []
        for name, pattern in self.captures.items():
            value = got.get(name)
            if value is None:
                problems.append(f"no {name!r} capture")
            elif not re.search(pattern, value):
                problems.append(f"{name}={value!r} does not match /{pattern}/")
        return problems


@dataclass(frozen=True)
class Mutant:
    name: str
    imitates: str  # the kind of upstream change, in one line
    pr: int | None  # the pytorch/pytorch PR it imitates, when one exists
    expect: Expected
    edits: tuple[Edit, ...]

    @property
    def pr_url(self) -> str:
        return f"https://github.com/pytorch/pytorch/pull/{self.pr}" if self.pr else ""

    @property
    def touched(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for edit in self.edits:
            for path in edit.paths:
                seen.setdefault(path, None)
        return tuple(seen)

    @property
    def python_only(self) -> bool:
        """True when only Python files change (the C++ build is the unpatched one)."""
        return all(p.endswith(".py") for p in self.touched)

    def apply(self, tree: Tree, torch_version: str) -> None:
        try:
            for edit in self.edits:
                edit.apply(tree)
        except AnchorNotFound as exc:
            raise MutantError(
                f"mutant {self.name} does not apply to torch {torch_version}: {exc}"
            ) from None

    def verify(self, tree: Tree) -> None:
        for edit in self.edits:
            edit.verify(tree)
