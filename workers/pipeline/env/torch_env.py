"""A provisioned PyTorch, as every step after provisioning sees it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from service.domain.torch_spec import SourceKind


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

    @property
    def venv_dir(self) -> Path:
        """The venv the interpreter belongs to (``<venv>/bin/python``)."""
        return self.python.parent.parent

    def environ(self) -> dict[str, str]:
        """Environment variables a subprocess needs to see this torch."""
        env: dict[str, str] = {}
        if self.pythonpath:
            env["PYTHONPATH"] = ":".join(str(p) for p in self.pythonpath)
        return env
