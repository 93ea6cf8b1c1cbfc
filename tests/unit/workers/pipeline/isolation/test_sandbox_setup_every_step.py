"""bwrap's status pipe on every sealed step, not the build's only (issue #33): when bwrap
gives up before the command starts (here: a dir it binds was removed after ``prepare``'s
check, as a cache GC or an operator's ``rm`` would), its exit 1 must never read as pytest's
"tests failed", a restart's end of the suite, pip's failed install or "torch does not
import" (upstream's). Each step raises ``SandboxUnusable`` (infra) with bwrap's words.
Real bwrap, real pytest, real pip; no part is mocked."""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from service.config import Settings
from service.domain.crash_storm import CrashStorm
from tests.support.paths import REPO_ROOT
from tests.support.vanishing import Vanishing as _Vanishing
from workers.pipeline.env.import_probe import probe_import
from workers.pipeline.env.layered import layered_venv
from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.errors import TorchUnusable
from workers.pipeline.isolation.sandbox import (
    SandboxUnusable,
    StepSandbox,
    probe,
    sandbox_for_tests,
)
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.recipe import Recipe
from workers.pipeline.testrun.conformance import SuiteInstallError, install_suite
from workers.pipeline.testrun.process import PytestRunner
from workers.pipeline.testrun.pytest_plugin import PLUGIN_DIR
from workers.pipeline.testrun.restarts import run_until_done
from workers.pipeline.testrun.runner import TestRunOptions, run_tests

CANNOT = "ootci: sandbox: cannot set up the sandbox: bwrap: Can't find source path"
CRASH_THEN_PASS = {
    "test_a.py": "import os\n\ndef test_crash():\n    os.abort()\n",
    "test_b.py": "def test_ok():\n    assert True\n",
}


def _settings(tmp_path: Path) -> Settings:
    settings = Settings(home=tmp_path / "home")
    if probe(settings.sandbox_uid).bwrap is None:
        pytest.skip("no working bwrap")
    return settings


def _env(tmp_path: Path) -> TorchEnv:
    return TorchEnv(spec="installed", source_kind="installed", python=Path(sys.executable),
                    version="2.13.0", git_version="a" * 40, env_key="k",
                    torch_dir=tmp_path / "torch", pythonpath=())


def _suite(tmp_path: Path, files: dict[str, str]) -> Recipe:
    source = tmp_path / "src"
    (source / "tests").mkdir(parents=True)
    for name, text in files.items():
        (source / "tests" / name).write_text(text)
    return Recipe("vanish", source, ("true",),
                  ("{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider",
                   "--junitxml={junit}"))


def _sandbox(tmp_path: Path, recipe: Recipe, work: Path, *, at: int, which: str
             ) -> tuple[_Vanishing, Path]:
    """The test step's sandbox (as ``suite_sandbox`` makes it) plus a writable dir that
    vanishes at the chosen command."""
    doomed = tmp_path / "doomed"
    own = [tmp_path / "home-run", tmp_path / "tmp-run", work, doomed]
    inner = sandbox_for_tests(_settings(tmp_path), writable=own,
                              visible=[recipe.source_dir, PLUGIN_DIR], watched=own[:3],
                              tmp=tmp_path / "tmp-run")
    return _Vanishing(inner, doomed, at=at, which=which), doomed


def _options(sandbox: object, processes: int = 1) -> TestRunOptions:
    return TestRunOptions(timeout_s=300, per_test_timeout_s=120, rerun_failures=False,
                          sandbox=sandbox, processes=processes)  # type: ignore[arg-type]


@pytest.mark.parametrize("which", ["-m pytest", "OOTCI_ENV"],
                         ids=["the-pytest-process", "the-env-facts-probe"])
def test_a_test_step_bwrap_cannot_start_is_infra_not_a_failed_suite(
    tmp_path: Path, which: str,
) -> None:
    recipe = _suite(tmp_path, {"test_ok.py": "def test_ok():\n    assert True\n"})
    work = tmp_path / "work"
    sandbox, _ = _sandbox(tmp_path, recipe, work, at=0, which=which)
    with LogSink(tmp_path / "test.log") as log, pytest.raises(SandboxUnusable) as raised:
        run_tests(recipe, _env(tmp_path), work, log, _options(sandbox))
    assert str(raised.value).startswith(CANNOT), raised.value
    assert not (work / "results.jsonl").exists()  # pytest never started


