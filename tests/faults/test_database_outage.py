"""The database cut for 30 s mid-build, through a real TCP proxy in front of Postgres: the
run still finishes with the right verdict (the lease is renewed on its own timer, the log
reader never touches the database, the step row waits for the database to come back);
meanwhile every CLI command answers one line and exit 2, and the API 503 + Retry-After."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import make_url

from service.api.app import create_app
from service.config import Settings
from service.db import make_engine, session_scope
from service.migrate import upgrade
from service.models import Run, Step
from tests.support.faults import (
    let_build_finish,
    ootci,
    pids_with,
    start_ootci,
    write_fault_backend,
)
from tests.support.helpers import RecordingDispatcher
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_until

OUTAGE_S = 30.0


@pytest.mark.postgres
def test_a_30_s_database_cut_mid_build_keeps_the_verdict(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    marker = f"ootci-fault-{uuid.uuid4().hex}"
    backend = write_fault_backend(tmp_path / "faulty", marker)
    home = tmp_path / "home"
    direct = make_engine(fresh_postgres_url)
    upgrade(direct)
    url = make_url(fresh_postgres_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        env = {"OOTCI_DATABASE_URL": proxied, "OOTCI_RUN_LEASE_S": "60"}
        runner = start_ootci(home, "run", "--torch", "installed", "--backend", str(backend),
                             log=tmp_path / "run.log", **env)
        try:
            wait_until(lambda: len(pids_with(marker)) >= 2, 120, "the build")
            proxy.cut()
            cut_at = time.monotonic()
            # The build prints ~50 KB/s through the outage and ends inside it: its step row
            # can only be closed once the database is back.
            timer = threading.Timer(OUTAGE_S - 5, let_build_finish, args=(backend, 2000))
            timer.start()

            listing = ootci(home, "runs", **env)
            assert listing.returncode == 2
            assert len(listing.stderr.strip().splitlines()) == 1, listing.stderr
            assert "database" in listing.stderr

            app = create_app(Settings(home=home, database_url=proxied),
                             dispatcher=RecordingDispatcher(), engine=make_engine(proxied))
            with TestClient(app) as client:
                answer = client.get("/api/runs")
            assert answer.status_code == 503
            assert int(answer.headers["Retry-After"]) > 0

            time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - cut_at)))
            assert runner.poll() is None, "ootci run gave up during the outage"
            proxy.restore()
            timer.join()
            assert runner.wait(180) == 0, (tmp_path / "run.log").read_text()[-3000:]
        finally:
            if runner.poll() is None:
                runner.kill()
    with session_scope(direct) as s:
        run = s.scalars(select(Run)).one()
        assert (run.state, run.attempts, run.error) == ("passed", 1, None)
        build = s.scalars(select(Step).where(Step.name == "build")).one()
        assert build.status == "passed"
        log = build.read_log().decode()
        # Nothing blocked: every line the build printed during the outage is in its log.
        assert "built" in log and log.count("\nline ") == 2000
    direct.dispose()
