"""Isolating runs instead of ``unknown`` (issue #27 item 2), end to end: real ``ootci run``
processes on a fresh home with no history, ``OOTCI_PINS`` the venv's own torch
(``installed``), a pure-Python backend, and a patched overlay of that torch (``path:``)
whose Python API renamed a keyword.

With nothing to compare with, the history leaves every failure unknown; the isolate step
builds the same backend on the unpatched torch and runs only the failing tests there: the
test the patch breaks passes there (upstream), the backend's own bug fails there the same
way (backend). A backend-only break on the unpatched torch is the history's to blame.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db import make_engine
from service.models import Step
from tests.support.faults import ootci
from tests.support.pyonly import write_pyonly_backend
from tests.support.torch_overlay import overlay_of_installed_torch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# torch's API change: make_tensor's ``low``/``high`` renamed (the wrapper replaces the name
# torch.testing imports).
RENAMED = """

_make_tensor = make_tensor


def make_tensor(*shape, dtype, device, lower=None, upper=None, **kwargs):  # renamed keywords
    return _make_tensor(*shape, dtype=dtype, device=device, low=lower, high=upper, **kwargs)
"""
PATCHES = {"testing/_creation.py": lambda text: text + RENAMED}

API_TEST = """\
import torch


def test_makes_its_inputs_in_range():
    t = torch.testing.make_tensor((2, 2), dtype=torch.float32, device="cpu", low=0, high=1)
    assert t.shape == (2, 2)


def test_adds():
    assert 1 + 1 == 2
"""
OWN_BUG = """\
def test_rounds_half_up():
    assert round(2.5) == 3, "the backend rounds half to even"
"""
API = "tests/test_api.py::test_makes_its_inputs_in_range"
OWN = "tests/test_own.py::test_rounds_half_up"


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return overlay_of_installed_torch(tmp_path_factory.mktemp("patched"), "2.13.0+patched",
                                      "e" * 40, PATCHES)


def run(home: Path, spec: str, backend: Path, **settings: str) -> dict[str, Any]:
    proc = ootci(home, "run", "--torch", spec, "--backend", str(backend), "--json",
                 timeout=600, OOTCI_PINS='["installed"]', **settings)
    assert proc.stdout.strip().startswith("["), proc.stderr[-3000:]
    (doc,) = json.loads(proc.stdout)
    return dict(doc)


def by_nodeid(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["nodeid"]: f for f in doc["failures"]}


def stored_log(home: Path, run_id: int, name: str) -> str:
    engine = make_engine(f"sqlite:///{home / 'ootci.db'}")
    try:
        with Session(engine) as s:
            step = s.scalars(select(Step).where(Step.run_id == run_id, Step.name == name)).one()
            return step.read_log().decode()
    finally:
        engine.dispose()


def test_a_torch_only_break_on_a_first_night_is_upstream_through_the_isolate_step(
    overlay: Path, tmp_path: Path
) -> None:
    backend = write_pyonly_backend(tmp_path / "vendor", {"test_api.py": API_TEST,
                                                         "test_own.py": OWN_BUG})
    home = tmp_path / "home"
    doc = run(home, f"path:{overlay}", backend)

    assert [(s["name"], s["status"]) for s in doc["steps"]] == [
        ("provision", "passed"), ("build", "passed"), ("test", "failed"),
        ("isolate", "passed"), ("collect", "passed")]
    failures = by_nodeid(doc)
    assert set(failures) == {API, OWN}
    api, own = failures[API], failures[OWN]
    assert (api["triage"], api["needs_isolation"]) == ("upstream", False)
    assert api["triage_reason"].startswith(
        f"isolated: backend {doc['backend_sha'][:13]} built and ran {API} against torch "
        "2.13.0+cpu (")
    assert "pin 'installed'): it passes there, so only torch's change breaks it" in (
        api["triage_reason"])
    assert (own["triage"], own["needs_isolation"]) == ("backend", False)
    assert "it fails there too (" in own["triage_reason"]
    assert "the same fingerprint), so the backend breaks it" in own["triage_reason"]
    assert doc["verdict"] == "upstream"

    log = stored_log(home, doc["id"], "isolate")
    assert "isolating 2 failing test(s)" in log and "on torch 'installed'" in log
    assert "unexpected keyword" not in log  # the unpatched torch takes ``low``
    assert "the backend rounds half to even" in log
    assert "test_adds" not in log  # only the failing tests

    # The experiment's answers survive a replay of triage over the stored history.
    replayed = ootci(home, "reclassify", "--json")
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    shown = ootci(home, "show", str(doc["id"]), "--json")
    again = by_nodeid(json.loads(shown.stdout))
    assert (again[API]["triage"], again[API]["triage_reason"]) == ("upstream", api["triage_reason"])
    assert (again[OWN]["triage"], again[OWN]["triage_reason"]) == ("backend", own["triage_reason"])


def test_a_backend_only_break_on_the_same_torch_is_the_historys_to_blame(tmp_path: Path) -> None:
    """No isolating run: only the backend changed since the test passed on run 1."""
    backend = write_pyonly_backend(tmp_path / "vendor", {"test_api.py": API_TEST})
    home = tmp_path / "home"
    green = run(home, "installed", backend)
    assert green["state"] == "passed", green
    (backend / "tests" / "test_api.py").write_text(API_TEST.replace("1 + 1 == 2", "1 + 1 == 3"))

    red = run(home, "installed", backend)
    assert "isolate" not in [s["name"] for s in red["steps"]]
    (failure,) = red["failures"]
    assert (failure["nodeid"], failure["triage"], failure["needs_isolation"]) == (
        "tests/test_api.py::test_adds", "backend", False)
    assert failure["triage_reason"].startswith(f"passed on run #{green['id']} ")
    assert "only the backend changed" in failure["triage_reason"]


def test_with_isolation_off_a_torch_only_break_stays_unknown(overlay: Path, tmp_path: Path) -> None:
    backend = write_pyonly_backend(tmp_path / "vendor", {"test_api.py": API_TEST})
    doc = run(tmp_path / "home", f"path:{overlay}", backend, OOTCI_ISOLATE="false")
    assert "isolate" not in [s["name"] for s in doc["steps"]]
    (failure,) = doc["failures"]
    assert (failure["nodeid"], failure["triage"], failure["needs_isolation"]) == (
        API, "unknown", True)
    assert failure["triage_reason"].startswith("no earlier run of this backend where it passed")
    assert doc["verdict"] == "unknown"



def test_a_backend_red_on_one_test_since_forever_gets_upstream_for_a_new_torch_break(
    overlay: Path, tmp_path: Path
) -> None:
    """No fully green run ever: the long-red test is the backend's on its first night (it
    fails on the pin itself), and the next night's torch-only break in another test is
    upstream's, decided by that test's own history."""
    backend = write_pyonly_backend(tmp_path / "vendor", {"test_api.py": API_TEST,
                                                         "test_own.py": OWN_BUG})
    home = tmp_path / "home"
    first = run(home, "installed", backend)
    assert first["state"] == "failed"
    (own,) = first["failures"]
    assert (own["nodeid"], own["triage"]) == (OWN, "backend")
    assert "this run is the experiment" in own["triage_reason"]

    second = run(home, f"path:{overlay}", backend)
    assert "isolate" not in [s["name"] for s in second["steps"]]  # history decides both
    failures = by_nodeid(second)
    assert failures[API]["triage"] == "upstream"
    assert failures[API]["triage_reason"].startswith(f"passed on run #{first['id']} ")
    assert "only torch changed" in failures[API]["triage_reason"]
    assert failures[OWN]["triage"] == "backend"
    assert second["verdict"] == "upstream"


# A backend torch loads at `import torch` (the ``torch.backends`` entry point) whose load
# uses the renamed keywords: on the patched torch nothing of its suite can even start.
AUTOLOADED_RECIPE = """\
[backend]
name = "autoloaded"

