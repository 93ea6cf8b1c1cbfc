"""A worker that does not see a run's build on its disk hands the shard back unrun: a shard
never provisions nor builds."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from service.commands.runs import claim_run, create_run, get_or_create_backend
from service.commands.shards import create_shards, shards_of
from service.config import Settings
from service.db import session_scope
from service.models import ShardState
from workers.pipeline.testrun.shards import execute_shard


def test_a_shard_whose_artefact_is_not_on_this_disk_goes_back_to_the_queue(
    engine: Engine, tmp_path: Path
) -> None:
    with session_scope(engine) as s:
        backend = get_or_create_backend(s, "b", str(tmp_path / "src"))
        run_id = create_run(s, backend, "installed", trigger="cli").id
    with session_scope(engine) as s:
        assert claim_run(s, run_id, "owner", 60)
    artefact = {
        "source_dir": str(tmp_path / "src"),
        "build_dir": str(tmp_path / "elsewhere" / "build"),
        "env": {"python": str(tmp_path / "elsewhere" / "bin" / "python")},
    }
    with session_scope(engine) as s:
        create_shards(s, run_id, [["/t/a.py"], ["/t/b.py"]], artefact)

    settings = Settings(home=tmp_path / "home", sandbox=False)
    assert execute_shard(engine, settings, run_id, 1, "w2") is False

    with session_scope(engine) as s:
        shard = shards_of(s, run_id)[1]
        assert (shard.state, shard.claimed_by) == (ShardState.QUEUED, None)
    log = (tmp_path / "home" / "work" / "runs" / str(run_id) / "test-shards" / "shard-1.log")
    assert "is not on this worker's disk; handing it back" in log.read_text()
