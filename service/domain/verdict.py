"""Value objects of a classified failure: what broke, where, and the evidence.

Stable interface (the pipeline stores ``Finding.to_dict()`` as JSON in ``failures.finding``
and reads it back with ``Finding.from_dict``):

- ``Stage``: the pipeline step a log came from (provision, build, import, test).
- ``Category``: who is to blame (upstream, backend, infra, flake, unknown), and
  ``SEVERITY``, the one order they rank in wherever one failure must speak for several
  (a run's verdict, a matrix cell, a breakage): every view imports it from here.
- ``COMPATIBLE``: the verdict of a run that passed (nothing to blame).
- ``Subtype``: the breakage taxonomy of DESIGN.md section 2 plus infra subtypes.
- ``Finding``: one decisive failure with its evidence (rule, line, context, captures,
  fingerprint). Enum values are the strings stored in the database columns.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


class Stage(enum.StrEnum):
    PROVISION = "provision"
    BUILD = "build"
    IMPORT = "import"
    TEST = "test"


class Category(enum.StrEnum):
    UPSTREAM = "upstream"
    BACKEND = "backend"
    INFRA = "infra"
    FLAKE = "flake"
    UNKNOWN = "unknown"


# Worst first: the one a vendor or upstream must act on wins. Upstream is what the service
# exists to report; unknown comes next because it is a red failure nobody has explained
# yet (it needs an isolating run), so it outranks infra, the machine's trouble, and flake,
# which never speaks for a run. A run that is failed (not errored) never reads infra.
SEVERITY: tuple[Category, ...] = (
    Category.UPSTREAM,
    Category.BACKEND,
    Category.UNKNOWN,
    Category.INFRA,
    Category.FLAKE,
)

# The verdict of a passed run (flaky tests included): it is not a Category, there is nobody
# to blame.
COMPATIBLE = "compatible"


def severity_rank(category: str | None) -> int:
    """Where a stored category string ranks in SEVERITY (0 is the worst); anything that is
    not a category (None, a typo in an old row) ranks as unknown."""
    known = {c.value: i for i, c in enumerate(SEVERITY)}
    return known.get(category or "", known[Category.UNKNOWN.value])


class ErrorKind(enum.StrEnum):
    """Why a run could not be carried out (``runs.error_kind``): the kind of the pipeline's
    error (``workers/pipeline/errors.py``). The run's verdict follows it (:attr:`category`),
    and so does ``ootci run``'s exit code."""

    USAGE = "usage"  # the caller's input cannot work (a spec, a recipe): nothing is kept
    INFRA = "infra"  # the machine's fault (network, disk, database, pip): retried
    UPSTREAM = "upstream"  # torch's own (it does not import)
    INTERNAL = "internal"  # a bug of ootci's

    @property
    def category(self) -> Category:
        """The run's verdict when it ends with an error of this kind."""
        if self is ErrorKind.INFRA:
            return Category.INFRA
        if self is ErrorKind.UPSTREAM:
            return Category.UPSTREAM
        return Category.UNKNOWN


def error_text(kind: ErrorKind, message: str) -> str:
    """How a run's error reads (``runs.error``): its kind, then what went wrong."""
    return f"{kind} error: {message}"


class Subtype(enum.StrEnum):
    # Refactoring
    SIGNATURE_CHANGED = "signature-changed"
    SYMBOL_REMOVED = "symbol-removed"
    SYMBOL_RENAMED = "symbol-renamed"
    HEADER_MOVED = "header-moved"
    LINK_ABI = "link-abi"
    # New features
    NEW_PURE_VIRTUAL = "new-pure-virtual"
    NEW_DTYPE_CHECK = "new-dtype-check"
    NEW_HOOK_REQUIRED = "new-hook-required"
    # Behaviour
    TEST_REGRESSION = "test-regression"
    CRASH = "crash"
    # Toolchain
    LANGUAGE_STANDARD = "language-standard"
    # The build machine lacks a tool the torch build demands (a CUDA wheel's toolkit).
    TOOLCHAIN = "toolchain"
    # torch itself does not import in a fresh environment: nothing of the backend ran.
    TORCH_UNUSABLE = "torch-unusable"
    # The run's environment lacks something neither torch nor the backend provides
    # (a test dependency): fix the recipe or the machine, not the code.
    ENVIRONMENT = "environment"
    # Infra
    PIP_RESOLVE = "pip-resolve"
    NETWORK = "network"
    DISK = "disk"
    TIMEOUT = "timeout"
    KILLED = "killed"
    # A failure we can point at but not name (an unrecognised compiler error, a CMake error).
    GENERIC = "generic"


