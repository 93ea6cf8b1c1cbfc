"""One Inductor cache per run: a test process of the run that compiles what another one
compiled loads it from the run's cache (the FX graph cache hits), whether it is a restart
after a crash or a shard this worker runs under its own HOME and TMPDIR; a test process of
another run starts cold. Real pytest processes, a real Inductor compile, the real sandbox
(when bwrap works here)."""

from __future__ import annotations

import json
from pathlib import Path

from service.config import Settings
from tests.support.suites import make_suite
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.child_env import ChildEnvPolicy, child_environment
from workers.pipeline.isolation.sandbox import probe
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.recipe import load_recipe
from workers.pipeline.testrun.compile_cache import compile_cache_dir, compile_cache_scope
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.testrun.runner import TestRunOptions, run_tests
from workers.pipeline.testrun.suite_sandbox import suite_sandbox

pytest_plugins = ["tests.support.installed_fixtures"]

SUITE = {
    "test_compiles.py": """
        import json
        import os
        from pathlib import Path

        import torch
        from torch._dynamo.utils import counters

        EXPECT = json.loads((Path(__file__).parent / "expect.json").read_text())

        def _compile():
            fn = torch.compile(lambda x: (x.sin() + 1).relu())
            fn(torch.ones(8))
            return (counters["inductor"]["fxgraph_cache_hit"],
                    counters["inductor"]["fxgraph_cache_miss"])

        def test_first_compile():
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == EXPECT["inductor"]
            assert _compile() == ((1, 0) if EXPECT["warm"] else (0, 1))

        def test_crash():
            os.abort()

        def test_compile_after_the_restart():
            # A new process: only the cache on disk can make this a hit.
            assert _compile() == (1, 0)
    """,
}
EXPECTED = {
    "tests/test_compiles.py::test_first_compile": "passed",
    "tests/test_compiles.py::test_crash": "crashed",
    "tests/test_compiles.py::test_compile_after_the_restart": "passed",
}


def _step(suite: Path, env: TorchEnv, settings: Settings, run_dir: Path, policy_dir: Path,
          work_dir: Path, *, warm: bool) -> TestRunOutcome:
    """The suite's test step as a run's code starts it: the child env policy of
    ``policy_dir`` (the run's, or a shard worker's own), the run's compile cache, the
    suite's sandbox."""
    cache = compile_cache_dir(run_dir) / "inductor"
    (suite / "tests" / "expect.json").write_text(json.dumps({"inductor": str(cache),
                                                             "warm": warm}))
    policy = ChildEnvPolicy.for_run(settings, policy_dir)
    sandbox = suite_sandbox(settings, policy, env, build_dir=suite, source_dir=suite,
                            work_dir=work_dir, run_dir=run_dir)
    with (child_environment(policy), compile_cache_scope(run_dir),
          LogSink(work_dir.parent / f"{work_dir.name}.log") as log):
        return run_tests(load_recipe(suite), env, work_dir, log,
                         TestRunOptions(timeout_s=600, per_test_timeout_s=300, sandbox=sandbox,
                                        rerun_failures=False))


def test_the_processes_of_one_run_share_its_compile_cache_and_two_runs_do_not(
    tmp_path: Path, installed: TorchEnv
) -> None:
    settings = Settings(home=tmp_path / "home")
    if not probe(settings.sandbox_uid, settings.bwrap).bwrap:
        settings = Settings(home=tmp_path / "home", sandbox=False)
    suite = make_suite(tmp_path, SUITE, timeout_per_test=300)
    # Compile in the test's process: a pool of compile workers would only add start-ups.
    recipe = suite / "ootci.toml"
    recipe.write_text(recipe.read_text() + 'env = { TORCHINDUCTOR_COMPILE_THREADS = "1" }\n')
    run_a, run_b = tmp_path / "runs" / "1", tmp_path / "runs" / "2"

    owner = _step(suite, installed, settings, run_a, run_a, run_a / "test", warm=False)
    assert {r.nodeid: r.outcome for r in owner.results} == EXPECTED, owner.results
    assert any((compile_cache_dir(run_a) / "inductor").rglob("*")), "nothing in the run's cache"

    # A shard of the same run on this worker: its own HOME and TMPDIR, the run's cache.
    shard = _step(suite, installed, settings, run_a, run_a / "shard-0-worker",
                  run_a / "test-shards" / "shard-0", warm=True)
    assert {r.nodeid: r.outcome for r in shard.results} == EXPECTED, shard.results

    # Another run compiles the same graph cold, in its own cache.
    other = _step(suite, installed, settings, run_b, run_b, run_b / "test", warm=False)
    assert {r.nodeid: r.outcome for r in other.results} == EXPECTED, other.results
