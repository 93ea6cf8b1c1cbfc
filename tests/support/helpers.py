"""Builders for rows the tests need (real models on a real database, no mocks)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.models import Backend, Run, RunState, Step, StepName, StepStatus, utcnow
from tests.support.paths import FIXTURES

LOGS = FIXTURES / "logs"


def fixture_log(name: str) -> bytes:
    """A real log from tests/fixtures/logs without its `# expect:` header block."""
    text = (LOGS / name).read_text()
    return text.split("# ---\n", 1)[1].encode() if "# ---\n" in text else text.encode()


def add_backend(session: Session, name: str = "torch_openreg") -> Backend:
    backend = Backend(name=name, source="/src/" + name, recipe={})
    session.add(backend)
    session.flush()
    return backend


def add_finished_run(
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


class RecordingDispatcher:
    """A Dispatcher (service.dispatch protocol) that only remembers what was enqueued: for
    apps under test whose runs must not execute."""

    def __init__(self) -> None:
        self.enqueued: list[int] = []

    def enqueue_run(self, run_id: int) -> None:
        self.enqueued.append(run_id)

    def check(self) -> None:
        return None

    def close(self) -> None:
        return None
