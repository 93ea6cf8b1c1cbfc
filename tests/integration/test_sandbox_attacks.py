"""A backend that attacks the worker (tests/fixtures/backends/hostile) through the real
pipeline, on SQLite and Postgres: no secret of the worker reaches its build or tests or
anything stored or served about the run, and each sandbox limit stops its attack with a
verdict that names it, without hanging the worker.

The worker's environment holds ootci's secrets the way a deployment's does; its HOME holds
a .netrc; a listener on the host's loopback waits for a connection that must not come.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.dispatch import CeleryDispatcher, InProcessDispatcher
from service.migrate import upgrade
from service.models import Base, Failure, Run, TestResult
from tests.support import redis_dbs
from tests.support.processes import Processes, celery_worker
from tests.support.pyonly import write_pyonly_backend
from tests.support.waiting import empty_broker, wait_until
from workers.pipeline.execute import execute_run
from workers.pipeline.isolation import sandbox

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "backends" / "hostile"
SECRETS = {
    "OOTCI_DATABASE_URL": "postgresql+psycopg://ootci:Db-Pa55w0rd-x7@db.internal:5432/ootci",
    "OOTCI_BROKER_URL": "redis://:Br0ker-Pa55-q2@redis.internal:6379/0",
    "OOTCI_API_TOKEN": "api-token-4f9c2e7d1b",
    "OOTCI_WEBHOOK_SECRET": "webhook-secret-8a1d5e",
    "OOTCI_GITHUB_TOKEN": "ghp_hostileTestToken0123456789",
}
NETRC_PASSWORD = "netrc-Pa55-worker-9z"
# What must never appear: each whole secret and each password inside a URL.
NEEDLES = [
    *SECRETS.values(), "Db-Pa55w0rd-x7", "Br0ker-Pa55-q2", NETRC_PASSWORD,
]


class _Listener:
    """A TCP listener on the host's loopback that records whoever connects."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """pytest's tmp dirs are 0700 under root: the sandbox uid could not read the backend.
    KEEP_HOSTILE=1 keeps it for a look after a failure."""
    base = Path(tempfile.mkdtemp(prefix="ootci-hostile-"))
    base.chmod(0o755)
    yield base
    if not os.environ.get("KEEP_HOSTILE"):
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(_victim_dir(base), ignore_errors=True)


def _victim_dir(root: Path) -> Path:
    """Another registered backend's tree, outside /tmp (a sealed step's /tmp is its own):
    where the hostile build sees it, read-only."""
    return Path("/var/tmp") / f"ootci-victim-{root.name}"


ESCAPES = ["another backend's tree", "ootci's site-packages", "/etc/cron.d", "ootci's database",
           "/root", "/proc/1/environ", "the parent's environ", "disk outside the run"]
DB_FILE_SECRET = "db-file-secret-5k2"


def _daemon_marker(port: int) -> str:
    return f"hostile-daemon-{port}"


def _hostile_backend(root: Path, worker_home: Path, port: int, ootci_home: Path) -> Path:
    """The hostile tree, told where everything it must not reach is: the worker's HOME,
    the host's listener, another registered backend's tree, ootci's own site-packages and
    a database file under ootci's home."""
    backend = root / "hostile"
    shutil.copytree(HOSTILE, backend)
    victim = write_pyonly_backend(_victim_dir(root), {"test_ok.py": "def test_ok():\n    pass\n"})
    (victim / "ootci.toml").chmod(0o666)  # only the read-only mount stops the write
    ootci_home.mkdir(parents=True, exist_ok=True)
    (ootci_home / "ootci.db").write_text(DB_FILE_SECRET)
    recipe = (backend / "ootci.toml").read_text()
    env = (f'env = {{ WORKER_HOME = "{worker_home}", LISTENER_PORT = "{port}", '
           f'VICTIM_TREE = "{victim}", ESCAPE_SITE = "{sysconfig.get_paths()["purelib"]}", '
           f'ESCAPE_DB_FILE = "{ootci_home / "ootci.db"}", '
           f'DAEMON_MARKER = "{_daemon_marker(port)}" }}\n')
    recipe = recipe.replace('command = ["{python}", "attack_build.py"]\n',
                            f'command = ["{{python}}", "attack_build.py"]\n{env}')
    recipe = recipe.replace("timeout_per_test = 60\n", f"timeout_per_test = 60\n{env}")
    (backend / "ootci.toml").write_text(recipe)
    return backend


