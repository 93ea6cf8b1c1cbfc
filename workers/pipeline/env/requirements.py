"""A recipe's own requirements (``[build] requires``, ``[test] requires``) installed into a
run's private env.

Wheels only, installed by ootci's pip in the step's sandbox with the network on (the
operator's index), as the step's uid: the env is the run's own. Torch is held at the
env's version by a constraint: a requirement must not replace the torch under test.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.procs import child_env, run_streaming
from workers.pipeline.isolation.sandbox import StepSandbox
from workers.pipeline.logs.sink import LogSink


def install_requirements(
    env: TorchEnv, requirements: Sequence[str], work_dir: Path, log: LogSink, *, what: str,
    sandbox: StepSandbox | None = None,
) -> bool:
    """pip-install ``requirements`` into ``env`` from ``work_dir`` (where the constraints
    file goes); ``what`` names them in the log. A failure is logged and returned, not
    raised: the step then reports what it misses."""
    constraints = work_dir / "torch-constraint.txt"
    constraints.write_text(f"torch=={env.version}\n", encoding="utf-8")
    command = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check",
               "--only-binary=:all:", "-c", str(constraints), *requirements]
    log.write(f"ootci: installing {what}: {' '.join(requirements)}")
    if sandbox is not None:
        sandbox = sandbox.installing_into(env.venv_dir)
        command = sandbox.command(command, work_dir)
    result = run_streaming(command, cwd=work_dir,
                           env=child_env({}, pythonpath_front=env.pythonpath),
                           log=log, timeout_s=1800,
                           preexec_fn=sandbox.preexec() if sandbox is not None else None)
    if result.returncode != 0:
        log.write(f"ootci: installing {what} failed (exit {result.returncode}): check each "
                  "is a pip requirement with a wheel for this Python")
    return result.returncode == 0
