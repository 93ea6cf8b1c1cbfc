"""The sandbox's verdicts are the worker's, never the step's (issue #33): a step that prints
the sandbox's set-up line and fails is classified by its real failure; bwrap's own set-up
failure (seen on its status pipe, which the step never sees) is infra with bwrap's reason."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from service.config import Settings
from service.domain.classify import classify_log
from service.domain.states import StepStatus
from service.domain.verdict import Category, Stage
from tests.support.paths import FIXTURES
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.sandbox import probe, sandbox_for_build
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.build import build
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import Recipe

FORGED = "ootci: sandbox: cannot set up the sandbox: bwrap: Can't mount proc on /newroot/proc"


def _env(tmp_path: Path) -> TorchEnv:
    return TorchEnv(spec="installed", source_kind="installed", python=Path(sys.executable),
                    version="2.13.0", git_version="a" * 40, env_key="k",
                    torch_dir=tmp_path / "torch", pythonpath=())


def _sealed_build(tmp_path: Path, source: Path, *, vanish: bool = False
                  ) -> tuple[StepOutcome, str]:
    settings = Settings(home=tmp_path / "home")
    if probe(settings.sandbox_uid).bwrap is None:
        pytest.skip("no working bwrap")
    recipe = Recipe("forger", source, ("{python}", "build.py"), ("true",))
    writable = tmp_path / "w"
    sandbox = sandbox_for_build(settings, writable=[writable, tmp_path / "build"],
                                visible=[source], watched=[writable])
    log = LogSink(tmp_path / "build.log")
    if vanish:
        # What the step needs is gone between the sandbox's check and the step: bwrap
        # cannot bind it, and says so before the build command starts.
        sandbox.prepare()
        shutil.rmtree(writable)
    outcome = build(recipe, _env(tmp_path), tmp_path / "build", log, timeout_s=120,
                    lock_file=tmp_path / "lock", sandbox=_Prepared(sandbox) if vanish else sandbox)
    log.close()
    return outcome, (tmp_path / "build.log").read_text()


class _Prepared:
    """The sandbox as ``build`` sees it once ``prepare`` has passed: prepare again is a no-op
    (the dir vanished after the check, not before)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def prepare(self, log: object = None) -> None:
        return None

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_forged_set_up_line_leaves_the_real_failure_decisive(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(FIXTURES / "backends" / "forger", source)
    outcome, log = _sealed_build(tmp_path, source)
    assert outcome.status is StepStatus.FAILED, log
    assert FORGED in log  # the step printed it, inside its sealed build
    # As collect classifies a failed build: the log, and the step's summary as evidence.
    finding = classify_log(log, Stage.BUILD, evidence=outcome.summary)
    assert finding is not None
    assert finding.category is not Category.INFRA
    assert finding.rule != "infra-sandbox"
    assert "was not declared in this scope" in finding.line


def test_bwraps_own_set_up_failure_is_infra_with_its_reason(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(FIXTURES / "backends" / "forger", source)
    outcome, log = _sealed_build(tmp_path, source, vanish=True)
    assert outcome.status is StepStatus.ERRORED, log
    assert outcome.summary.startswith("ootci: sandbox: cannot set up the sandbox: bwrap: ")
    assert "Can't find source path" in outcome.summary
    assert "was not declared" not in log  # the build command never ran
    finding = classify_log(log, Stage.BUILD, evidence=outcome.summary)
    assert finding is not None
    assert (finding.category, finding.rule) == (Category.INFRA, "infra-sandbox")
    assert finding.captures["reason"].startswith("bwrap: Can't find source path")


@pytest.mark.parametrize("stage", [Stage.BUILD, Stage.IMPORT, Stage.TEST, Stage.PROVISION])
def test_the_set_up_line_in_a_log_alone_never_makes_a_step_infra(stage: Stage) -> None:
    log = f"$ python build.py\n{FORGED}\nsomething else went wrong\n"
    finding = classify_log(log, stage)
    assert finding is None or finding.category is not Category.INFRA


def test_evidence_is_read_only_from_its_start() -> None:
    """A summary naming a recipe's command that merely contains the line is not bwrap's."""
    summary = f"cannot run '{FORGED}': No such file or directory"
    finding = classify_log("", Stage.BUILD, evidence=summary)
    assert finding is None or finding.rule != "infra-sandbox"
