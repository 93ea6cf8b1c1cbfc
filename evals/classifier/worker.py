"""``python -m evals.classifier.worker RUN_ID``: execute one queued run in this interpreter.

The corpus runner starts this under a mutant's isolated interpreter (see
``evals.classifier.interpreter``) so that the pipeline's "installed interpreter" is that one.
Settings come from the environment (OOTCI_DATABASE_URL, OOTCI_CACHE_DIR, ...). Progress goes
to stdout as one JSON object per line: {"kind": "step"|"done", ...}. The backend it builds is
the corpus run's private snapshot, so no lock on the real backend tree is needed.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from service.config import get_settings
from service.db import make_engine
from workers.pipeline.execute import execute_run
from workers.pipeline.run_context import RunEvent


def _emit(event: RunEvent) -> None:
    if event.kind == "line":
        return  # build/test output stays in the step logs; progress shows steps only
    print(json.dumps({"kind": event.kind, "step": event.step, "status": event.status,
                      "text": event.text[:500]}), flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m evals.classifier.worker RUN_ID", file=sys.stderr)
        return 2
    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)
    # Corpus builds share two cores with everyone's work: let theirs go first.
    os.nice(int(os.environ.get("OOTCI_CORPUS_NICE", "10")))
    try:
        state = execute_run(engine, settings, int(argv[1]),
                            f"corpus:{socket.gethostname()}:{os.getpid()}", on_event=_emit)
    finally:
        engine.dispose()
    print(json.dumps({"kind": "done", "step": "", "status": state or "not-claimed",
                      "text": ""}), flush=True)
    return 0 if state is not None else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
