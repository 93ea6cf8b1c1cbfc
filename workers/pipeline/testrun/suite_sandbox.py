"""The sandbox a suite runs in, whichever worker runs it: the run's owner (the backend's
own suite, the conformance suite) or a worker running one shard of it."""

from __future__ import annotations

from pathlib import Path

from service.config import Settings
from workers.pipeline.cache.layout import pytest_config_stop
from workers.pipeline.env.run_env import shared_read_only
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.child_env import ChildEnvPolicy
from workers.pipeline.isolation.sandbox import StepSandbox, sandbox_for_tests
from workers.pipeline.testrun.pytest_plugin import PLUGIN_DIR


def suite_sandbox(
    settings: Settings,
    policy: ChildEnvPolicy,
    env: TorchEnv,
    *,
    build_dir: Path,
    source_dir: Path,
    work_dir: Path,
    run_dir: Path,
) -> StepSandbox:
    """The suite sees the run's env over its read-only base, the build, the source and
    ootci's pytest plugin; it writes only its own dirs (HOME, TMPDIR at /tmp too,
    ``work_dir``)."""
    own = [policy.home, policy.tmpdir, work_dir]
    return sandbox_for_tests(
        settings,
        writable=own,
        visible=[env.venv_dir, *env.base_dirs, *env.pythonpath, build_dir, source_dir,
                 PLUGIN_DIR, run_dir, pytest_config_stop(settings.resolved_cache_dir)],
        watched=own,
        read_only=shared_read_only(settings, env),
        tmp=policy.tmpdir,
    )
