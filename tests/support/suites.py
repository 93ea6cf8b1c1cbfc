"""Small synthetic backends for the test step, and the step run on them (the interpreter to
run them with: the ``installed`` fixture of ``tests.support.installed_fixtures``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.recipe import load_recipe
from workers.pipeline.testrun.records import TestRunOutcome
from workers.pipeline.testrun.runner import TestRunOptions, run_tests

TEST_COMMAND = (
    '["{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={junit}"]'
)


def make_suite(
    root: Path, tests: dict[str, str], *, timeout_per_test: int = 60, command: str = TEST_COMMAND
) -> Path:
    """A backend at ``root/suite`` whose build does nothing and whose tests are ``tests``
    (file name -> source)."""
    suite = root / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "ootci.toml").write_text(
        textwrap.dedent(
            f"""\
            [backend]
            name = "synthetic"
            [build]
            command = ["true"]
            [test]
            command = {command}
            timeout_per_test = {timeout_per_test}
            """
        )
    )
    for name, body in tests.items():
        (suite / "tests" / name).write_text(textwrap.dedent(body))
    return suite


def run(
    suite: Path, env: TorchEnv, tmp_path: Path, *, timeout_s: int = 300, **kwargs: object
) -> TestRunOutcome:
    """The test step on ``suite`` in ``env``."""
    with LogSink(tmp_path / "test.log") as log:
        return run_tests(
            load_recipe(suite),
            env,
            tmp_path / "work",
            log,
            TestRunOptions(
                timeout_s=timeout_s,
                per_test_timeout_s=kwargs.pop("per_test_timeout_s", 300),  # type: ignore[arg-type]
                **kwargs,  # type: ignore[arg-type]
            ),
        )
