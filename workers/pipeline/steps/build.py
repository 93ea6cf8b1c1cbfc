"""The build step: run a backend's build command against a provisioned torch."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from service.config import Settings
from service.domain.states import StepStatus
from workers.pipeline.env.requirements import install_requirements
from workers.pipeline.env.run_env import shared_read_only
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.child_env import ChildEnvPolicy
from workers.pipeline.isolation.procs import child_env, run_streaming
from workers.pipeline.isolation.sandbox import StepSandbox, combine, sandbox_for_build
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import Recipe, expand

# Two cores are shared by everything on a worker; the backend's own parallelism is capped
# through the knobs CMake, setuptools and torch.utils.cpp_extension read.
BUILD_PARALLELISM = "2"


def _capped(requested: str | None) -> str:
    """A recipe may ask for fewer parallel jobs than the worker allows, never more."""
    if (
        requested is not None
        and requested.isdigit()
        and 0 < int(requested) < int(BUILD_PARALLELISM)
    ):
        return requested
    return BUILD_PARALLELISM


def build_environ(
    recipe: Recipe, env: TorchEnv, build_dir: Path, ccache_dir: Path | None
) -> dict[str, str]:
    overrides = {
        # The C locale gives ASCII quotes and English messages from compilers, so the
        # classifier's rules match the same text on every worker.
        "LC_ALL": "C",
        **recipe.env,
        "OPENREG_BUILD_DIR": str(build_dir),
    }
    for knob in ("CMAKE_BUILD_PARALLEL_LEVEL", "MAX_JOBS"):
        overrides[knob] = _capped(recipe.env.get(knob))
    if shutil.which("ninja") and "CMAKE_GENERATOR" not in os.environ:
        overrides.setdefault("CMAKE_GENERATOR", "Ninja")
    if shutil.which("ccache"):
        # CMake >= 3.17 reads these variables, so any CMake-based backend gets ccache.
        overrides.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
        overrides.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        if ccache_dir is not None:
            # Not the recipe's to choose: the backend's own cache (``ccache_dir_for``).
            overrides["CCACHE_DIR"] = str(ccache_dir)
    return child_env(overrides, pythonpath_front=env.pythonpath)


def default_lock_file(source_dir: Path) -> Path:
    """One lock per source tree: in-tree build artefacts (setuptools' build/, egg-info) make
    two concurrent builds of one tree corrupt each other even with separate build dirs."""
    digest = hashlib.sha256(str(source_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ootci-build-{digest}.lock"


def ccache_dir_for(settings: Settings, recipe: Recipe) -> Path:
    """The backend's own ccache dir. A ccache entry is an object file the next build links
    without compiling it: whoever can write the cache can put code into every build that
    reads it. Builds of one backend (one author's code, any torch) may share theirs; two
    backends never do, so one backend's build cannot plant objects in another's."""
    return settings.resolved_ccache_root / recipe.name


def build_sandbox(
    settings: Settings, policy: ChildEnvPolicy, recipe: Recipe, env: TorchEnv, build_dir: Path,
    run_dir: Path,
) -> StepSandbox:
    """The sandbox a run's build runs in (its own, or the isolating run's on another torch):
    sealed like every step that runs the backend's code. It writes only the run's HOME and
    TMPDIR, the build dir, the run's private env ``env`` (never the shared base), the run's
    own copy of the source (steps/source_tree.py, never the registered tree) and the
    backend's own ccache dir; the network only when the recipe asks for it."""
    own = [policy.home, policy.tmpdir, build_dir]
    return sandbox_for_build(
        settings,
        writable=[*own, env.venv_dir, recipe.source_dir, ccache_dir_for(settings, recipe)],
        visible=[*env.pythonpath, run_dir],
        watched=own,
        read_only=shared_read_only(settings, env),
        tmp=policy.tmpdir,
        network=recipe.build_network,
    )


def _install_build_requires(
    recipe: Recipe, env: TorchEnv, build_dir: Path, log: LogSink, sandbox: StepSandbox | None,
) -> bool:
    """``[build] requires`` into the run's own env before the build: a
    ``--no-build-isolation`` build sees nothing else."""
    return install_requirements(env, recipe.build_requires, build_dir, log,
                                what="the recipe's [build] requires", sandbox=sandbox)


def build(
    recipe: Recipe,
    env: TorchEnv,
    build_dir: Path,
    log: LogSink,
    *,
    timeout_s: int,
    ccache_dir: Path | None = None,
    lock_file: Path | None = None,
    sandbox: StepSandbox | None = None,
) -> StepOutcome:
    """Run ``recipe.build_command`` in the backend dir.

    PASSED on exit 0, FAILED on a non-zero exit (a compile error is the backend's or
    upstream's problem, and the log holds it), ERRORED when it could not run to the end
    (timeout, missing executable, killed by a signal, stopped by the ``sandbox``'s disk
    budget).
    """
    build_dir.mkdir(parents=True, exist_ok=True)
    command = expand(recipe.build_command, python=str(env.python))
    environ = build_environ(recipe, env, build_dir, ccache_dir)
    lock_path = lock_file or default_lock_file(recipe.source_dir)
    log.write(f"ootci: building {recipe.name} against torch {env.version} ({env.spec})")
    if sandbox is not None:
        log.write(sandbox.describe())
        sandbox.prepare(log.write)  # raises SandboxUnusable (infra) when it cannot be set up
    if recipe.build_requires and not _install_build_requires(recipe, env, build_dir, log,
                                                             sandbox):
        return StepOutcome(
            StepStatus.FAILED, None,
            "could not install [build] requires: " + " ".join(recipe.build_requires), log.path,
        )
    witness = sandbox.witness() if sandbox is not None else None
    if sandbox is not None:
        command = sandbox.command(command, recipe.source_dir, witness)
    with lock_path.open("a") as lock:
        # Waiting for the lock is not build time: the timeout starts once we hold it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        budget = sandbox.disk_budget() if sandbox is not None else None
        result = run_streaming(
            command,
            cwd=recipe.source_dir,
            env=environ,
            log=log,
            timeout_s=timeout_s,
            watchdog=combine(budget),
            preexec_fn=sandbox.preexec() if sandbox is not None else None,
            # The lock is held until the attempt's last child is gone, not just this process.
            pass_fds=(lock.fileno(),),
            witness=witness,
        )
    if result.setup_failure is not None:
        # The summary is the worker's own record: the classifier's evidence (infra-sandbox).
        why = StepSandbox.setup_failed(result.setup_failure)
        log.write(why)
        return StepOutcome(StepStatus.ERRORED, result.returncode, why, log.path)
    if result.killed_reason is not None:
        return StepOutcome(StepStatus.ERRORED, result.returncode, result.killed_reason, log.path)
    if result.returncode == 0:
        return StepOutcome(StepStatus.PASSED, 0, f"built in {result.duration_s:.1f} s", log.path)
    if result.start_error is not None:
        return StepOutcome(
            StepStatus.ERRORED,
            result.returncode,
            f"cannot run {command[0]!r}: {result.start_error}",
            log.path,
        )
    if result.signal_name is not None and result.returncode < 0:
        return StepOutcome(
            StepStatus.ERRORED,
            result.returncode,
            f"build killed by {result.signal_name}",
            log.path,
        )
    return StepOutcome(
        StepStatus.FAILED, result.returncode, f"build exited with {result.returncode}", log.path
    )
