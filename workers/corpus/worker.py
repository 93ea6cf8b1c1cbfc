"""``python -m workers.corpus.worker RUN_ID``: execute one queued run in this interpreter.

The corpus runner starts this under a mutant's isolated interpreter (see
``workers.corpus.interpreter``) so that the pipeline's "installed interpreter" is that one.
Settings come from the environment (OOTCI_DATABASE_URL, OOTCI_CACHE_DIR, ...). Progress goes
to stdout as one JSON object per line: {"kind": "step"|"line"|"done", ...}.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import IO

from service.config import get_settings
from service.db import make_engine
from workers.pipeline.execute import RunEvent, execute_run

# Builds of one backend tree must not overlap (setuptools writes build/ and egg-info in the
# tree); engineers building the bundled backend by hand take this same lock.
BUILD_LOCK = Path(os.environ.get("OOTCI_BACKEND_BUILD_LOCK", "/tmp/openreg-build.lock"))


class _Emitter:
    """Prints events and holds BUILD_LOCK exactly while the build step runs."""

    def __init__(self) -> None:
        self._lock: IO[str] | None = None

    def __call__(self, event: RunEvent) -> None:
        if event.kind == "step" and event.step == "build":
            if event.status == "running" and self._lock is None:
                self._lock = BUILD_LOCK.open("a")
                fcntl.flock(self._lock, fcntl.LOCK_EX)
            elif event.status != "running":
                self.release()
        if event.kind == "line":
            return  # build/test output stays in the step logs; progress shows steps only
        print(json.dumps({"kind": event.kind, "step": event.step, "status": event.status,
                          "text": event.text[:500]}), flush=True)

    def release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m workers.corpus.worker RUN_ID", file=sys.stderr)
        return 2
    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)
    emit = _Emitter()
    try:
        state = execute_run(engine, settings, int(argv[1]),
                            f"corpus:{socket.gethostname()}:{os.getpid()}", on_event=emit)
    finally:
        emit.release()
        engine.dispose()
    print(json.dumps({"kind": "done", "step": "", "status": state or "not-claimed",
                      "text": ""}), flush=True)
    return 0 if state is not None else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
