"""Small things many tests share: a golden log without its header, a dispatcher that only
records. (Rows of the database: tests/support/factories.py.)"""

from __future__ import annotations

from tests.support.paths import FIXTURES

LOGS = FIXTURES / "logs"


def fixture_log(name: str) -> bytes:
    """A real log from tests/fixtures/logs without its `# expect:` header block."""
    text = (LOGS / name).read_text()
    return text.split("# ---\n", 1)[1].encode() if "# ---\n" in text else text.encode()


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
