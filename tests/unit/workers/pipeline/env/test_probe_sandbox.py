"""Provision's ``import torch`` probe runs the torch's own code (a wheel's, a ``path:``
tree's): it runs sealed like the build and the tests. A torch tree whose import tries to
write outside the run and reports what it got back through its version string."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.config import Settings
from workers.pipeline.env.probe_sandbox import probe_sandbox
from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.isolation.child_env import ChildEnvPolicy, child_environment
from workers.pipeline.isolation.sandbox import probe
from workers.pipeline.logs.sink import LogSink

NOSY_TORCH = '''\
import os

tried = []
for target in {targets!r}:
    try:
        with open(target, "a") as f:
            f.write("escaped\\n")
        tried.append("w")
    except OSError:
        tried.append("d")
__version__ = "2.99.0+uid" + str(os.getuid()) + "." + "".join(tried)


class version:
    git_version = "f" * 40
'''


def test_the_import_probe_of_a_path_torch_runs_sealed(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    support = probe(settings.sandbox_uid)
    if not support.bwrap or (support.root and not support.setpriv):
        pytest.skip(f"needs bwrap and an unprivileged uid: {support.describe()}")
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)  # only the read-only mount can stop the write
    targets = [str(outside / "planted"), "/etc/cron.d/ootci-probe"]
    tree = tmp_path / "tree"
    (tree / "torch").mkdir(parents=True)
    tree.chmod(0o755)
    (tree / "torch" / "__init__.py").write_text(NOSY_TORCH.format(targets=targets))
    policy = ChildEnvPolicy.for_run(settings, tmp_path / "home" / "work" / "runs" / "1")
    with child_environment(policy), LogSink(tmp_path / "provision.log") as log:
        env = provision(parse_spec(f"path:{tree}"), settings.resolved_cache_dir, log,
                        probe_sandbox=probe_sandbox(settings, policy))
    uid = settings.sandbox_uid if os.geteuid() == 0 else os.geteuid()
    assert env.version == f"2.99.0+uid{uid}.dd"  # both writes denied, never as root
    assert not (outside / "planted").exists() and not Path(targets[1]).exists()