INFRA_SUBTYPES: frozenset[Subtype] = frozenset(
    {Subtype.PIP_RESOLVE, Subtype.NETWORK, Subtype.DISK, Subtype.TIMEOUT, Subtype.KILLED}
)


@dataclass(frozen=True)
class Finding:
    """The decisive failure of a log or a test, with the evidence a human needs.

    ``line_number`` is 1-based in the (decoded) log; 0 for test failures that have no log
    line. ``fingerprint`` is empty until ``service.domain.fingerprint.fingerprint`` fills it.
    """

    category: Category
    subtype: Subtype
    rule: str
    stage: Stage
    line: str
    line_number: int
    context_before: tuple[str, ...] = ()
    context_after: tuple[str, ...] = ()
    captures: Mapping[str, str] = field(default_factory=dict)
    explanation: str = ""
    fingerprint: str = ""
    fingerprint_version: int = 0

    def with_fingerprint(self, value: str, version: int) -> Finding:
        return replace(self, fingerprint=value, fingerprint_version=version)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category.value,
            "subtype": self.subtype.value,
            "rule": self.rule,
            "stage": self.stage.value,
            "line": self.line,
            "line_number": self.line_number,
            "context_before": list(self.context_before),
            "context_after": list(self.context_after),
            "captures": dict(self.captures),
            "explanation": self.explanation,
            "fingerprint": self.fingerprint,
            "fingerprint_version": self.fingerprint_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """Inverse of ``to_dict``; raises ValueError on a malformed row, never guesses."""
        try:
            return cls(
                category=Category(data["category"]),
                subtype=Subtype(data["subtype"]),
                rule=str(data["rule"]),
                stage=Stage(data["stage"]),
                line=str(data["line"]),
                line_number=int(data["line_number"]),
                context_before=tuple(str(x) for x in data.get("context_before", ())),
                context_after=tuple(str(x) for x in data.get("context_after", ())),
                captures={str(k): str(v) for k, v in dict(data.get("captures", {})).items()},
                explanation=str(data.get("explanation", "")),
                fingerprint=str(data.get("fingerprint", "")),
                fingerprint_version=int(data.get("fingerprint_version", 0)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a serialised Finding: {exc!r}") from exc


@dataclass(frozen=True)
class TriageVerdict:
    """Who is to blame for one failure (or a whole run), and why, in one sentence.

    ``needs_isolation``: the history cannot tell torch from the backend (both changed since
    the failure last passed, or it never passed): the category is then unknown, and an
    isolating run (this run's backend on an earlier torch) would decide.
    ``isolate_against_run_id``: the run whose torch that isolating run should use (the last
    torch the failure passed on); None when there is none (it never passed)."""

    category: Category
    subtype: Subtype
    reason: str
    needs_isolation: bool = False
    isolate_against_run_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category.value, "subtype": self.subtype.value,
                "reason": self.reason, "needs_isolation": self.needs_isolation,
                "isolate_against_run_id": self.isolate_against_run_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TriageVerdict:
        try:
            against = data.get("isolate_against_run_id")
            return cls(Category(data["category"]), Subtype(data["subtype"]), str(data["reason"]),
                       needs_isolation=bool(data.get("needs_isolation", False)),
                       isolate_against_run_id=int(against) if against is not None else None)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a serialised TriageVerdict: {exc!r}") from exc
