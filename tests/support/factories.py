"""Rows the tests need, one factory per aggregate: real models on a real database, flushed
so they have their ids (the caller commits). Keyword arguments not named here go to the
model as they are."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import (
    Backend,
    Breakage,
    Run,
    RunState,
    Step,
    StepName,
    StepStatus,
    TorchBuild,
    utcnow,
)


def make_backend(
    session: Session, name: str = "torch_openreg", source: str | None = None, **fields: Any
) -> Backend:
    """A backend (its source ``/src/<name>`` unless given)."""
    backend = Backend(name=name, source=source if source is not None else "/src/" + name,
                      **fields)
    session.add(backend)
    session.flush()
    return backend


def make_torch_build(
    session: Session, git: str, *, spec: str = "nightly", version: str | None = None,
    **fields: Any,
) -> TorchBuild:
    """The nightly torch build of upstream commit ``git`` (made the first time it is asked
    for; version ``2.14.0.dev+<git[:4]>`` unless given)."""
    build = session.scalar(select(TorchBuild).where(TorchBuild.git_version == git))
    if build is None:
        build = TorchBuild(spec=spec, source_kind=fields.pop("source_kind", "nightly"),
                           version=version or f"2.14.0.dev+{git[:4]}", git_version=git, **fields)
        session.add(build)
        session.flush()
    return build


def make_run(
    session: Session, backend: Backend, *, spec: str = "nightly", git: str | None = None,
    **fields: Any,
) -> Run:
    """A run of ``backend`` on torch ``spec``; with ``git``, on the torch build of that
    upstream commit (``make_torch_build``)."""
    if git is not None:
        fields["torch_build_id"] = make_torch_build(session, git, spec=spec).id
    run = Run(backend_id=backend.id, torch_spec=spec, **fields)
    session.add(run)
    session.flush()
    session.refresh(run)
    return run


def make_finished_run(
    session: Session,
    backend: Backend,
    *,
    spec: str = "nightly",
    sha: str = "b" * 40,
    build_log: bytes | None = None,
) -> Run:
    """A run that got through provisioning; with build_log its build failed with that log."""
    run = Run(backend_id=backend.id, torch_spec=spec, backend_sha=sha, state=RunState.RUNNING,
              started_at=utcnow())
    session.add(run)
    session.flush()
    build = Step(run_id=run.id, name=StepName.BUILD,
                 status=StepStatus.FAILED if build_log is not None else StepStatus.PASSED)
    build.store_log(build_log or b"[1/1] ok\n")
    session.add(build)
    if build_log is None:
        session.add(Step(run_id=run.id, name=StepName.TEST, status=StepStatus.PASSED))
    session.flush()
    session.refresh(run)
    return run


def make_breakage(
    session: Session,
    backend: Backend,
    run: Run | None = None,
    *,
    fingerprint: str | None = None,
    category: str = "upstream",
    subtype: str = "signature-changed",
    title: str = "t",
    **fields: Any,
) -> Breakage:
    """A breakage of ``backend``; with ``run``, first and last seen there, once (and its
    fingerprint ``fp<run id>`` unless given)."""
    if run is not None:
        fields = {"first_seen_run_id": run.id, "last_seen_run_id": run.id, "occurrences": 1,
                  **fields}
    breakage = Breakage(
        backend_id=backend.id,
        fingerprint=fingerprint or (f"fp{run.id}" if run is not None else "f"),
        fingerprint_version=fields.pop("fingerprint_version", 1),
        category=category, subtype=subtype, title=title, **fields,
    )
    session.add(breakage)
    session.flush()
    return breakage