def _everything_stored(engine: Engine) -> str:
    """Every row of every table, as text (compressed logs are checked decompressed apart)."""
    with engine.connect() as conn:
        return "\n".join(
            repr(tuple(row)) for table in Base.metadata.sorted_tables
            for row in conn.execute(select(table))
        )


def test_hostile_backend_is_contained(
    db_url: str, world_readable_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    support = sandbox.probe(65534)
    if not (support.rlimits and support.root and support.bwrap and support.setpriv):
        pytest.skip(f"needs root and a working bwrap for the full sandbox: {support.describe()}")
    worker_home = world_readable_dir / "worker-home"
    worker_home.mkdir()
    netrc = worker_home / ".netrc"
    netrc.write_text(f"machine github.com login ootci password {NETRC_PASSWORD}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(worker_home))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    listener = _Listener()
    backend = _hostile_backend(world_readable_dir, worker_home, listener.port,
                               world_readable_dir / "ootci-home")
    engine = make_engine(db_url)
    upgrade(engine)
    settings = Settings(
        home=world_readable_dir / "ootci-home",
        database_url=db_url,
        broker_url="",
        api_token=SECRETS["OOTCI_API_TOKEN"],
        webhook_secret=SECRETS["OOTCI_WEBHOOK_SECRET"],
        github_token=SECRETS["OOTCI_GITHUB_TOKEN"],
        default_torch="installed",
        rerun_failed_tests=False,
        sandbox_max_processes=64,
        sandbox_file_size_mb=16,
        sandbox_cpu_time_s=8,
        run_disk_budget_mb=64,
    )
    with session_scope(engine) as s:
        get_or_create_backend(s, "victim", str(_victim_dir(world_readable_dir)))
        run_id = create_run(
            s, get_or_create_backend(s, "hostile", str(backend)), "installed", trigger="api"
        ).id

    outcome: list[str | None] = []
    worker = threading.Thread(
        target=lambda: outcome.append(execute_run(engine, settings, run_id, "w1")), daemon=True
    )
    started = time.monotonic()
    worker.start()
    worker.join(timeout=600)
    listener.close()
    assert not worker.is_alive(), "the worker hung on the hostile backend"
    elapsed = time.monotonic() - started

    assert outcome == ["failed"], outcome
    _assert_contained(engine, settings, run_id, listener, elapsed)
    engine.dispose()


def _assert_contained(
    engine: Engine, settings: Settings, run_id: int, listener: _Listener, elapsed: float,
    extra_needles: list[str] | None = None,
) -> None:
    """What a contained hostile run looks like, however it was executed."""
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        logs = {st.name: st.read_log().decode() for st in run.steps}
        results = {
            r.nodeid.rsplit("::", 1)[-1]: r
            for r in s.scalars(select(TestResult).where(TestResult.run_id == run_id))
        }
        failures = {
            (f.nodeid or "").rsplit("::", 1)[-1]: f
            for f in s.scalars(select(Failure).where(Failure.run_id == run_id))
        }
        state, error = run.state, run.error
    assert state == "failed", (state, error, logs.get("test", "")[-3000:])
    assert results, logs.get("test", "")[-3000:]

    # The sandbox said what it is.
    assert "ootci: sandbox: rlimits" in logs["build"]
    assert "netns via bwrap (no network)" in logs["test"] and "uid 65534" in logs["test"]

    # Secrets: the build printed its whole environment and every /proc environ it could
    # read, and tried the worker's .netrc; none of it got there (not merely masked: no
    # mask in the log either).
    assert "== build: done" in logs["build"]
    assert "env HOME=" in logs["build"] and "OOTCI_" not in _env_lines(logs["build"])
    # Both tries (before and after trying to unmount what hides it) were refused.
    assert logs["build"].count("blocked:") == 3
    # The build, sealed: read-only everywhere but the run's dirs, its own pid namespace,
    # no network, never root. Every escape was denied, and nothing it aimed at changed.
    build_log = logs["build"]
    assert "netns via bwrap (no network)" in build_log and "uid 65534" in build_log
    for escape in ESCAPES:
        assert f"\n{escape}: denied (" in build_log, (escape, build_log[-4000:])
    assert "another backend's tree: denied ('Read-only file system')" in build_log
    assert ": ESCAPED" not in build_log, build_log[-4000:]
    assert DB_FILE_SECRET not in build_log
    victim = _victim_dir(settings.home.parent)
    assert "hostile" not in (victim / "ootci.toml").read_text()
    assert not Path(sysconfig.get_paths()["purelib"], "zz_hostile.pth").exists()
    assert not Path("/etc/cron.d/ootci-hostile").exists()
    assert not Path("/var/tmp/hostile-fill").exists()
    # The setsid daemon it started went with the build's pid namespace.
    port = int(re.search(r"LISTENER_PORT=(\d+)", build_log).group(1))  # type: ignore[union-attr]
    daemons = subprocess.run(["pgrep", "-f", _daemon_marker(port)], capture_output=True,
                             text=True).stdout.split()
    assert daemons == [], daemons
    for text in logs.values():
        assert "***" not in text
    assert results["test_a_print_environment"].outcome == "failed"
    assert results["test_b_read_worker_netrc"].outcome == "failed"

    # The torch env is read-only to the tests.
    env_write = results["test_c_write_into_torch_env"]
    assert env_write.outcome == "failed"
    assert "Read-only file system" in (env_write.message or "")
    assert not list((settings.resolved_cache_dir / "envs").glob("*/lib/*/site-packages/hostile*"))

    # Each limit stopped its attack, with a verdict naming it.
    fork = results["test_d_fork_bomb"]
    assert fork.outcome == "failed" and "Resource temporarily unavailable" in (fork.message or "")
    assert results["test_e_network"].outcome == "failed" and listener.connections == 0
    huge = results["test_f_one_huge_file"]
    assert huge.outcome == "failed" and "File too large" in (huge.message or "")
    cpu = results["test_g_burn_cpu"]
    assert cpu.outcome == "failed" and "SIGXCPU" in (cpu.message or "")
    fill = results["test_z_fill_disk"]
    assert fill.outcome == "failed" and "disk budget of 64 MB" in (fill.message or "")
    for test, rule in [
        ("test_d_fork_bomb", "sandbox-process-limit"),
        ("test_f_one_huge_file", "sandbox-file-size"),
        ("test_g_burn_cpu", "sandbox-cpu-time"),
        ("test_z_fill_disk", "sandbox-disk-budget"),
    ]:
        assert (failures[test].category, failures[test].rule) == ("backend", rule), test
    # The disk fill was stopped near its budget, not at its own 1 GB bound.
    assert elapsed < 300

    # Nothing stored or served holds a secret.
    stored = _everything_stored(engine) + "\n".join(logs.values())
    with TestClient(create_app(settings, dispatcher=InProcessDispatcher(lambda _: None),
                               engine=engine)) as client:
        headers = {"Authorization": f"Bearer {SECRETS['OOTCI_API_TOKEN']}"}
        served = [client.get(f"/api/runs/{run_id}", headers=headers).text,
                  client.get(f"/api/runs/{run_id}/tests", headers=headers).text]
        served += [client.get(f"/api/runs/{run_id}/steps/{name}/log").text for name in logs]
    assert f'"id":{run_id}' in served[0]
    for needle in [*NEEDLES, *(extra_needles or [])]:
        assert needle not in stored, needle
        for page in served:
            assert needle not in page, needle


def _env_lines(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if line.startswith("env "))


TAMPERER = Path(__file__).resolve().parents[1] / "fixtures" / "backends" / "tamperer"
VICTIM_TEST = """\
import os

import torch


def test_torch_is_as_published():
    assert not getattr(torch, "TAMPERED", False), torch.__file__
    assert "TAMPER_MARKER" not in os.environ
"""


def _run(engine: Engine, settings: Settings, name: str, source: Path, spec: str) -> int:
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, name, str(source)), spec, trigger="api").id
    execute_run(engine, settings, run_id, "w1")
    return run_id