[build]
command = ["{python}", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."]

[test]
command = ["{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={junit}"]
timeout_per_test = 300
"""
AUTOLOADED_PROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "autoloaded"
version = "0.1"

[project.entry-points."torch.backends"]
autoloaded = "autoloaded:_autoload"
"""
AUTOLOAD = """\
def _autoload():
    import torch

    torch.testing.make_tensor((1,), dtype=torch.float32, device="cpu", low=0, high=1)
"""


def _autoloaded_backend(root: Path, autoload: str) -> Path:
    # torch imported by the conftest: its failure stops pytest before any test module.
    write_pyonly_backend(root, {"test_api.py": API_TEST, "conftest.py": "import torch\n"})
    (root / "ootci.toml").write_text(AUTOLOADED_RECIPE)
    (root / "pyproject.toml").write_text(AUTOLOADED_PROJECT)
    (root / "autoloaded").mkdir()
    (root / "autoloaded" / "__init__.py").write_text(autoload)
    return root


def test_an_import_torch_failure_is_isolated_by_repeating_the_import_not_a_test(
    overlay: Path, tmp_path: Path
) -> None:
    """``<import torch>`` names no test: pytest on the reference torch would record nothing
    for it, which once read as "passes there". The isolate step repeats the runner's import
    probe instead: it works on the unpatched torch, so the break is torch's."""
    backend = _autoloaded_backend(tmp_path / "vendor", AUTOLOAD)
    home = tmp_path / "home"
    doc = run(home, f"path:{overlay}", backend)
    failures = by_nodeid(doc)
    assert "<import torch>" in failures, failures
    failure = failures["<import torch>"]
    assert (failure["triage"], failure["needs_isolation"]) == ("upstream", False), failure
    assert "it passes there" in failure["triage_reason"]
    log = stored_log(home, doc["id"], "isolate")
    assert "`import torch` on the reference torch works" in log


def test_an_import_torch_failure_the_backend_causes_everywhere_is_the_backends(
    overlay: Path, tmp_path: Path
) -> None:
    broken = AUTOLOAD + "\n    raise RuntimeError('the vendor runtime is not initialised')\n"
    backend = _autoloaded_backend(tmp_path / "vendor", broken)
    home = tmp_path / "home"
    doc = run(home, f"path:{overlay}", backend)
    failure = by_nodeid(doc)["<import torch>"]
    assert failure["triage"] == "backend", failure
    assert "it fails there too" in failure["triage_reason"]
    assert "`import torch` on the reference torch fails too" in stored_log(home, doc["id"], "isolate")
