"""The sandbox provision's ``import torch`` probes run in: the import runs the code of a
wheel ootci just installed or of a ``path:`` tree, so it is sealed like the build and the
tests (``isolation/sandbox.py``): the run's HOME and TMPDIR writable, the shared envs and
package cache read-only, no network, never root."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from service.config import Settings
from workers.pipeline.cache.layout import envs_dir
from workers.pipeline.env.provision import ProbeSandbox
from workers.pipeline.isolation.child_env import ChildEnvPolicy
from workers.pipeline.isolation.sandbox import StepSandbox, sandbox_for_tests


def probe_sandbox(settings: Settings, policy: ChildEnvPolicy) -> ProbeSandbox:
    """What ``provision(probe_sandbox=...)`` calls with the paths a probe reads (the env,
    a ``path:`` tree) and may write (an env still being made)."""

    def make(reads: Sequence[Path], writes: Sequence[Path]) -> StepSandbox:
        own = [policy.home, policy.tmpdir]
        return sandbox_for_tests(
            settings, writable=[*own, *writes], visible=reads, watched=own,
            read_only=[envs_dir(settings.resolved_cache_dir),
                       settings.resolved_package_cache_dir],
            tmp=policy.tmpdir,
        )

    return make