@pytest.mark.slow
@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no-sandbox"])
def test_a_backend_that_writes_into_the_torch_env_cannot_reach_the_next_one(
    sandboxed: bool, world_readable_dir: Path
) -> None:
    """The tamperer's build and tests write a marker .pth into every site-packages they see
    and rewrite torch/__init__.py; the next backend on the same torch sees neither. In the
    sandbox the shared env is mounted read-only (the writes fail); without it (a root
    worker writes through any mode), the manifest check finds the change and rebuilds."""
    if sandboxed:
        support = sandbox.probe(65534)
        if not (support.root and support.bwrap):
            pytest.skip(f"needs root and a working bwrap: {support.describe()}")
    from tests.support.fake_torch import build_wheel

    wheel = build_wheel(world_readable_dir / "wheels", "2.14.0.dev20261126+cpu", "a" * 40, {})
    spec = f"wheel:{wheel}"
    tamperer = world_readable_dir / "tamperer"
    shutil.copytree(TAMPERER, tamperer)
    victim = write_pyonly_backend(world_readable_dir / "victim", {"test_clean.py": VICTIM_TEST})
    engine = make_engine(f"sqlite:///{world_readable_dir / 'ootci.db'}")
    upgrade(engine)
    settings = Settings(home=world_readable_dir / "ootci-home", database_url="", broker_url="",
                        sandbox=sandboxed, rerun_failed_tests=False)

    first = _run(engine, settings, "tamperer", tamperer, spec)
    second = _run(engine, settings, "victim", victim, spec)
    with Session(engine) as s:
        runs = {rid: s.get_one(Run, rid) for rid in (first, second)}
        logs = {rid: {st.name: st.read_log().decode() for st in run.steps}
                for rid, run in runs.items()}
        victim_results = list(s.scalars(select(TestResult).where(TestResult.run_id == second)))
        states = {rid: (run.state, run.error) for rid, run in runs.items()}
    tampering = logs[first]["build"] + logs[first]["test"]
    # The tamperer could write its own private env, never the shared one.
    assert "build: wrote" in tampering, tampering[-3000:]
    private = str(settings.resolved_work_dir / "runs" / str(first) / "env")
    shared = str(settings.resolved_cache_dir / "envs")
    wrote = [line for line in tampering.splitlines() if ": wrote " in line]
    if sandboxed:
        assert all(private in line for line in wrote), wrote
        assert "blocked:" in tampering and "Read-only file system" in tampering
        assert "reusing env" in logs[second]["provision"]
    else:
        assert any(shared in line for line in wrote), wrote
        assert "changed since it was made, rebuilding it" in logs[second]["provision"]
    # The victim's run: green, no marker anywhere, its torch as published.
    assert states[second] == ("passed", None), (states[second], logs[second])
    assert [r.outcome for r in victim_results] == ["passed"]
    for text in logs[second].values():
        assert "TAMPER-MARKER" not in text
    assert not list(Path(shared).glob("*/lib/*/site-packages/zz_tamper_*.pth"))
    engine.dispose()


