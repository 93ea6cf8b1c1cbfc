"""One Inductor/Triton cache per run, shared by every test process of the run.

Inductor keeps what a compile made (the FX graph cache, the C++ and Triton kernels it built)
in ``$TORCHINDUCTOR_CACHE_DIR``: a process that compiles a graph another process of the run
compiled loads it instead (the bundled backend's ``test_compile.py``, measured in a second
process: 16 CPU-s instead of 50). Left to Inductor's default the cache sits under the TMPDIR
of whoever starts the process (``torchinductor_<user>``), so a shard another worker process
runs, under its own TMPDIR, or a recipe that sets its own TMPDIR, pays the cold compile again.

So the code that runs a run (``execute.py``, a shard's task) opens :func:`compile_cache_scope`
for the run's dir, and every pytest process of its steps (parts, restarts after a crash, the
rerun of failures, the conformance suite, the isolate step, the shards this worker runs) gets
the same cache dir, inside the run's dir: writable in the step's sandbox and counted against
its disk budget like the run's other dirs. Never across runs: the dir is the run's alone and
goes with it (a first attempt starts from an empty run dir; the GC removes old ones). A
recipe's own ``[test] env`` naming these variables wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

CACHE_DIR = "compile-cache"

_current: ContextVar[Path | None] = ContextVar("ootci_compile_cache", default=None)


def compile_cache_dir(run_dir: Path) -> Path:
    """The compile cache of the run whose dir is ``run_dir``."""
    return run_dir / CACHE_DIR


@contextmanager
def compile_cache_scope(run_dir: Path) -> Iterator[Path]:
    """Test processes started inside this block (in this thread, and in the threads of a
    parallel step, which copy its context) share the run's compile cache."""
    token = _current.set(compile_cache_dir(run_dir))
    try:
        yield compile_cache_dir(run_dir)
    finally:
        _current.reset(token)


def current_compile_cache() -> Path | None:
    """The run's compile cache; None outside a run (Inductor's default then)."""
    return _current.get()


def cache_environ(cache: Path) -> dict[str, str]:
    """What points Inductor and Triton at ``cache``."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TRITON_CACHE_DIR": str(cache / "triton")}

