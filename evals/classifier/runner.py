"""Run the corpus: classify the golden logs (offline, seconds) or every mutant through the
real pipeline (live: overlay -> run row -> provision/build/test/collect -> stored verdicts).

Live, each mutant is one real run with torch spec ``path:<overlay>`` against the bundled
backend, executed by ``evals.classifier.worker`` under an isolated interpreter with its own
cache dir (so its build dir, built once, lives and dies with the mutant). A clean overlay
runs first as the baseline when any selected mutant needs the test suite: tests that fail
on the unpatched torch too are the backend's, not the mutant's, and are not its verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, select

from evals.classifier import golden
from evals.classifier.interpreter import make_isolated_python
from evals.classifier.report import CaseResult, Got
from evals.mutants.edits import MutantError
from evals.mutants.mutant import Mutant
from evals.mutants.overlay import build_overlay
from evals.paths import ROOT
from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import session_scope
from service.domain.classify import classify_log
from service.domain.verdict import Finding, Stage
from service.models import Failure, Run, Step, TestResult
from workers.pipeline.isolation.child_env import ootci_process_environ
from workers.pipeline.steps.recipe import load_recipe

Progress = Callable[[str], None]
_STAGE_ORDER = {Stage.BUILD.value: 0, Stage.IMPORT.value: 1, Stage.TEST.value: 2,
                Stage.PROVISION.value: 3}
# A run that takes longer than this is stuck, whatever its steps' own timeouts say.
RUN_TIMEOUT_S = 3 * 3600


def _quiet(_message: str) -> None:
    pass


# ---------------------------------------------------------------- offline


def classify_goldens(mutants: Sequence[Mutant], directory: Path) -> list[CaseResult]:
    """Each mutant's stored golden log, classified now."""
    results = []
    for mutant in mutants:
        path = golden.golden_path(directory, mutant)
        started = time.perf_counter()
        if not path.is_file():
            results.append(CaseResult(mutant, None, error=f"no golden log at {path}"))
            continue
        try:
            log = golden.load(path)
        except ValueError as exc:
            results.append(CaseResult(mutant, None, error=str(exc)))
            continue
        finding = log.classify()
        got = None if finding is None else Got.from_finding(finding, log.test.get("nodeid"))
        results.append(CaseResult(mutant, got, error=None if got else "no rule matched",
                                  duration_s=time.perf_counter() - started))
    return results


# ---------------------------------------------------------------- live


@dataclass
class LiveConfig:
    engine: Engine
    settings: Settings
    backend_dir: Path
    torch_dir: Path
    work_root: Path
    save_fixtures: Path | None = None
    keep: bool = False
    baseline: bool = True
    progress: Progress = _quiet


@dataclass
class _Baseline:
    run_id: int | None = None
    failing: set[str] = field(default_factory=set)  # nodeids failing on the clean torch


# The corpus's CMake toolchain file, inside the backend snapshot (see _worker_environ).
TOOLCHAIN = "corpus-toolchain.cmake"


def _worker_environ(settings: Settings, work_root: Path, case_dir: Path) -> dict[str, str]:
    env = ootci_process_environ()
    env.update({
        # The worker is `python -m evals.classifier.worker`: evals is not installed with ootci.
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
        "OOTCI_DATABASE_URL": settings.resolved_database_url,
        "OOTCI_CACHE_DIR": str(case_dir / "cache"),
        "OOTCI_WORK_DIR": str(case_dir / "work"),
        # `python -m pytest` from the backend dir would otherwise put the source tree first
        # on sys.path and test whatever build sits in it instead of this mutant's install.
        "PYTHONSAFEPATH": "1",
        # Every case dir has the same layout (overlay/, cache/builds/...), so with paths
        # under the work root rewritten relative to the build dir, a translation unit whose
        # headers a mutant did not touch hits the cache of an earlier case: only what the
        # mutant changed is compiled again. The cache itself outlives the corpus run.
        "CCACHE_BASEDIR": str(work_root),
        "CCACHE_NOHASHDIR": "1",
        # The build step puts ccache in the backend's own dir under this root: one root
        # for every case, or each case's own cache dir would make every mutant a cold build.
        "OOTCI_CCACHE_ROOT": os.environ.get("OOTCI_CCACHE_ROOT",
                                            str(settings.resolved_cache_dir / "corpus-ccache")),
    })
    if "CMAKE_TOOLCHAIN_FILE" not in env:
        # ccache cannot reuse a compile that uses a precompiled header built in another
        # case dir, so with PCH every mutant is a full rebuild; corpus builds do without.
        # The file is in the backend snapshot (snapshot_backend) and named relative: CMake
        # looks in the source dir, the run's copy, which the sealed build sees (the work
        # root itself may be under /tmp, which a sealed step does not).
        env["CMAKE_TOOLCHAIN_FILE"] = TOOLCHAIN
    return env


