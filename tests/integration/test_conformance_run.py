"""Two vendor backends run the conformance suite through `ootci run` on real builds (C++17,
CMake, against the installed torch): tiny (a copy with `[conformance] device = "tiny"`)
and feas (its own device, with some mechanisms and not others). What `ootci show --json`,
`GET /api/runs/{id}` and the conformance page say per mechanism is what the suite's own
report says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.config import Settings
from tests.support.helpers import RecordingDispatcher

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "tests" / "fixtures" / "backends"
TINY_CONFORMANCE = '\n[conformance]\ndevice = "tiny"\nimport = "tiny_backend"\n'


def ootci(home: Path, *args: str) -> tuple[int, Any, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(home), "COLUMNS": "200"})
    proc = subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=3000)
    data = json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else None
    return proc.returncode, data, proc.stdout + proc.stderr


def _trees(tmp_path: Path) -> dict[str, Path]:
    """Copies (their build script, a link out of the tree, copied in), tiny with [conformance]."""
    root = tmp_path / "backends"
    root.mkdir()
    for name in ("tiny", "feas"):
        shutil.copytree(BACKENDS / name, root / name, ignore=shutil.ignore_patterns("build"))
    with (root / "tiny" / "ootci.toml").open("a") as recipe:
        recipe.write(TINY_CONFORMANCE)
    return {"tiny": root / "tiny", "feas": root / "feas"}


def _report(home: Path, run_id: int) -> dict[str, Any]:
    path = home / "work" / "runs" / str(run_id) / "conformance" / "conformance.json"
    return json.loads(path.read_text())


def _counts(mechanisms: dict[str, Any]) -> dict[str, tuple[int, int, int, list[str]]]:
    return {m: (v["passed"], v["failed"], v["skipped"], sorted(v["failing"]))
            for m, v in mechanisms.items()}


def test_tiny_and_feas_run_the_conformance_suite(tmp_path: Path) -> None:
    home = tmp_path / "home"
    trees = _trees(tmp_path)
    shown: dict[str, dict[str, Any]] = {}
    for name, tree in trees.items():
        code, runs, out = ootci(home, "run", "--torch", "installed", "--backend", str(tree),
                                "--json")
        assert code == 0, out[-5000:]
        run_id = runs[0]["id"]
        code, detail, out = ootci(home, "show", str(run_id), "--json")
        assert code == 0, out[-3000:]
        assert [s["name"] for s in detail["steps"]] == [
            "provision", "build", "test", "conformance", "collect"]
        conformance = detail["conformance"]
        assert conformance["device"] == name
        # The numbers the run stored are the suite's own.
        report = _report(home, run_id)
        assert _counts(conformance["mechanisms"]) == _counts(report["mechanisms"])
        assert {m: v["level"] for m, v in conformance["mechanisms"].items()} == {
            m: v["level"] for m, v in report["mechanisms"].items()}
        shown[name] = {"run": run_id, **conformance["mechanisms"]}

    def works(name: str, mechanism: str) -> bool:
        m = shown[name][mechanism]
        return m["passed"] > 0 and m["failed"] == 0

    # tiny: a device with empty/copy and nothing else.
    assert works("tiny", "device")
    assert not any(works("tiny", m) for m in ("ops", "streams", "fallback", "generator"))
    # feas: ops through its CPU fallback, synchronous streams, no generator or stats.
    for mechanism in ("device", "guard", "ops", "fallback", "autograd", "stub"):
        assert works("feas", mechanism), shown["feas"][mechanism]
    for mechanism in ("generator", "allocator", "distributed"):
        assert shown["feas"][mechanism]["failed"] > 0
    assert any(n.endswith("test_generator.py::test_explicit_generator_is_reproducible")
               for n in shown["feas"]["generator"]["failing"])

    settings = Settings(home=home, database_url=f"sqlite:///{home / 'ootci.db'}")
    client = TestClient(create_app(settings, dispatcher=RecordingDispatcher()))
    for name in trees:
        api = client.get(f"/api/runs/{shown[name]['run']}").json()["conformance"]["mechanisms"]
        assert _counts(api) == _counts({k: v for k, v in shown[name].items() if k != "run"})
    page = client.get("/conformance").text
    assert '<tr data-backend="feas">' in page and '<tr data-backend="tiny">' in page
    feas_row = page.split('<tr data-backend="feas">')[1].split("</tr>")[0]
    assert 'data-mechanism="ops" data-status="works"' in feas_row
    assert 'data-mechanism="generator" data-status=' in feas_row
    assert 'data-mechanism="generator" data-status="works"' not in feas_row
    failing = shown["feas"]["generator"]["failing"][0]
    history = client.get("/conformance/generator", params={"backend": "feas"}).text
    assert failing in history