CELERY_REDIS_URL = redis_dbs.url(redis_dbs.SANDBOX_ATTACKS)


def test_hostile_backend_is_contained_under_a_celery_worker(
    fresh_postgres_url: str, world_readable_dir: Path
) -> None:
    """The production shape: a Celery worker process whose environment holds the
    deployment's secrets (its database URL with a password in it) executes the hostile run
    it took from Redis; the same containment holds."""
    support = sandbox.probe(65534)
    if not (support.rlimits and support.root and support.bwrap and support.setpriv):
        pytest.skip(f"needs root and a working bwrap for the full sandbox: {support.describe()}")
    broker = empty_broker(CELERY_REDIS_URL)
    worker_home = world_readable_dir / "worker-home"
    worker_home.mkdir()
    (worker_home / ".netrc").write_text(f"machine github.com login ootci password {NETRC_PASSWORD}\n")
    (worker_home / ".netrc").chmod(0o600)
    listener = _Listener()
    home = world_readable_dir / "ootci-home"
    backend = _hostile_backend(world_readable_dir, worker_home, listener.port, home)
    # Postgres trusts loopback, so the password is never checked, but it is in the URL the
    # worker holds: exactly what a build must not see.
    db_url = fresh_postgres_url.replace("postgres@", "postgres:Db-Pa55w0rd-x7@", 1)
    worker_env = {
        **os.environ,
        **SECRETS,
        "HOME": str(worker_home),
        "OOTCI_HOME": str(home),
        "OOTCI_DATABASE_URL": db_url,
        "OOTCI_BROKER_URL": CELERY_REDIS_URL,
        "OOTCI_DEFAULT_TORCH": "installed",
        "OOTCI_RERUN_FAILED_TESTS": "false",
        "OOTCI_SANDBOX_MAX_PROCESSES": "64",
        "OOTCI_SANDBOX_FILE_SIZE_MB": "16",
        "OOTCI_SANDBOX_CPU_TIME_S": "8",
        "OOTCI_RUN_DISK_BUDGET_MB": "64",
        "PYTHONUNBUFFERED": "1",
    }
    engine = make_engine(db_url)
    upgrade(engine)
    with session_scope(engine) as s:
        run_id = create_run(
            s, get_or_create_backend(s, "hostile", str(backend)), "installed", trigger="api"
        ).id
    worker_log = world_readable_dir / "worker.log"
    processes = Processes(world_readable_dir)
    try:
        worker = processes.start("worker", celery_worker("hostile", loglevel=None), worker_env)
        started = time.monotonic()
        dispatcher = CeleryDispatcher(CELERY_REDIS_URL)
        dispatcher.enqueue_run(run_id)
        dispatcher.close()

        def finished() -> str | None:
            with Session(engine) as s:
                state = s.get_one(Run, run_id).state
            if state in ("failed", "passed", "errored"):
                return state
            assert worker.poll() is None, worker_log.read_text()[-3000:]
            return None

        state = wait_until(finished, 600, lambda: f"run {run_id} to finish\n{processes.tail(3000)}",
                           every=1)
        elapsed = time.monotonic() - started
    finally:
        processes.kill()
        listener.close()
        broker.flushdb()
    assert state == "failed", (state, worker_log.read_text()[-3000:])
    settings = Settings(
        home=home, database_url=db_url, broker_url="",
        api_token=SECRETS["OOTCI_API_TOKEN"], webhook_secret=SECRETS["OOTCI_WEBHOOK_SECRET"],
    )
    _assert_contained(engine, settings, run_id, listener, elapsed, extra_needles=[db_url])
    engine.dispose()


