"""Verifying a culprit by undoing it: which of a suspect's changed files a torch wheel
installs, how each is put back to the range base, and what the experiment's run means.

A suspect's score is a guess; a label on its PR is a public accusation. The experiment
that settles it (LUCI Bisection's "culprit verification") is to rebuild without the
change: the red torch with the suspect's changes to *installed* files restored to the
base, the same backend built and tested on it. Green: the suspect is the culprit.

Only what the wheel installs can be undone this way: headers under ``torch/include`` and
Python under ``torch/``. A change to compiled code (``.cpp``, ``.cu``) lives in
``libtorch*.so`` and cannot be undone without rebuilding torch: such a suspect is
``unverifiable``, never ``refuted``. Pure: no I/O.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.domain.upstream import FileChange


class VerifyState(enum.StrEnum):
    CONFIRMED = "confirmed"  # the failures are gone with the change undone
    REFUTED = "refuted"  # still failing with the change undone
    UNVERIFIABLE = "unverifiable"  # nothing installed to undo, or it could not be restored
    ERROR = "error"  # the experiment itself broke


# Source dirs whose headers the wheel installs under torch/include/<the same path>, and
# the one whose path it shortens (aten/src/ATen/x.h -> torch/include/ATen/x.h).
_INCLUDE_ROOTS: tuple[tuple[str, str], ...] = (
    ("aten/src/ATen/", "torch/include/ATen/"),
    ("c10/", "torch/include/c10/"),
    ("torch/csrc/", "torch/include/torch/csrc/"),
)
# The trigger of a verification run (service/domain/experiments.py).
TRIGGER = "verify"
_HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl")
_PY_SUFFIXES = (".py", ".pyi")


def installed_path(source: str) -> str | None:
    """Where the wheel installs the upstream source file ``source`` (relative to
    site-packages), or None when it installs no copy of it (compiled or not shipped)."""
    if source.endswith(_HEADER_SUFFIXES):
        for prefix, target in _INCLUDE_ROOTS:
            if source.startswith(prefix):
                return target + source[len(prefix):]
        return None
    # torch/csrc holds no installed Python; everything else under torch/ is the package.
    if source.startswith("torch/") and not source.startswith("torch/csrc/") and source.endswith(_PY_SUFFIXES):
        return source
    return None


# ------------------------------------------------------------------------ restoring a file

class RestoreError(Exception):
    """A file could not be put back to the base (one line, for the evidence)."""


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class _Hunk:
    new_start: int  # 1-based line of the post-image
    before: tuple[str, ...]  # the pre-image's lines (context and removed)
    after: tuple[str, ...]  # the post-image's lines (context and added)


def _hunks(patch: str) -> list[_Hunk]:
    hunks: list[_Hunk] = []
    before: list[str] = []
    after: list[str] = []
    start = -1  # no hunk yet
    # GitHub's patch has no final newline; one that has it would make an extra context line.
    for line in patch.rstrip("\n").split("\n"):
        head = _HUNK.match(line)
        if head:
            if before or after:
                hunks.append(_Hunk(start, tuple(before), tuple(after)))
            before, after, start = [], [], int(head.group(3))
        elif line.startswith("\\"):  # "\ No newline at end of file"
            continue
        elif start < 0:
            if line:
                raise RestoreError(f"not a unified diff: {line[:60]!r} before any hunk")
        elif line.startswith("-"):
            before.append(line[1:])
        elif line.startswith("+"):
            after.append(line[1:])
        elif line.startswith(" ") or line == "":
            before.append(line[1:])
            after.append(line[1:])
        else:
            raise RestoreError(f"not a unified diff line: {line[:60]!r}")
    if before or after:
        hunks.append(_Hunk(start, tuple(before), tuple(after)))
    return hunks


def reverse_apply(text: str, patch: str) -> str:
    """``text`` (a file after the change) with ``patch`` (GitHub's hunks of the change)
    undone: each hunk's post-image replaced by its pre-image. A post-image is looked for
    at its line first, then anywhere (lines drift between the PR and the red torch), and
    must be found exactly once; anything else raises ``RestoreError``."""
    lines = text.split("\n")
    hunks = _hunks(patch)
    if not hunks:
        raise RestoreError("the patch has no hunk")
    # Last hunk first, so earlier line numbers stay valid.
    for i, hunk in sorted(enumerate(hunks), key=lambda h: -h[1].new_start):
        after, before = list(hunk.after), list(hunk.before)
        at = _find(lines, after, hunk.new_start - 1)
        if at is None:
            raise RestoreError(f"hunk {i + 1} (line {hunk.new_start}) is not in the file: the "
                               "patch does not reverse-apply")
        lines[at:at + len(after)] = before
    return "\n".join(lines)


def _find(lines: list[str], block: list[str], hint: int) -> int | None:
    n = len(block)
    if n == 0:
        return max(0, min(hint + 1, len(lines)))
    if lines[hint:hint + n] == block:
        return hint
    found = [i for i in range(len(lines) - n + 1) if lines[i:i + n] == block]
    return found[0] if len(found) == 1 else None


def unified_patch(before: str, after: str, context: int = 3) -> str:
    """The hunks of ``before`` -> ``after`` as GitHub's commit API serves a file's
    ``patch``: no file header, no final newline. The inverse of ``reverse_apply``."""
    diff = difflib.unified_diff(before.split("\n"), after.split("\n"), n=context, lineterm="")
    return "\n".join(line for line in diff if not line.startswith(("---", "+++")))


# ------------------------------------------------------------------------ planning one suspect

class How(enum.StrEnum):
    PATCH = "patch"  # reverse-apply the commit's patch to the red torch's file
    CONTENTS = "contents"  # the file at the base ref, from the contents API
    DELETE = "delete"  # the change added the file: undoing it removes it


@dataclass(frozen=True)
class Restore:
    """One installed file put back: from which upstream file, how."""

    source: str  # the upstream path at the head (the new name of a rename)
    installed: str  # relative to site-packages: torch/include/..., torch/....py
    how: How
    patch: str | None = None
    base_source: str | None = None  # the upstream path at the base (a rename's old name)
    # The change removed the file: the red torch lacks it, and it must come back.
    removed: bool = False


@dataclass(frozen=True)
class UndoPlan:
    """What undoing one suspect's change takes, or why it cannot be undone."""

    restores: tuple[Restore, ...]
    compiled: tuple[str, ...]  # changed files the wheel does not install

    @property
    def verifiable(self) -> bool:
        return bool(self.restores)

    @property
    def why_not(self) -> str:
        shown = ", ".join(self.compiled[:4]) + (", ..." if len(self.compiled) > 4 else "")
        return (f"its change is to compiled code only ({shown}): undoing it needs a torch "
                "rebuild, not an overlay" if self.compiled else "it changes no file")

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(r.source for r in self.restores)


def plan_undo(files: Iterable[FileChange]) -> UndoPlan:
    """Which installed files a commit changed and how each goes back to the base. A
    missing patch (a large file, a binary, a rename without hunks) is taken whole from
    the contents API at the base."""
    restores: list[Restore] = []
    compiled: list[str] = []
    for f in files:
        installed = installed_path(f.filename)
        old = f.previous_filename if f.status == "renamed" and f.previous_filename else None
        old_installed = installed_path(old) if old else None
        if installed is None and old_installed is None:
            compiled.append(f.filename)
            continue
        if f.status == "added":
            restores.append(Restore(f.filename, str(installed), How.DELETE))
        elif old is not None:
            # A rename: the new name goes away, the old one comes back from the base.
            if installed is not None:
                restores.append(Restore(f.filename, installed, How.DELETE))
            if old_installed is not None:
                restores.append(Restore(old, old_installed, How.CONTENTS, base_source=old))
        elif f.patch and f.status in ("modified", "changed") and not _truncated(f):
            restores.append(Restore(f.filename, str(installed), How.PATCH, patch=f.patch))
        else:
            # removed (the base's whole file), or modified without a patch (truncated).
            restores.append(Restore(f.filename, str(installed), How.CONTENTS, base_source=f.filename,
                                    removed=f.status == "removed"))
    return UndoPlan(tuple(restores), tuple(compiled))


def _truncated(f: FileChange) -> bool:
    """GitHub cuts a large file's patch short: it then shows fewer lines than it counts."""
    lines = f.patch.split("\n") if f.patch else []
    shown_add = sum(1 for x in lines if x.startswith("+"))
    shown_del = sum(1 for x in lines if x.startswith("-"))
    return shown_add < f.additions or shown_del < f.deletions


def to_verify(suspects: Sequence[Mapping[str, Any]], plans: Mapping[str, UndoPlan], top: int) -> list[str]:
    """The shas of the first ``top`` suspects (best first) that have an installed file
    to undo; the others are not run (``unverifiable`` with their plan's why)."""
    return [s["sha"] for s in suspects if plans.get(s["sha"], UndoPlan((), ())).verifiable][:top]


# ------------------------------------------------------------------------ reading the outcome

@dataclass(frozen=True)
class Verification:
    sha: str
    pr: int | None
    state: VerifyState
    evidence: str
    run_id: int | None = None
    files: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state.value, "run_id": self.run_id, "evidence": self.evidence,
                "files": list(self.files)}


