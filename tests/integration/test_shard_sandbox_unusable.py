"""A worker that cannot seal a shard's tests (its bwrap is broken: ``/bin/false`` here, a
real binary that refuses) hands the shard back at once, saying why, instead of failing
the task and holding the shard until its lease runs out; the run's owner then runs it.
(``workers/pipeline/testrun/shards.py:execute_shard``.)"""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import Engine

from service.commands.runs import claim_run, create_run, get_or_create_backend
from service.commands.shards import claim_shard, create_shards, shards_of
from service.config import Settings
from service.db import session_scope
from service.models import ShardState
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.cache.layout import run_dir
from workers.pipeline.testrun.shards import execute_shard

LEASE_S = 3600  # nothing here may wait for a lease to run out


def _artefact(backend: Path, build: Path) -> dict[str, object]:
    return {
        "source_dir": str(backend),
        "build_dir": str(build),
        "env": {
            "spec": "installed", "source_kind": "installed", "python": sys.executable,
            "version": "0", "git_version": None, "env_key": "installed",
            "torch_dir": str(build), "pythonpath": [], "artifact_url": None,
            "artifact_sha256": None, "base_dirs": [],
        },
    }


def test_a_worker_that_cannot_seal_a_shard_hands_it_back_at_once(
    engine: Engine, tmp_path: Path,
) -> None:
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_a.py": "def test_a():\n    pass\n"})
    build = tmp_path / "build"
    build.mkdir()
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), bwrap="/bin/false",
                        run_lease_s=LEASE_S)
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "pyonly", str(backend)), "installed",
                            trigger="cli").id
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "owner", LEASE_S)
        create_shards(s, run_id, [[str(backend / "tests" / "test_a.py")]],
                      _artefact(backend, build))

    assert execute_shard(engine, settings, run_id, 0, "broken-worker") is False

    with session_scope(engine) as s:
        (shard,) = shards_of(s, run_id)
        assert (shard.state, shard.claimed_by, shard.result) == (ShardState.QUEUED, None, None)
    log = (run_dir(settings.resolved_work_dir, run_id) / "test-shards" / "shard-0.log").read_text()
    assert "cannot set up the sandbox" in log and "handing shard 0 back" in log
    with session_scope(engine) as s:  # free for the owner now, not in an hour
        assert claim_shard(s, run_id, 0, "owner", LEASE_S) is not None
