"""The conformance step's pure parts: `[conformance]` in ootci.toml, the suite's command,
and the per-mechanism summary of the runner's records and the suite's report."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.domain.states import Outcome
from tests.support.paths import REPO_ROOT
from workers.pipeline.errors import RecipeError
from workers.pipeline.steps.recipe import load_recipe
from workers.pipeline.testrun.conformance import suite_recipe, summarize
from workers.pipeline.testrun.records import TestRecord

BASE = """
[backend]
name = "acme"
[build]
command = ["{python}", "-m", "pip", "install", "."]
[test]
command = ["{python}", "-m", "pytest", "tests"]
env = { ACME = "1" }
"""


def write(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "ootci.toml").write_text(BASE + extra)
    return tmp_path


def test_recipe_without_conformance_runs_no_suite(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, ""))
    assert recipe.conformance_device is None and recipe.conformance_import is None


def test_recipe_names_the_device_and_its_import(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, '[conformance]\ndevice = "feas"\nimport = "feas_backend"\n'))
    assert recipe.conformance_device == "feas"
    assert recipe.conformance_import == "feas_backend"


def test_the_feas_fixture_declares_its_device() -> None:
    recipe = load_recipe(REPO_ROOT / "tests/fixtures/backends/feas")
    assert (recipe.conformance_device, recipe.conformance_import) == ("feas", "feas_backend")


@pytest.mark.parametrize(("extra", "message"), [
    ("[conformance]\n", "missing key conformance.device"),
    ('[conformance]\ndevice = 3\n', "conformance.device must be a str"),
    ('[conformance]\ndevice = "Feas-1"\n', "conformance.device must be the backend's own"),
    ('[conformance]\ndevice = "cuda"\n', "conformance.device must be the backend's own"),
    ('[conformance]\ndevice = "feas"\nimport = "a b"\n', "conformance.import must be a module"),
    ('[conformance]\ndevice = "feas"\nlevel = "required"\n', "unknown key conformance.level"),
    ('[conformance]\ndevice = ["feas"]\n', "conformance.device must be a str"),
])
def test_bad_conformance_tables_say_what_is_wrong(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        load_recipe(write(tmp_path, extra))


def test_suite_command_keeps_the_test_env(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, '[conformance]\ndevice = "feas"\nimport = "feas_backend"\n'))
    work = tmp_path / "work"
    work.mkdir()
    suite = suite_recipe(recipe, work, Path("/site"))
    command = list(suite.test_command)
    assert command[:5] == ["{python}", "-m", "pytest", "--pyargs", "ootci_conformance.suite"]
    assert command[command.index("--device-type") + 1] == "feas"
    assert command[command.index("--device-import") + 1] == "feas_backend"
    assert command[command.index("--rootdir") + 1] == "/site"
    assert suite.test_env == {"ACME": "1"} and suite.test_requires == ()


def test_summary_counts_records_by_the_reports_mechanisms() -> None:
    streams = "ootci_conformance/suite/test_streams.py"
    report = {
        "mechanisms": {"streams": {"level": "recommended"}, "device": {"level": "required"},
                       "compile": {"level": "optional"}},
        "tests": {f"{streams}::test_a": {"mechanism": "streams", "level": "recommended",
                                          "outcome": "passed"}},
    }
    records = (
        TestRecord(f"{streams}::test_a", Outcome.PASSED),
        TestRecord(f"{streams}::test_b", Outcome.SKIPPED),
        # Not in the report: pytest died in it; its file names the mechanism.
        TestRecord("ootci_conformance/suite/test_device.py::test_c", Outcome.CRASHED),
        TestRecord("ootci_conformance/suite/test_device.py::test_d", Outcome.FAILED),
        TestRecord("<collection>", Outcome.CRASHED),
    )
    by_name = {m.mechanism: m for m in summarize(report, records)}
    assert by_name["streams"].passed == 1 and by_name["streams"].skipped == 1
    assert by_name["device"].level == "required"
    assert by_name["device"].failing == ("ootci_conformance/suite/test_device.py::test_c",
                                         "ootci_conformance/suite/test_device.py::test_d")
    assert (by_name["compile"].passed, by_name["compile"].failed) == (0, 0)
    assert by_name["<suite>"].failed == 1 and by_name["<suite>"].level == "unknown"
