"""Pytest fixtures for tests that run steps against this interpreter's torch: register with
``pytest_plugins = ["tests.support.installed_fixtures"]``."""

from __future__ import annotations

import pytest

from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.logs.sink import LogSink


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> TorchEnv:
    """The ``installed`` torch spec provisioned once per test module."""
    root = tmp_path_factory.mktemp("installed")
    with LogSink(root / "provision.log") as log:
        return provision(parse_spec("installed"), root / "cache", log)
