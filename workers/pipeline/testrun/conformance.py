"""The conformance step: run ootci's conformance suite (``conformance/`` at the repository
root, the ``ootci-conformance`` package) against the device a recipe names in
``[conformance] device``, after the backend's own tests.

The suite runs through the test step's runner (``runner.run_tests``: crash isolation, the
per-test limit, the sandbox) with the backend's ``[test] env``; only the command differs.
Outcomes come from the runner's JSONL (it survives a crash); the suite's own report
(``--conformance-report``) names each test's mechanism and level, and each mechanism's
level. A test the report does not know (pytest died in it) gets the mechanism its file
names: the suite has one file per mechanism, ``test_<mechanism>.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from service.commands.conformance import MechanismCounts
from service.domain.states import Outcome, StepStatus
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.procs import child_env, run_streaming
from workers.pipeline.isolation.sandbox import StepSandbox, hand_over, run_captured
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import Recipe
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.testrun.runner import TestRunOptions, run_tests

# The package's source in this repository: installed into each run's env from here.
SUITE_DIR = Path(__file__).resolve().parents[3] / "conformance"
SUITE_PACKAGE = "ootci_conformance.suite"
PLUGIN_NAME = "ootci_conformance"  # its pytest11 entry point
REPORT_FILE = "conformance.json"
UNKNOWN_LEVEL = "unknown"


@dataclass(frozen=True)
class ConformanceOutcome:
    step: StepOutcome
    device: str
    mechanisms: tuple[MechanismCounts, ...]
    records: tuple[TestRecord, ...]


class SuiteInstallError(Exception):
    pass


def install_suite(env: TorchEnv, work_dir: Path, log: LogSink,
                  sandbox: StepSandbox | None = None) -> Path:
    """Install the conformance package into the run's env, from a copy (pip builds in the
    tree it is given; the repository's stays clean). No index, no build isolation: it is
    pure Python and its only dependency, pytest, is already there. Returns the directory
    it was installed into: the suite's rootdir, so its test ids do not name the env.

    Both pip and the import after it start the run's interpreter, whose env the sealed
    build could write (a ``.pth`` runs at every start): with a ``sandbox`` they run in it."""
    if sandbox is not None:
        sandbox.prepare(log.write)  # raises SandboxUnusable (infra) when it cannot be set up
    copy = work_dir / "suite-src"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(SUITE_DIR, copy, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info"))
    command = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check",
               "--no-deps", "--no-index", "--no-build-isolation", "--force-reinstall", str(copy)]
    probe = [str(env.python), "-P", "-c",
             "import os, ootci_conformance as m; print(os.path.dirname(os.path.dirname(m.__file__)))"]
    preexec = witness = None
    if sandbox is not None:
        if sandbox.uid is not None and os.geteuid() == 0:
            hand_over(copy, sandbox.uid)  # pip builds in the copy, as the step's uid
        installing = sandbox.installing_into(env.venv_dir)
        witness = installing.witness()
        command = installing.command(command, work_dir, witness)
        preexec = installing.preexec()
    log.write(f"ootci: installing the conformance suite from {SUITE_DIR}")
    result = run_streaming(command, cwd=work_dir, env=child_env({}, pythonpath_front=env.pythonpath),
                           log=log, timeout_s=600, preexec_fn=preexec, witness=witness)
    if sandbox is not None:
        # bwrap's exit 1 is not pip's: the step is an infra error, not "install failed".
        sandbox.unstarted(result.setup_failure, log.write)
    if result.returncode != 0:
        raise SuiteInstallError(f"installing the conformance suite failed (exit {result.returncode})")
    where = run_captured(sandbox, probe, cwd=work_dir,
                         env=child_env({}, pythonpath_front=env.pythonpath), timeout_s=120)
    if where.returncode != 0 or not where.stdout.strip():
        raise SuiteInstallError(f"the installed conformance suite cannot be imported: {where.stderr}")
    return Path(where.stdout.strip())


def suite_recipe(recipe: Recipe, work_dir: Path, site_dir: Path) -> Recipe:
    """The backend's recipe with the conformance suite as its test command; test ids are
    relative to ``site_dir`` (``ootci_conformance/suite/test_streams.py::...``), the same
    in every env."""
    assert recipe.conformance_device is not None
    ini = work_dir / "pytest.ini"  # the suite's own (empty) config, not the backend's
    ini.write_text("[pytest]\n", encoding="utf-8")
    command = [
        "{python}", "-m", "pytest", "--pyargs", SUITE_PACKAGE, "-p", PLUGIN_NAME,
        "-c", str(ini), "--rootdir", str(site_dir), "-p", "no:cacheprovider",
        "--device-type", recipe.conformance_device,
        "--conformance-report", str(work_dir / REPORT_FILE), "--junitxml={junit}",
    ]
    if recipe.conformance_import:
        command += ["--device-import", recipe.conformance_import]
    return replace(recipe, test_command=tuple(command), test_requires=())


def run_conformance(
    recipe: Recipe,
    env: TorchEnv,
    work_dir: Path,
    log: LogSink,
    *,
    timeout_s: int,
    per_test_timeout_s: int,
    build_dir: Path | None = None,
    sandbox: StepSandbox | None = None,
) -> ConformanceOutcome:
    assert recipe.conformance_device is not None
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / REPORT_FILE).unlink(missing_ok=True)
    try:
        site_dir = install_suite(env, work_dir, log, sandbox)
    except SuiteInstallError as exc:
        log.write(f"ootci: {exc}")
        return ConformanceOutcome(StepOutcome(StepStatus.ERRORED, None, str(exc), log.path),
                                  recipe.conformance_device, (), ())
    ran = run_tests(
        suite_recipe(recipe, work_dir, site_dir), env, work_dir, log,
        TestRunOptions(
            timeout_s=timeout_s, per_test_timeout_s=per_test_timeout_s,
            # A mechanism that works only on the second try does not work.
            rerun_failures=False, build_dir=build_dir, sandbox=sandbox,
        ),
    )
    report = read_report(work_dir / REPORT_FILE)
    mechanisms = summarize(report, ran.results)
    for m in mechanisms:
        log.write(f"ootci: conformance {m.mechanism} ({m.level}): {m.passed} passed, "
                  f"{m.failed} failed, {m.skipped} skipped")
    return ConformanceOutcome(_step(ran, mechanisms), recipe.conformance_device, mechanisms,
                              ran.results)


def read_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def mechanism_of(nodeid: str) -> str | None:
    """``.../test_streams.py::test_x`` -> ``streams``."""
    stem = Path(nodeid.split("::", 1)[0]).stem
    return stem.removeprefix("test_") if stem.startswith("test_") else None


def summarize(report: dict[str, Any], records: tuple[TestRecord, ...]) -> tuple[MechanismCounts, ...]:
    """Counts per mechanism: outcomes from the runner's records, mechanisms and levels from
    the suite's report. Every mechanism the report lists appears, with zeros if none of its
    tests ran; a flaky outcome cannot happen (no rerun) and would count as failed."""
    levels: dict[str, str] = {
        str(m): str(v.get("level", UNKNOWN_LEVEL))
        for m, v in (report.get("mechanisms") or {}).items() if isinstance(v, dict)
    }
    tests = report.get("tests") or {}
    counts: dict[str, dict[str, Any]] = {
        m: {"passed": 0, "failed": 0, "skipped": 0, "failing": []} for m in levels
    }
    for record in records:
        known = tests.get(record.nodeid)
        mechanism = known.get("mechanism") if isinstance(known, dict) else mechanism_of(record.nodeid)
        if not mechanism:
            mechanism = "<suite>"  # pytest died outside any test (collection, import)
        entry = counts.setdefault(str(mechanism), {"passed": 0, "failed": 0, "skipped": 0,
                                                   "failing": []})
        if record.outcome == Outcome.PASSED:
            entry["passed"] += 1
        elif record.outcome == Outcome.SKIPPED:
            entry["skipped"] += 1
        else:
            entry["failed"] += 1
            entry["failing"].append(record.nodeid)
    return tuple(
        MechanismCounts(m, levels.get(m, UNKNOWN_LEVEL), c["passed"], c["failed"], c["skipped"],
                        tuple(c["failing"]))
        for m, c in counts.items()
    )


def _step(ran: TestRunOutcome, mechanisms: tuple[MechanismCounts, ...]) -> StepOutcome:
    """The step passes when the suite ran, whatever the device implements: which mechanisms
    fail is the result, not a failure of the step (a regression becomes a breakage in the
    collect step). It errors when the suite could not run to the end."""
    step = ran.step
    if step.status is StepStatus.ERRORED:
        return step
    if not ran.results:
        return replace(step, status=StepStatus.FAILED, summary="the conformance suite ran no test")
    working = sum(1 for m in mechanisms if m.passed and not m.failed)
    summary = f"{working} of {len(mechanisms)} mechanisms pass; {step.summary}"
    return replace(step, status=StepStatus.PASSED, summary=summary)
