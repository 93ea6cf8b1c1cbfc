"""Installing the conformance suite starts the run's interpreter twice (pip, then an
import); the sealed build could have written a ``.pth`` into that env, and a ``.pth``
runs at every start: with the step's sandbox neither start runs it as the worker."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

from service.config import Settings
from service.domain.torch_spec import SourceKind
from tests.support.paths import REPO_ROOT
from workers.pipeline.env.layered import layered_venv, purelib
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.sandbox import probe, sandbox_for_tests
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.testrun.conformance import install_suite


def _env_with_a_planted_pth(tmp_path: Path) -> tuple[TorchEnv, Path]:
    python = layered_venv(tmp_path / "env", [sysconfig.get_paths()["purelib"]],
                          pth="_ootci_layers.pth")
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)  # only the sandbox's read-only mount can stop the write
    marker = outside / "ran-as-worker"
    (purelib(tmp_path / "env") / "planted.pth").write_text(
        f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    import torch

    env = TorchEnv(spec="installed", source_kind=SourceKind.INSTALLED, python=python,
                   version=torch.__version__, git_version="", env_key="test",
                   torch_dir=Path(torch.__file__).parent)
    return env, marker


def test_a_planted_pth_never_runs_outside_the_sandbox(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    if not probe(settings.sandbox_uid).bwrap:
        pytest.skip("no working bwrap")
    env, marker = _env_with_a_planted_pth(tmp_path)
    work = tmp_path / "work"
    own = [work, tmp_path / "tmp"]
    sandbox = sandbox_for_tests(settings, writable=own, visible=[REPO_ROOT, tmp_path / "env",
                                                                 Path(sys.prefix)],
                                watched=own, tmp=tmp_path / "tmp")
    log = LogSink(tmp_path / "step.log")
    site = install_suite(env, work, log, sandbox)
    log.close()
    assert (site / "ootci_conformance").is_dir()
    assert site.is_relative_to(tmp_path / "env")
    assert not marker.exists(), "the env's .pth ran as the worker"


def test_without_a_sandbox_the_same_pth_runs_which_is_what_the_sandbox_stops(
    tmp_path: Path,
) -> None:
    env, marker = _env_with_a_planted_pth(tmp_path)
    log = LogSink(tmp_path / "step.log")
    install_suite(env, tmp_path / "work", log)
    log.close()
    assert marker.exists()
