"""The conformance plugin in a real pytest process: markers, the device option, and the
per-mechanism JSON report (merged across the pytest processes of one run). The device is
`cpu`: `torch.cpu` is a device module like any backend's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.paths import REPO_ROOT

SUITE = '''
import pytest

pytestmark = pytest.mark.conformance("streams", "recommended")

def test_module_is_torch_cpu(dut):
    import torch
    assert dut.module is torch.cpu and dut.device == torch.device("cpu", 0)

def test_broken(dut):
    assert False, "not implemented"

@pytest.mark.conformance("streams", "optional")
def test_skips(dut):
    pytest.skip("needs 2 devices")
'''
OTHER = '''
import pytest

@pytest.mark.conformance("device")
def test_device(dut):
    pass

def test_not_part_of_the_suite():
    pass
'''


def run_suite(tmp_path: Path, *args: str, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"PYTHONPATH": str(REPO_ROOT / "conformance"),
                    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "ootci_conformance.plugin", "-p", "no:cacheprovider",
         "-q", *args],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300,
    )


def test_report_counts_per_mechanism_and_merges(tmp_path: Path) -> None:
    (tmp_path / "test_streams.py").write_text(SUITE)
    (tmp_path / "test_device.py").write_text(OTHER)
    report = tmp_path / "report.json"
    first = run_suite(tmp_path, "test_streams.py", "--device-type", "cpu",
                      "--conformance-report", str(report))
    assert first.returncode == 1, first.stdout
    data: dict[str, Any] = json.loads(report.read_text())
    assert data["device"] == "cpu"
    streams = data["mechanisms"]["streams"]
    assert streams == {"level": "recommended", "passed": 1, "failed": 1, "skipped": 1,
                       "failing": ["test_streams.py::test_broken"]}
    assert data["tests"]["test_streams.py::test_skips"]["level"] == "optional"
    assert data["mechanisms"]["compile"]["passed"] == 0  # every mechanism is listed

    # A second process of the same run (after a crash) adds to the report.
    second = run_suite(tmp_path, "test_device.py", "--conformance-report", str(report),
                       env={"OOTCI_DEVICE_TYPE": "cpu"})
    assert second.returncode == 0, second.stdout
    merged = json.loads(report.read_text())
    assert merged["mechanisms"]["device"]["passed"] == 1
    assert merged["mechanisms"]["streams"]["failed"] == 1
    assert "test_device.py::test_not_part_of_the_suite" not in merged["tests"]


def test_markers_select_by_level_and_mechanism(tmp_path: Path) -> None:
    (tmp_path / "test_streams.py").write_text(SUITE)
    r = run_suite(tmp_path, "--device-type", "cpu", "-m", "optional")
    assert "1 skipped" in r.stdout and "passed" not in r.stdout


def test_without_a_device_type_it_refuses(tmp_path: Path) -> None:
    (tmp_path / "test_device.py").write_text(OTHER)
    r = run_suite(tmp_path)
    assert r.returncode == 4  # usage error
    assert "needs --device-type" in r.stderr + r.stdout
