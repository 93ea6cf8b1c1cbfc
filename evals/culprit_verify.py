"""Culprit verification on the culprit corpus (``python -m evals culprit-verify``).

For each corpus case that names a mutant of ``evals/mutants/``, the red torch is the
mutant's overlay of the installed torch, and the culprit's change is made *exact*: its
installed files carry the hunks of the mutant's edit, in GitHub's patch shape
(``service.domain.verification.unified_patch``), its compiled files are the case's own.
The corpus's ranking picks the top suspects (``top``); each is undone by the product's
code (``workers/jobs/verify_overlay.py``: plan, restore, atomic overlay), the contents API
at the base answered from the installed (green) torch.

What is measured is the restore, not a build: a suspect is ``confirmed`` here when the
undone overlay is the green torch again in every file the mutant or the undo touched (the
backend was green on exactly that torch), ``refuted`` when the mutant's edit is still in
it, ``unverifiable`` as the product says. The one end-to-end build of a confirmation is
``tests/integration/test_culprit_verify.py``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from evals.culprit import load_case
from evals.mutants import catalogue
from evals.mutants.overlay import MemoryTree, installed_torch_dir, torch_version
from evals.paths import CULPRIT_CASES
from service.domain.culprit import rank_culprits
from service.domain.upstream import FileChange, UpstreamCommit
from service.domain.verification import (
    RestoreError,
    UndoPlan,
    VerifyState,
    installed_path,
    plan_undo,
    to_verify,
    unified_patch,
)
from workers.jobs.verify_overlay import build_overlay, restored_contents

_SOURCE_OF = (("torch/include/ATen/", "aten/src/ATen/"), ("torch/include/c10/", "c10/"),
              ("torch/include/torch/csrc/", "torch/csrc/"), ("torch/", "torch/"))


def source_path(installed: str) -> str:
    """The upstream source path of an installed file (inverse of ``installed_path``)."""
    for prefix, source in _SOURCE_OF:
        if installed.startswith(prefix):
            return source + installed[len(prefix):]
    raise ValueError(installed)


@dataclass(frozen=True)
class SuspectAnswer:
    case: str
    sha: str
    pr: int | None
    culprit: bool
    state: VerifyState
    why: str


def _exact(commit: UpstreamCommit, green: Path, changed: dict[str, str | None]) -> UpstreamCommit:
    """The culprit with its installed files replaced by the mutant's edit, hunks exact."""
    compiled = tuple(f for f in commit.files if installed_path(f.filename) is None)
    files = []
    for rel, text in sorted(changed.items()):
        installed = f"torch/{rel}"
        before = (green / rel).read_text(encoding="utf-8") if (green / rel).is_file() else None
        if text is None:
            files.append(FileChange(source_path(installed), "removed", patch=None))
        elif before is None:
            files.append(FileChange(source_path(installed), "added",
                                    patch=unified_patch("", text)))
        else:
            files.append(FileChange(source_path(installed), "modified",
                                    patch=unified_patch(before, text)))
    return UpstreamCommit(commit.sha, commit.message, (*files, *compiled), commit.pr,
                          commit.author, commit.committed_at)


def verify_case(path: Path, work: Path, top: int = 3) -> list[SuspectAnswer]:
    raw = json.loads(path.read_text())
    if not raw.get("mutant"):
        return []
    case = load_case(path)
    green = installed_torch_dir()
    mutant = catalogue.get(raw["mutant"])
    tree = MemoryTree(green)
    mutant.apply(tree, torch_version(green))
    changed = {p: t for p, t in tree.changed.items() if p != "version.py"}
    commits = tuple(_exact(c, green, changed) if c.sha == case.expected_sha else c for c in case.commits)
    ranking = rank_culprits(list(case.evidence), list(commits))
    red = build_overlay(green, work / f"{case.name}-red",
                        {f"torch/{p}": (None if t is None else t.encode()) for p, t in changed.items()})
    by_sha = {c.sha: c for c in commits}
    suspects = [s.to_dict() for s in ranking.suspects]
    plans = {str(s["sha"]): plan_undo(by_sha[str(s["sha"])].files) for s in suspects}
    chosen = to_verify(suspects, plans, top)
    answers: list[SuspectAnswer] = []
    for s in suspects:
        sha = str(s["sha"])
        plan = plans[sha]
        culprit = sha == case.expected_sha
        if sha not in chosen:
            if not plan.verifiable and (culprit or s is suspects[0] or len(answers) < top):
                answers.append(SuspectAnswer(case.name, sha, s["pr"], culprit,  # type: ignore[arg-type]
                                             VerifyState.UNVERIFIABLE, plan.why_not))
            continue
        answers.append(_undo(case.name, sha, s["pr"], culprit, plan, red / "torch", green, changed))  # type: ignore[arg-type]
    return answers