LEAKY_TESTS = f'''\
import pytest


def test_leaks_the_api_token():
    assert False, "the token {SECRETS["OOTCI_API_TOKEN"]} reached this test"


def test_leaks_a_database_url():
    print("captured: webhook {SECRETS["OOTCI_WEBHOOK_SECRET"]}")
    raise ConnectionError("no route to {SECRETS["OOTCI_DATABASE_URL"]}")


@pytest.mark.parametrize("token", ["{SECRETS["OOTCI_GITHUB_TOKEN"]}"])
def test_leaks_in_its_node_id(token):
    assert token == "", "{NETRC_PASSWORD}"
'''


def test_a_secret_a_test_reached_is_masked_wherever_it_is_stored_or_served(
    db_url: str, world_readable_dir: Path
) -> None:
    """The tests of a backend fail with ootci's secrets in their messages, output and node
    ids (however they got them): the storage mask (service/models/masked.py) hides each
    one in every row written about the run, its breakage, the PR comment and the commit
    status, so no page or API answer serves one."""
    from service.commands import breakages, culprits, outbox
    from service.github.reporter import drain_with_settings
    from service.models import Breakage, OutboxKind, OutboxMessage
    from tests.support.pyonly import write_pyonly_backend

    backend = write_pyonly_backend(world_readable_dir / "leaky", {"test_leaky.py": LEAKY_TESTS})
    engine = make_engine(db_url)
    upgrade(engine)
    settings = Settings(
        home=world_readable_dir / "ootci-home", database_url=db_url, broker_url="",
        api_token=SECRETS["OOTCI_API_TOKEN"], webhook_secret=SECRETS["OOTCI_WEBHOOK_SECRET"],
        github_token=SECRETS["OOTCI_GITHUB_TOKEN"], default_torch="installed",
        rerun_failed_tests=False, sandbox=False, isolate=False,
    )
    # The .netrc password is a secret this worker holds outside its settings.
    from service import secrets
    secrets.remember(NETRC_PASSWORD)
    run_id = _run(engine, settings, "leaky", backend, "installed")

    with session_scope(engine) as s:
        run = s.get_one(Run, run_id)
        failures = list(s.scalars(select(Failure).where(Failure.run_id == run_id)))
        assert len(failures) == 3, [(f.nodeid, f.line) for f in failures]
        # The writers as the pipeline and the drain call them, with text straight from the
        # run (these objects are unmasked in memory: only what is written is masked).
        failures[0].line = f"raw line {SECRETS['OOTCI_API_TOKEN']}"
        [breakage] = breakages.record_occurrences(s, run, failures[:1])
        breakage.title = f"title {SECRETS['OOTCI_GITHUB_TOKEN']}"
        breakage.category = "upstream"  # as triage would have it: a PR is blamed for it
        breakage_id = breakage.id
        culprits.store_suspects(
            s, breakage,
            [{"sha": "c" * 40, "pr": 4242, "title": f"PR {SECRETS['OOTCI_WEBHOOK_SECRET']}",
              "score": 0.9, "reasons": [f"touches {NETRC_PASSWORD}"]}],
            "ranked", repo="pytorch/pytorch", min_score=0.5,
        )
        outbox.enqueue(
            s, kind=OutboxKind.STATUS, target="d" * 40, dedupe_key=f"status-{run_id}",
            payload={"sha": "d" * 40, "state": "failure", "context": "ootci",
                     "description": f"failed: {SECRETS['OOTCI_API_TOKEN']} "
                                    f"{SECRETS['OOTCI_DATABASE_URL']}"},
        )
    # A dry run (no token): the PR comment's body and the status are stored as they would
    # have been posted.
    dry = settings.model_copy(update={"github_token": SecretStr("")})
    drain_with_settings(dry, lambda: Session(engine))
    with Session(engine) as s:
        sent = {m.kind: m for m in s.scalars(select(OutboxMessage))}
        assert sent[OutboxKind.PR_REPORT].result.get("body"), sent[OutboxKind.PR_REPORT].result
        assert "***" in sent[OutboxKind.PR_REPORT].result["body"]
        assert "failed: ***" in sent[OutboxKind.STATUS].result["description"]
        assert s.get_one(Breakage, breakage_id).title == "title ***"
        messages = {r.nodeid: r.message for r in
                    s.scalars(select(TestResult).where(TestResult.run_id == run_id))}
    # Masked, not dropped: what the test said is still there around the mask.
    assert any("the token *** reached this test" in (m or "") for m in messages.values()), messages
    assert any(n.endswith("test_leaks_in_its_node_id[***]") for n in messages), messages

    stored = _everything_stored(engine)
    with TestClient(create_app(settings, dispatcher=InProcessDispatcher(lambda _: None),
                               engine=engine)) as client:
        served = {url: client.get(url).text for url in (
            f"/api/runs/{run_id}", f"/api/runs/{run_id}/tests", f"/runs/{run_id}", "/",
            "/api/matrix", "/search?q=leaks", f"/breakages/{breakage_id}",
            f"/api/breakages/{breakage_id}",
        )}
    assert "test_leaks_the_api_token" in served[f"/runs/{run_id}"]
    assert "test_leaks" in served["/search?q=leaks"]
    for needle in [*NEEDLES, db_password(db_url)]:
        if not needle:
            continue
        assert needle not in stored, needle
        for url, page in served.items():
            assert needle not in page, (needle, url)
    engine.dispose()


