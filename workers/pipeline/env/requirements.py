"""A recipe's own requirements (``[build] requires``, ``[test] requires``) installed into a
run's private env.

Wheels only, installed by ootci's pip in the step's sandbox with the network on (the
operator's index), as the step's uid: the env is the run's own. Torch is held at the
env's version by a constraint: a requirement must not replace the torch under test.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.isolation.procs import child_env, run_streaming
from workers.pipeline.isolation.sandbox import StepSandbox
from workers.pipeline.logs.sink import LogSink


def already_satisfied(requirements: Sequence[str], sys_path: Sequence[str], torch_version: str) -> bool:
    """Whether pip would find nothing to do for ``requirements`` in the interpreter whose
    ``sys.path`` this is: each one, and what each needs (recursively, its markers evaluated
    here), installed at a version it allows, the first found on the path being the one that
    counts, and torch at ``torch_version`` (the constraint). Anything this does not decide
    for certain (a URL, extras, a marker on a requirement itself, a name it cannot parse)
    answers False, so pip decides."""
    path = [p for p in sys_path if p and Path(p).is_dir()]
    pending: list[Requirement] = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            return False
        if req.url or req.extras or req.marker:
            return False
        pending.append(req)
    seen: set[str] = set()
    while pending:
        req = pending.pop()
        name = canonicalize_name(req.name)
        if req.url or req.extras:
            return False
        dist = next(iter(importlib.metadata.distributions(name=req.name, path=path)), None)
        if dist is None or not req.specifier.contains(dist.version, prereleases=True):
            return False
        if name == "torch" and dist.version != torch_version:
            return False
        if name in seen:
            continue
        seen.add(name)
        for text in dist.requires or ():
            try:
                needed = Requirement(text)
            except InvalidRequirement:
                return False
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                pending.append(needed)
    return True


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