# Snapshot contents that are build output, not source.
_NOT_SOURCE = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache",
                                     "*.so", "*.so.*")


def snapshot_backend(source: Path, dest: Path) -> Path:
    """A private copy of the backend sources for the whole corpus run.

    Every case then builds the same code (the tree may be edited meanwhile), no build
    touches the real tree (setuptools writes build/ and egg-info into it, so two builds of
    one tree must not overlap: this tree is ours alone, no shared lock needed), and with
    the snapshot inside the work root its paths are cache-relative like the overlays'.
    """
    shutil.copytree(source, dest, ignore=_NOT_SOURCE, symlinks=True)
    (dest / TOOLCHAIN).write_text("set(CMAKE_DISABLE_PRECOMPILE_HEADERS ON)\n", encoding="utf-8")
    return dest


def corpus_backend_name(recipe_name: str) -> str:
    # Mutant runs are synthetic: kept apart from the real backend's history, matrix and
    # breakages, where they would read as upstream breaking it.
    return f"{recipe_name}-corpus"


def _execute(cfg: LiveConfig, label: str, spec: str, case_dir: Path, mutant: str | None) -> int:
    """Create the run row and execute it in an isolated interpreter; return the run id."""
    recipe = load_recipe(cfg.backend_dir)
    with session_scope(cfg.engine) as s:
        backend = get_or_create_backend(s, corpus_backend_name(recipe.name),
                                        str(cfg.backend_dir))
        run_id = create_run(s, backend, spec, trigger="corpus",
                            trigger_info={"mutant": mutant or "baseline"}).id
    python = make_isolated_python(case_dir / "python")
    cfg.progress(f"{label}: run {run_id} ({spec})")
    proc = subprocess.Popen(
        [str(python), "-m", "evals.classifier.worker", str(run_id)],
        env=_worker_environ(cfg.settings, cfg.work_root, case_dir), cwd=case_dir,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + RUN_TIMEOUT_S
    for raw in proc.stdout:
        try:
            event = json.loads(raw)
        except json.JSONDecodeError:
            cfg.progress(f"{label}: {raw.rstrip()}")
            continue
        if event.get("kind") == "step":
            cfg.progress(f"{label}: {event['step']} {event['status']} {event['text'][:120]}")
        if time.monotonic() > deadline:
            proc.kill()
            break
    proc.wait()
    return run_id


def _failures(engine: Engine, run_id: int) -> tuple[Run, list[Failure]]:
    with session_scope(engine) as s:
        run = s.get_one(Run, run_id)
        failures = list(s.scalars(select(Failure).where(Failure.run_id == run_id)
                                  .order_by(Failure.id)))
    return run, failures


def _decisive(failures: list[Failure], baseline: _Baseline) -> list[Failure]:
    fresh = [f for f in failures if f.nodeid is None or f.nodeid not in baseline.failing]
    return sorted(fresh, key=lambda f: (_STAGE_ORDER.get(f.stage, 9), f.id))


def _got(failure: Failure) -> Got:
    return Got(failure.stage, failure.category or "", failure.subtype or "",
               failure.rule or "", failure.line, failure.line_no or 0,
               {str(k): str(v) for k, v in (failure.captures or {}).items()}, failure.nodeid)


def _run_baseline(cfg: LiveConfig) -> _Baseline:
    case_dir = cfg.work_root / "_baseline"
    case_dir.mkdir(parents=True)
    overlay = build_overlay(cfg.torch_dir, case_dir / "overlay", None)
    run_id = _execute(cfg, "baseline", overlay.spec, case_dir, None)
    run, failures = _failures(cfg.engine, run_id)
    base = _Baseline(run_id, {f.nodeid for f in failures if f.nodeid})
    build_broke = any(f.stage == Stage.BUILD.value for f in failures)
    cfg.progress(f"baseline: run {run_id} {run.state}, {len(failures)} failures"
                 + (" (the unpatched build fails: live results are meaningless)"
                    if build_broke else ""))
    if build_broke or run.error:
        raise MutantError(
            f"the backend does not build/test cleanly against the unpatched torch (baseline "
            f"run {run_id}: {run.state}, {run.error or 'build failed'}); fix that first"
        )
    if not cfg.keep:
        shutil.rmtree(case_dir, ignore_errors=True)
    return base


def _save_fixture(cfg: LiveConfig, mutant: Mutant, run_id: int, failure: Failure) -> str:
    assert cfg.save_fixtures is not None
    path = golden.golden_path(cfg.save_fixtures, mutant)
    made_by = (f"python -m evals classifier --live --save-fixtures --only {mutant.name} "
               f"(run {run_id})")
    finding = Finding.from_dict(failure.finding) if failure.finding else None
    if finding is None:
        return "not saved: the failure has no classifier finding"
    with session_scope(cfg.engine) as s:
        record = None
        if failure.nodeid is not None:
            record = s.scalar(select(TestResult).where(TestResult.run_id == run_id,
                                                       TestResult.nodeid == failure.nodeid))
        step = s.scalar(select(Step).where(Step.run_id == run_id,
                                           Step.name == failure.step_name)
                        .order_by(Step.attempt.desc()).limit(1))
        log_text = step.read_log().decode("utf-8", "replace") if step is not None else ""
    test = None
    if record is not None:
        body = golden.cap("\n".join(p for p in (record.message, record.details) if p))
        test = {"nodeid": record.nodeid, "outcome": record.outcome}
    else:
        body = golden.excerpt_log(log_text, failure.line_no or 0)
        again = classify_log(body, Stage(failure.stage))
        if again is None or again.rule != finding.rule:
            # The excerpt lost what decided the verdict: keep the (capped) whole log.
            body = golden.cap(log_text)
    log = golden.make_golden(path, mutant, finding, body, test=test, made_by=made_by)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(log.render(), encoding="utf-8")
    return f"saved {path} ({path.stat().st_size // 1024} KB)"


def run_mutant(cfg: LiveConfig, mutant: Mutant, baseline: _Baseline) -> CaseResult:
    started = time.perf_counter()
    case_dir = cfg.work_root / mutant.name
    case_dir.mkdir(parents=True)
    try:
        try:
            overlay = build_overlay(cfg.torch_dir, case_dir / "overlay", mutant)
        except MutantError as exc:
            return CaseResult(mutant, None, error=str(exc),
                              duration_s=time.perf_counter() - started)
        run_id = _execute(cfg, mutant.name, overlay.spec, case_dir, mutant.name)
        run, failures = _failures(cfg.engine, run_id)
        ordered = _decisive(failures, baseline)
        result = CaseResult(mutant, _got(ordered[0]) if ordered else None, run_id=run_id,
                            failures=len(ordered))
        e = mutant.expect
        result.agreeing = sum(f.category == e.category.value and f.subtype == e.subtype.value
                              for f in ordered)
        if not ordered:
            result.error = (f"run {run_id} {run.state}: " + (run.error or "no new failure"))
        elif cfg.save_fixtures is not None:
            result.notes.append(_save_fixture(cfg, mutant, run_id, ordered[0]))
    finally:
        if not cfg.keep:
            shutil.rmtree(case_dir, ignore_errors=True)
    result.duration_s = time.perf_counter() - started
    return result


def run_live(cfg: LiveConfig, mutants: Sequence[Mutant]) -> tuple[list[CaseResult], _Baseline]:
    cfg.work_root.mkdir(parents=True, exist_ok=True)
    source = cfg.backend_dir
    cfg.backend_dir = snapshot_backend(source, cfg.work_root / "backend")
    cfg.progress(f"backend {source} snapshotted to {cfg.backend_dir}")
    needs_suite = any(m.expect.stage is not Stage.BUILD for m in mutants)
    baseline = _run_baseline(cfg) if cfg.baseline and needs_suite else _Baseline()
    results = []
    for mutant in mutants:
        result = run_mutant(cfg, mutant, baseline)
        verdict = "ok" if result.correct else "WRONG"
        cfg.progress(f"{mutant.name}: {verdict} in {result.duration_s:.0f} s")
        results.append(result)
    return results, baseline