def db_password(url: str) -> str:
    from service.domain.redaction import url_password

    return url_password(url) or ""


LEGIT = Path(__file__).resolve().parents[1] / "fixtures" / "backends" / "legit"


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no-sandbox"])
def test_an_honest_backend_passes_the_same_sealed_or_not(
    sandboxed: bool, world_readable_dir: Path
) -> None:
    """tests/fixtures/backends/legit does what honest suites do (queues and semaphores for
    fork, spawn and forkserver, a shared-memory tensor, a DataLoader with workers, loopback
    TCP and a gloo group, /proc/self, $HOME and $TMPDIR): sealed, every test passes as it
    does without the sandbox."""
    if sandboxed:
        support = sandbox.probe(65534)
        if not (support.bwrap and (support.setpriv or not support.root)):
            pytest.skip(f"needs a working bwrap and an unprivileged uid: {support.describe()}")
    legit = world_readable_dir / "legit"
    shutil.copytree(LEGIT, legit)
    engine = make_engine(f"sqlite:///{world_readable_dir / 'ootci.db'}")
    upgrade(engine)
    settings = Settings(home=world_readable_dir / "ootci-home", database_url="", broker_url="",
                        sandbox=sandboxed, rerun_failed_tests=False, test_processes=1,
                        default_torch="installed")
    run_id = _run(engine, settings, "legit", legit, "installed")
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        logs = {st.name: st.read_log().decode() for st in run.steps}
        state = (run.state, run.error)
        outcomes = {r.nodeid.rsplit("::", 1)[-1]: r.outcome
                    for r in s.scalars(select(TestResult).where(TestResult.run_id == run_id))}
    engine.dispose()
    assert state == ("passed", None), (state, logs.get("test", "")[-3000:])
    assert "legit: built" in logs["build"]
    assert sorted(outcomes) == sorted([
        *(f"test_a_queue_and_a_semaphore_per_start_method[{m}]"
          for m in ("fork", "spawn", "forkserver")),
        "test_a_shared_memory_tensor_is_seen_by_a_child", "test_a_dataloader_with_two_workers",
        "test_loopback_tcp_server_and_client", "test_a_gloo_process_group_of_two_over_loopback",
        "test_reads_its_own_proc_status", "test_writes_home_and_tmpdir",
    ])
    assert set(outcomes.values()) == {"passed"}, outcomes
    if sandboxed:  # sealed indeed: no network, the sandbox uid, in build and tests alike
        for step in ("build", "test"):
            assert "netns via bwrap (no network)" in logs[step], logs[step][:2000]
            assert ("uid 65534" in logs[step]) == sandbox.probe(65534).root
    else:
        assert "ootci: sandbox: off" in logs["test"]
