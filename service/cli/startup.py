"""The command's start-up: its imports run without the cyclic garbage collector.

An ``ootci`` command imports some 600 modules (SQLAlchemy, the ORM's mapped classes,
pydantic, the pipeline) before it does any work, and what they create lives as long as the
process. Python's collector, counting those allocations, runs again and again meanwhile,
each full pass over everything made so far: about a quarter of the imports' CPU (0.68 ->
0.51 CPU-s with it off, issue #31), paid by every ``ootci run``. So the imports run with
it off, and what they made is frozen (``gc.freeze``: a permanent generation no pass scans)
before it is on again; garbage the command makes later is collected as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def importing() -> Iterator[None]:
    """Imports (or any start-up whose objects live for the process) inside, no collection
    pass meanwhile; nests, and leaves the collector as it found it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