def test_a_restart_bwrap_cannot_start_is_infra_not_the_suites_end(tmp_path: Path) -> None:
    """Without the status pipe the restart's exit 1 read as "pytest ran": the suite ended
    after its crash, ``test_ok`` silently never ran, and the crash was the verdict."""
    recipe = _suite(tmp_path, CRASH_THEN_PASS)
    work = tmp_path / "work"
    sandbox, _ = _sandbox(tmp_path, recipe, work, at=1, which="-m pytest")
    sandbox.prepare()  # as the step's ``run_tests`` does before its first pytest
    with LogSink(tmp_path / "test.log") as log:
        runner = PytestRunner(recipe, _env(tmp_path), work, log, timeout_s=300,
                              per_test_s=120, timeout_args=[], build_dir=None,
                              sandbox=sandbox)  # type: ignore[arg-type]
        with pytest.raises(SandboxUnusable) as raised:
            run_until_done(runner, CrashStorm())
    assert str(raised.value).startswith(CANNOT)
    assert runner.attempt == 2  # the first process ran (and crashed); the restart did not
    assert str(raised.value) in (tmp_path / "test.log").read_text()
    assert "tests/test_a.py::test_crash" in (work / "results.jsonl").read_text()


def test_a_part_bwrap_cannot_start_ends_the_parallel_step_as_infra(tmp_path: Path) -> None:
    recipe = _suite(tmp_path, {"test_a.py": "def test_a():\n    pass\n",
                               "test_b.py": "def test_b():\n    pass\n"})
    work = tmp_path / "work"
    # The 0th pytest command is the listing; the 1st is a part's.
    sandbox, _ = _sandbox(tmp_path, recipe, work, at=1, which="-m pytest")
    with LogSink(tmp_path / "test.log") as log, pytest.raises(SandboxUnusable) as raised:
        run_tests(recipe, _env(tmp_path), work, log, _options(sandbox, processes=2))
    assert str(raised.value).startswith(CANNOT)
    assert "running the suite's 2 file(s) in 2 processes" in (tmp_path / "test.log").read_text()


def test_the_import_probe_bwrap_cannot_start_is_infra_not_a_failed_import(
    tmp_path: Path,
) -> None:
    recipe = _suite(tmp_path, {})
    sandbox, _ = _sandbox(tmp_path, recipe, tmp_path / "work", at=0, which="")
    with pytest.raises(SandboxUnusable) as raised:
        probe_import(Path(sys.executable), "json", {}, tmp_path / "neutral",
                     sandbox=sandbox)  # type: ignore[arg-type]
    assert str(raised.value).startswith(CANNOT)


def test_provisions_import_probe_bwrap_cannot_start_is_infra_never_upstream(
    tmp_path: Path,
) -> None:
    """Before, bwrap's exit 1 was "torch does not import": ``TorchUnusable``, the run
    blamed on upstream (``upstream/torch-unusable``)."""
    settings = _settings(tmp_path)
    doomed = tmp_path / "doomed"
    made: list[_Vanishing] = []

    def sandbox_for(reads: Sequence[Path], writes: Sequence[Path]) -> StepSandbox:
        own = [tmp_path / "home-run", tmp_path / "tmp-run", doomed]
        inner = sandbox_for_tests(settings, writable=[*own, *writes], visible=reads,
                                  watched=own[:2], tmp=tmp_path / "tmp-run")
        made.append(_Vanishing(inner, doomed))
        return made[-1]  # type: ignore[return-value]

    with LogSink(tmp_path / "provision.log") as log, pytest.raises(SandboxUnusable) as raised:
        provision(parse_spec("installed"), tmp_path / "cache", log, probe_sandbox=sandbox_for)
    assert not isinstance(raised.value, TorchUnusable)
    assert str(raised.value).startswith(CANNOT)
    assert made and made[0].wrapped == 1  # refused at the first import: not asked again


@pytest.mark.parametrize("which", ["pip install", "import os, ootci_conformance"],
                         ids=["pips-install", "the-import-after-it"])
def test_the_conformance_install_bwrap_cannot_start_is_infra_not_a_failed_install(
    tmp_path: Path, which: str,
) -> None:
    settings = _settings(tmp_path)
    python = layered_venv(tmp_path / "env", [sysconfig.get_paths()["purelib"]],
                          pth="_ootci_layers.pth")  # pip installs here, not into ootci's
    env = replace(_env(tmp_path), python=python)
    work, doomed = tmp_path / "work", tmp_path / "doomed"
    own = [work, tmp_path / "tmp-run", doomed]
    inner = sandbox_for_tests(settings, writable=own,
                              visible=[REPO_ROOT, tmp_path / "env", Path(sys.prefix)],
                              watched=own[:2], tmp=tmp_path / "tmp-run")
    sandbox = _Vanishing(inner, doomed, which=which)
    with LogSink(tmp_path / "conformance.log") as log, pytest.raises(SandboxUnusable) as raised:
        install_suite(env, work, log, sandbox)  # type: ignore[arg-type]
    assert not isinstance(raised.value, SuiteInstallError)
    assert str(raised.value).startswith(CANNOT)
