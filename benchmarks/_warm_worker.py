"""A run in a process that has run one before: the shape of a fleet's Celery worker, which
imports ootci, opens its database and checks the sandbox once, then runs backend after
backend. ``overhead.py --worker`` starts it; each line on stdin asks for one run of the
backend dir given as argv[1] against ``installed``, each line on stdout answers with the
run's state and its steps' seconds (JSON).

What a worker does per run, and only that: the row (as ``dispatch`` makes it), then
``execute_run``. The CLI's start-up (the interpreter, ootci's imports, the sandbox probe,
the migration check) is paid once, before the first request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.cli.common import migrated_engine, sealed_or_die  # noqa: E402
from service.commands.backends import register_backend  # noqa: E402
from service.commands.runs import create_run  # noqa: E402
from service.config import get_settings  # noqa: E402
from service.db import session_scope  # noqa: E402
from service.documents import run_detail  # noqa: E402
from workers.pipeline.execute import execute_run  # noqa: E402
from workers.pipeline.steps.recipe import load_recipe  # noqa: E402


def main() -> None:
    backend = Path(sys.argv[1]).resolve()
    settings = sealed_or_die(get_settings())
    engine = migrated_engine(settings)
    name = load_recipe(backend).name
    print("ready", flush=True)
    for _ in sys.stdin:
        with session_scope(engine) as s:
            be = register_backend(s, name, str(backend), changed_by="benchmark", re_register=True)
            run_id = create_run(s, be, "installed", trigger="cli").id
        state = execute_run(engine, settings, run_id, "benchmark-worker")
        with session_scope(engine) as s:
            detail = run_detail(s, run_id)
            assert detail is not None
            steps = {step.name: float(step.duration_s or 0.0) for step in detail.steps}
        print(json.dumps({"state": state, "steps": steps}), flush=True)


if __name__ == "__main__":
    main()
