"""pytest plugin of the conformance suite (entry point ``pytest11: ootci_conformance``).

Inert for any other suite: its options, fixtures and report concern only tests marked
``@pytest.mark.conformance(mechanism, level)``. Every such test also gets its mechanism
and level as plain markers, so ``-m "required and not streams"`` selects.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ootci_conformance import LEVELS, MECHANISMS

_MARKER = "conformance"
_FAILING = {"failed", "error"}


@dataclass(frozen=True)
class DeviceUnderTest:
    """The backend the suite is pointed at."""

    name: str
    module: ModuleType  # getattr(torch, name)
    device: Any  # torch.device(name, 0)
    importer: str  # the code a fresh interpreter runs to get the device ("import torch...")

    @property
    def count(self) -> int:
        return int(self.module.device_count())

    def run_python(self, code: str, *, env: dict[str, str] | None = None, timeout: float = 180,
                   load_backend: bool = True, script_dir: Path | None = None,
                   ) -> subprocess.CompletedProcess[str]:
        """``code`` in a fresh interpreter (fork, autoload tests), after ``importer`` unless
        not ``load_backend``. From a temp dir with this process's sys.path: ``-c`` puts the
        cwd on sys.path, and the backend may be importable only from ours."""
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        preamble = self.importer + "\n" if load_backend else ""
        source = preamble + textwrap.dedent(code)
        argv = [sys.executable, "-c", source]
        if script_dir is not None:  # a file: multiprocessing's spawn re-imports __main__
            script = script_dir / "conformance_main.py"
            script.write_text(source, encoding="utf-8")
            argv = [sys.executable, str(script)]
        return subprocess.run(
            argv,
            capture_output=True, text=True, timeout=timeout, env=full_env,
            cwd=tempfile.gettempdir(),
        )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ootci-conformance")
    group.addoption("--device-type", default=os.environ.get("OOTCI_DEVICE_TYPE"),
                    help="device type under test (torch.<NAME>); env OOTCI_DEVICE_TYPE")
    group.addoption("--device-import", default=os.environ.get("OOTCI_DEVICE_IMPORT"),
                    help="module to import for a backend that does not autoload; "
                         "env OOTCI_DEVICE_IMPORT")
    group.addoption("--conformance-report", default=None,
                    help="write the per-mechanism summary to this JSON file")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance(mechanism, level): a test of the PrivateUse1 conformance suite")
    for name in (*MECHANISMS, *LEVELS):
        config.addinivalue_line("markers", f"{name}: conformance mechanism or level")
    config._ootci_conformance = _Report(config.getoption("--conformance-report"))  # type: ignore[attr-defined]
    config.pluginmanager.register(config._ootci_conformance, "ootci-conformance-report")  # type: ignore[attr-defined]


def _mark(item: pytest.Item) -> tuple[str, str] | None:
    marker = item.get_closest_marker(_MARKER)
    if marker is None:
        return None
    mechanism = marker.args[0]
    if mechanism not in MECHANISMS:
        raise pytest.UsageError(f"{item.nodeid}: unknown conformance mechanism {mechanism!r}")
    level = marker.args[1] if len(marker.args) > 1 else MECHANISMS[mechanism]
    if level not in LEVELS:
        raise pytest.UsageError(f"{item.nodeid}: unknown conformance level {level!r}")
    return mechanism, level


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = False
    for item in items:
        mark = _mark(item)
        if mark is None:
            continue
        marked = True
        for name in mark:
            item.add_marker(name)
    if marked and not config.getoption("--device-type"):
        raise pytest.UsageError(
            "the conformance suite needs --device-type NAME (or OOTCI_DEVICE_TYPE)")


def _device_under_test(config: pytest.Config) -> DeviceUnderTest:
    import torch

    name = config.getoption("--device-type")
    wanted = config.getoption("--device-import")
    importer = "import torch"
    if wanted:
        importlib.import_module(wanted)
        importer += f"\nimport {wanted}"
    module = getattr(torch, name, None)
    if not isinstance(module, ModuleType):
        pytest.fail(f"torch.{name} is not a module: is the backend loaded "
                    f"(autoload, or --device-import)?", pytrace=False)
    return DeviceUnderTest(name, module, torch.device(name, 0), importer)


@pytest.fixture(scope="session")
def dut(request: pytest.FixtureRequest) -> DeviceUnderTest:
    return _device_under_test(request.config)


@pytest.fixture
def two_devices(dut: DeviceUnderTest) -> tuple[Any, Any]:
    import torch

    if dut.count < 2:
        pytest.skip(f"needs 2 {dut.name} devices")
    return torch.device(dut.name, 0), torch.device(dut.name, 1)


class _Report:
    """Outcome per test, summed per mechanism, written at the session's end."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None
        self.tests: dict[str, dict[str, str]] = {}
        self.marks: dict[str, tuple[str, str]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            mark = _mark(item)
            if mark is not None:
                self.marks[item.nodeid] = mark

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        mark = self.marks.get(report.nodeid)
        if mark is None:
            return
        outcome = None
        if report.when == "call":
            outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "skipped"
        if outcome is None:
            return
        previous = self.tests.get(report.nodeid, {}).get("outcome")
        if previous in _FAILING:
            return  # a teardown error after a failure does not change what happened
        self.tests[report.nodeid] = {"mechanism": mark[0], "level": mark[1], "outcome": outcome}

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.path is None or not self.marks:
            return
        tests: dict[str, dict[str, str]] = {}
        if self.path.exists():
            try:
                tests = dict(json.loads(self.path.read_text(encoding="utf-8")).get("tests", {}))
            except (OSError, ValueError):
                tests = {}
        tests.update(self.tests)
        device = session.config.getoption("--device-type")
        self.path.write_text(json.dumps(report_document(device, tests), indent=1, sort_keys=True),
                             encoding="utf-8")


def report_document(device: str, tests: dict[str, dict[str, str]]) -> dict[str, Any]:
    """``{device, mechanisms: {mechanism: {level, passed, failed, skipped, failing}}, tests}``:
    every mechanism of the suite appears, with zeros when none of its tests ran."""
    mechanisms: dict[str, dict[str, Any]] = {
        m: {"level": level, "passed": 0, "failed": 0, "skipped": 0, "failing": []}
        for m, level in MECHANISMS.items()
    }
    for nodeid, test in sorted(tests.items()):
        entry = mechanisms[test["mechanism"]]
        outcome = test["outcome"]
        if outcome in _FAILING:
            entry["failed"] += 1
            entry["failing"].append(nodeid)
        elif outcome == "passed":
            entry["passed"] += 1
        else:
            entry["skipped"] += 1  # skipped, xfailed
    return {"device": device, "mechanisms": mechanisms, "tests": tests}