def outcome(
    *, run_state: str, verdict: str | None, error_kind: str | None, error: str | None,
    provisioned: bool, failing: Sequence[str], files: Sequence[str], backend: str,
    compiled: Sequence[str] = (),
) -> tuple[VerifyState, str]:
    """What the verification run (the undone torch) says about the suspect.

    ``failing`` are the red run's failures the experiment looked for (test ids, or the
    build). Passed: confirmed. Red on build or tests: refuted, unless the suspect also
    changed ``compiled`` files, which no overlay undoes: then unverifiable (a still-red
    run proves nothing about them). Anything that kept the experiment from asking (the
    overlay does not import, infrastructure, cancelled): error, with how."""
    undone = ", ".join(files)
    if run_state == "passed":
        tests = ", ".join(failing) if failing else "its tests"
        return (VerifyState.CONFIRMED,
                f"undoing this PR's changes to {undone} makes {backend} build and pass {tests}")
    if not provisioned:
        return (VerifyState.ERROR,
                f"the overlay with {undone} undone did not import: {_first_line(error)}")
    if run_state == "failed" and error_kind in (None, "upstream") and compiled:
        # Only part of the change was undone: the rest (in libtorch) may be what breaks.
        shown = ", ".join(compiled[:3]) + (", ..." if len(compiled) > 3 else "")
        return (VerifyState.UNVERIFIABLE,
                f"with {undone} undone, {backend} still fails, but its change to compiled "
                f"code ({shown}) cannot be undone without rebuilding torch")
    if run_state == "failed" and error_kind in (None, "upstream"):
        return (VerifyState.REFUTED,
                f"with {undone} undone, {backend} still fails ({verdict or 'red'}): "
                f"{_first_line(error) or 'the same failures'}")
    return (VerifyState.ERROR,
            f"the verification run ended {run_state}"
            + (f" ({error_kind})" if error_kind else "") + f": {_first_line(error) or 'no reason given'}")


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0][:300]


def apply_to_suspects(
    suspects: Sequence[Mapping[str, Any]], verifications: Mapping[str, Verification]
) -> list[dict[str, Any]]:
    """The ranking with each suspect's verification attached, confirmed ones first: an
    experiment outranks every score. Otherwise the order is the scorer's."""
    out = []
    for s in suspects:
        entry = dict(s)
        v = verifications.get(str(s["sha"]))
        if v is not None:
            entry["verification"] = v.to_dict()
        out.append(entry)
    confirmed = [s for s in out if (s.get("verification") or {}).get("state") == VerifyState.CONFIRMED]
    return confirmed + [s for s in out if s not in confirmed]


def is_confirmed(suspect: Mapping[str, Any]) -> bool:
    return (suspect.get("verification") or {}).get("state") == VerifyState.CONFIRMED
