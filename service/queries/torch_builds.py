"""What a run's torch was, exactly: the recorded wheel a ``run:<id>`` spec reinstalls."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.models import Run


@dataclass(frozen=True)
class RecordedTorch:
    run_id: int
    version: str
    git_version: str
    url: str
    sha256: str


class NoRecordedTorch(LookupError):
    """The run does not exist, never provisioned, or its torch was not a wheel; the
    message says which, in one line."""


def recorded_torch(session: Session, run_id: int) -> RecordedTorch:
    run = session.get(Run, run_id)
    if run is None:
        raise NoRecordedTorch(f"run:{run_id}: no run {run_id}")
    build = run.torch_build
    if build is None:
        raise NoRecordedTorch(f"run:{run_id}: run {run_id} ({run.state}) never provisioned a torch")
    if not build.artifact_url or not build.artifact_sha256:
        raise NoRecordedTorch(
            f"run:{run_id}: run {run_id} used torch {build.label} from {build.spec!r}, "
            "which is no recorded wheel (an installed or path: torch, or a run older than "
            "artifact recording)"
        )
    return RecordedTorch(run_id, build.version, build.git_version, build.artifact_url, build.artifact_sha256)
