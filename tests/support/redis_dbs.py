"""One Redis database per test file that talks to Redis.

pytest-xdist runs test files side by side: a file that flushes its database, or a Celery
worker consuming from it, must never meet another file's queue there. Redis has 16."""

from __future__ import annotations

POOL_REUSE = 2
WORKER_TASKS = 3
LOG_VIEWS = 4
WORKER_DISTRIBUTION = 5
DISPATCH = 6
OUTBOX_WORKER = 7
LOOP_PRIORITY = 8
TEST_SHARDS = 9
REHEARSAL = 10
LOG_STREAMING = 11
BROKER_OUTAGE = 12
SECRETS_SCRUBBED = 13
SANDBOX_ATTACKS = 14
FORWARDED_HEADERS = 15

_TAKEN = [v for k, v in dict(globals()).items() if k.isupper()]
if len(set(_TAKEN)) != len(_TAKEN) or not all(0 <= db < 16 for db in _TAKEN):
    raise RuntimeError(f"tests/support/redis_dbs.py: numbers must be unique and < 16: {_TAKEN}")


def url(db: int) -> str:
    return f"redis://127.0.0.1:6379/{db}"
