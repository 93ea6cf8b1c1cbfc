"""The values that flow between pipeline steps (provision -> build -> test -> collect).

Steps are plain functions over these values; only ``workers.pipeline.execute`` touches the
database. That keeps every step runnable and testable on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from service.domain.states import Outcome, StepStatus
from service.domain.torch_spec import SourceKind


class PipelineError(Exception):
    """A step could not do its job. ``usage`` errors are the caller's fault (exit 2, nothing
    stored half-way); ``infra`` errors are the environment's (network, disk, pip);
    ``upstream`` ones torch's own (``TorchUnusable``)."""

    kind = "infra"


class UsageError(PipelineError):
    kind = "usage"


class SpecError(UsageError):
    """A torch spec that cannot be parsed or resolved."""


class RecipeError(UsageError):
    """A backend dir without a usable ootci.toml."""


class ProvisionError(PipelineError):
    pass


class TorchUnusable(ProvisionError):
    """torch itself does not import in a fresh env (a broken nightly): upstream's break, not
    the machine's, so never retried. ``innermost`` is the innermost error of the import."""

    kind = "upstream"

    def __init__(self, message: str, innermost: str) -> None:
        super().__init__(message)
        self.innermost = innermost


@dataclass(frozen=True)
class TorchEnv:
    """A provisioned PyTorch: the interpreter to use and what torch it imports."""

    spec: str
    source_kind: SourceKind
    python: Path
    version: str
    git_version: str
    env_key: str
    torch_dir: Path  # the directory of the imported `torch` package
    # Prepended to PYTHONPATH for build and test (path: specs put a patched torch first).
    pythonpath: tuple[Path, ...] = ()
    # The exact wheel installed (URL or file URI, sha256); empty for installed and path:.
    artifact_url: str = ""
    artifact_sha256: str = ""
    # What this env sees but must never write: the shared base env a run's private env
    # overlays (``run_env.py``), and for ``installed`` ootci's own site-packages.
    base_dirs: tuple[Path, ...] = ()

    def environ(self) -> dict[str, str]:
        """Environment variables a subprocess needs to see this torch."""
        env: dict[str, str] = {}
        if self.pythonpath:
            env["PYTHONPATH"] = ":".join(str(p) for p in self.pythonpath)
        return env


@dataclass(frozen=True)
class Recipe:
    """A backend's ootci.toml."""

    name: str
    source_dir: Path
    build_command: tuple[str, ...]
    test_command: tuple[str, ...]
    timeout_per_test_s: int = 300
    env: dict[str, str] = field(default_factory=dict)  # [build] env
    test_env: dict[str, str] = field(default_factory=dict)  # [test] env
    # [test] requires (pip requirement strings), else the backend's own `test` extra.
    test_requires: tuple[str, ...] = ()
    # [conformance] device: the device type the conformance suite tests; None = not run.
    conformance_device: str | None = None
    conformance_import: str | None = None  # [conformance] import


@dataclass(frozen=True)
class StepOutcome:
    status: StepStatus  # one of StepStatus.ENDED
    exit_code: int | None
    summary: str = ""
    log_path: Path | None = None


@dataclass(frozen=True)
class TestRecord:
    __test__ = False  # not a pytest class

    nodeid: str
    outcome: Outcome
    duration_s: float | None = None
    message: str | None = None
    details: str | None = None

    @property
    def suite(self) -> str:
        """The contract-suite file a test belongs to (tests/test_memory.py -> test_memory)."""
        path = self.nodeid.split("::", 1)[0]
        return Path(path).stem


@dataclass(frozen=True)
class TestRunOutcome:
    __test__ = False

    step: StepOutcome
    results: tuple[TestRecord, ...]
    # Why the suite could not be run to the end (the step is then errored), else None.
    problem: str | None = None