def _undo(name: str, sha: str, pr: int | None, culprit: bool, plan: UndoPlan, red: Path,
          green: Path, changed: dict[str, str | None]) -> SuspectAnswer:
    def base_file(source: str, ref: str) -> bytes | None:
        installed = installed_path(source)
        target = green.parent / installed if installed else None
        return target.read_bytes() if target and target.is_file() else None

    try:
        contents, _ = restored_contents(red, plan, "base", base_file)
    except RestoreError as exc:
        return SuspectAnswer(name, sha, pr, culprit, VerifyState.UNVERIFIABLE, str(exc))
    site = green.parent
    touched = {f"torch/{p}" for p in changed} | set(contents)
    differs = []
    for rel in sorted(touched):
        now = contents[rel] if rel in contents else _read(red.parent / rel)
        if now != _read(site / rel):
            differs.append(rel)
    if differs and plan.compiled:
        return SuspectAnswer(name, sha, pr, culprit, VerifyState.UNVERIFIABLE,
                             f"still differs from the green torch in {', '.join(differs[:3])}; "
                             f"its compiled part ({', '.join(plan.compiled[:2])}) cannot be undone")
    if differs:
        return SuspectAnswer(name, sha, pr, culprit, VerifyState.REFUTED,
                             f"still differs from the green torch in {', '.join(differs[:3])}")
    return SuspectAnswer(name, sha, pr, culprit, VerifyState.CONFIRMED,
                         f"undone, the torch is the green one again ({', '.join(plan.files)})")


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@dataclass(frozen=True)
class VerifyReport:
    answers: tuple[SuspectAnswer, ...]

    def _of(self, culprit: bool, state: VerifyState) -> int:
        return sum(1 for a in self.answers if a.culprit == culprit and a.state is state)

    @property
    def culprits_confirmed(self) -> int:
        return self._of(True, VerifyState.CONFIRMED)

    @property
    def culprits(self) -> int:
        return sum(1 for a in self.answers if a.culprit)

    @property
    def decoys_confirmed(self) -> int:
        return self._of(False, VerifyState.CONFIRMED)

    @property
    def culprits_refuted(self) -> int:
        return self._of(True, VerifyState.REFUTED)

    def render(self) -> str:
        lines = [f"{'case':36} {'suspect':>9} {'culprit':>7}  state         why"]
        for a in self.answers:
            lines.append(f"{a.case:36} {('#' + str(a.pr)) if a.pr else a.sha[:8]:>9} "
                         f"{'yes' if a.culprit else '':>7}  {a.state.value:13} {a.why[:90]}")
        lines.append(f"culprits confirmed {self.culprits_confirmed}/{self.culprits}, refuted "
                     f"{self.culprits_refuted}; decoys confirmed {self.decoys_confirmed} of "
                     f"{sum(1 for a in self.answers if not a.culprit)} verified")
        return "\n".join(lines)


def evaluate(cases: Iterable[Path] | None = None, top: int = 3) -> VerifyReport:
    answers: list[SuspectAnswer] = []
    with tempfile.TemporaryDirectory(prefix="ootci-verify-eval-") as tmp:
        for path in sorted(cases or CULPRIT_CASES.glob("*.json")):
            answers += verify_case(path, Path(tmp), top)
    return VerifyReport(tuple(answers))
