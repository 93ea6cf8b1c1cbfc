#!/usr/bin/env bash
# Fuzz the live API from its own OpenAPI schema: real uvicorn, a fresh Postgres database
# with a few seeded rows, Redis as the broker (a DB number of its own, flushed after).
# Usage: scripts/schemathesis.sh [extra `st run` options, e.g. --max-examples 50]
# Exit status is schemathesis's: non-zero when any check failed (a 5xx among them).
# Every check runs except allow_header_conformance: Starlette answers a 405 on a path
# served by two routes (GET and POST /api/runs) with the Allow header of the first only.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PY:-$PWD/.venv/bin/python}  # absolute: schemathesis runs from a scratch dir
PG=${OOTCI_TEST_POSTGRES_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/test}
REDIS=${OOTCI_SCHEMATHESIS_REDIS:-redis://127.0.0.1:6379/6}
PORT=${PORT:-$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
DB="ootci_st_$$"
DB_URL="${PG%/*}/$DB"
TOKEN="schemathesis-token"
WORK=$(mktemp -d)

cleanup() {
  [[ -n "${API_PID:-}" ]] && kill "$API_PID" 2>/dev/null && wait "$API_PID" 2>/dev/null || true
  "$PY" - "$PG" "$DB" "$REDIS" <<'PYEOF' || true
import sys, redis
from sqlalchemy import text
from service.db import make_engine
admin = make_engine(sys.argv[1]).execution_options(isolation_level="AUTOCOMMIT")
with admin.connect() as c:
    c.execute(text(f'DROP DATABASE IF EXISTS "{sys.argv[2]}" WITH (FORCE)'))
redis.Redis.from_url(sys.argv[3]).flushdb()
PYEOF
  rm -rf "$WORK"
}
trap cleanup EXIT

"$PY" - "$PG" "$DB" "$DB_URL" <<'PYEOF'
import sys
from sqlalchemy import text
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Breakage, Failure, RunState, SourceKind, Step, StepStatus, TestResult, TorchBuild
from service.commands.runs import create_run, get_or_create_backend

admin = make_engine(sys.argv[1]).execution_options(isolation_level="AUTOCOMMIT")
with admin.connect() as c:
    c.execute(text(f'CREATE DATABASE "{sys.argv[2]}"'))
engine = make_engine(sys.argv[3])
upgrade(engine)
with session_scope(engine) as s:
    backend = get_or_create_backend(s, "torch_openreg", "/srv/openreg")
    build = TorchBuild(spec="pip:torch==2.13.0", source_kind=SourceKind.PIP, version="2.13.0", git_version="a" * 40)
    s.add(build)
    s.flush()
    for i in range(20):
        run = create_run(s, backend, build.spec, trigger="nightly")
        run.torch_build_id = build.id
        run.state = [RunState.PASSED, RunState.FAILED, RunState.QUEUED, RunState.RUNNING][i % 4]
        s.flush()
        step = Step(run_id=run.id, name="build", status=StepStatus.PASSED, duration_s=10.0 + i)
        step.store_log(b"".join(b"line %d\n" % n for n in range(100)))
        s.add(step)
        s.add(TestResult(run_id=run.id, nodeid="tests/test_a.py::test_x", suite="test_a", outcome="passed"))
    brk = Breakage(backend_id=backend.id, fingerprint="f" * 64, fingerprint_version=1, title="seeded", first_seen_run_id=2, last_seen_run_id=2, occurrences=1)
    s.add(brk)
    s.flush()
    s.add(Failure(run_id=2, step_name="build", stage="build", line="error: x", breakage_id=brk.id))
engine.dispose()
PYEOF

OOTCI_HOME="$WORK" OOTCI_DATABASE_URL="$DB_URL" OOTCI_BROKER_URL="$REDIS" \
OOTCI_API_TOKEN="$TOKEN" OOTCI_WEBHOOK_SECRET="schemathesis-secret" \
  "$PY" -m uvicorn service.api.app:app_factory --factory --host 127.0.0.1 --port "$PORT" \
  --log-level warning >"$WORK/api.log" 2>&1 &
API_PID=$!

# From the scratch dir: schemathesis leaves a .schemathesis/ cache in its working directory.
st() {
  (cd "$WORK" && OOTCI_WEBHOOK_SECRET="schemathesis-secret" "$PY" -m schemathesis.cli run \
    "http://127.0.0.1:$PORT/openapi.json" --wait-for-schema 30 "$@")
}
fail() { status=$?; echo "--- api log"; tail -50 "$WORK/api.log"; exit $status; }

echo "=== 1/2: every operation, every check (webhook calls unsigned: they must be refused)"
st --checks all --exclude-checks allow_header_conformance \
  -H "Authorization: Bearer $TOKEN" "$@" || fail

# The webhook again, with hooks that sign each generated delivery (a captured GitHub payload
# with the generated object laid over it), so fuzzing reaches the routing behind the
# signature check. negative_data_rejection is off here: the hook repairs the headers the
# fuzzer generated, which that check then counts as invalid data accepted.
echo "=== 2/2: POST /webhooks/github with signed deliveries"
PYTHONPATH="$REPO/scripts" SCHEMATHESIS_HOOKS=schemathesis_hooks \
  st --include-path /webhooks/github \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  "$@" || fail

# What the signed fuzzing got through to: deliveries recorded, by outcome.
"$PY" - "$DB_URL" <<'PYEOF'
import sys
from sqlalchemy import text
from service.db import make_engine
with make_engine(sys.argv[1]).connect() as conn:
    rows = conn.execute(text("SELECT outcome, count(*) FROM webhook_deliveries GROUP BY outcome ORDER BY 1"))
    print("webhook deliveries recorded:", ", ".join(f"{o} {n}" for o, n in rows) or "none")
PYEOF
