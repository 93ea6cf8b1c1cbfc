"""Redis cut through a real TCP proxy while the API queues a run: the request still answers
(the run row is committed and queued, nothing lost), health says the broker is down, and
once Redis is back the sweep's re-dispatch puts exactly that run on the queue."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.commands.runs import get_or_create_backend, stale_run_ids
from service.config import Settings
from service.db import make_engine, session_scope
from service.dispatch import CeleryDispatcher
from service.migrate import upgrade
from tests.support import redis_dbs
from tests.support.tcp_proxy import TcpProxy

REDIS_DB = redis_dbs.BROKER_OUTAGE


@pytest.mark.redis
def test_a_broker_cut_loses_no_run(tmp_path: Path) -> None:
    direct = redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB)
    try:
        direct.ping()
    except redis.ConnectionError:
        pytest.skip("Redis is not reachable at 127.0.0.1:6379")
    direct.delete("ootci")
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    with session_scope(engine) as s:
        get_or_create_backend(s, "faulty", str(tmp_path))
    with TcpProxy("127.0.0.1", 6379) as proxy:
        broker = f"redis://127.0.0.1:{proxy.port}/{REDIS_DB}"
        # The operator's default spec is one API callers may ask for.
        settings = Settings(home=tmp_path / "home", database_url=str(engine.url),
                            broker_url=broker, api_token="t0ken", default_torch="installed")
        dispatcher = CeleryDispatcher(broker)
        app = create_app(settings, dispatcher=dispatcher, engine=engine)
        with TestClient(app) as client:
            proxy.cut()
            started = time.monotonic()
            answer = client.post("/api/runs", json={"backend": "faulty", "torch": "installed"},
                                 headers={"Authorization": "Bearer t0ken"})
            assert answer.status_code == 202, answer.text
            assert time.monotonic() - started < 30  # failing fast, not hanging the request
            run_id = answer.json()["run_id"]
            assert client.get("/healthz").status_code == 503
            assert direct.llen("ootci") == 0

            proxy.restore()
            with session_scope(engine) as s:
                lost = stale_run_ids(s, queued_older_than_s=0)
            assert lost == [run_id]
            for lost_id in lost:
                dispatcher.enqueue_run(lost_id)
    messages = [json.loads(m) for m in direct.lrange("ootci", 0, -1)]
    direct.delete("ootci")
    assert len(messages) == 1
    args = json.loads(base64.b64decode(messages[0]["body"]))[0]
    assert args == [run_id]
