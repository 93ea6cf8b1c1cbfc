"""What the storage mask (service/models/masked.py) costs a run's writes.

    .venv/bin/python benchmarks/storage_mask.py [--rows 5000] [--secrets 8]

Measures, in CPU seconds of this process (``time.process_time``; wall time is printed next
to it, since on a shared machine it also counts other people's work):

- ``storage_mask`` on one failure message (about 300 characters, no secret in it: the
  usual case) and on one carrying two secrets, with ``--secrets`` secrets known;
- ``mask_json`` on a 50-entry outbox-like payload;
- inserting ``--rows`` test results (node id, message, details: three masked columns) into
  SQLite through the ORM, with the mask and with the mask replaced by the identity: the
  difference is what masking adds to the write of a large suite's results.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy.orm import Session  # noqa: E402

from service import secrets  # noqa: E402
from service.db import make_engine  # noqa: E402
from service.migrate import upgrade  # noqa: E402
from service.models import Backend, Run, TestResult  # noqa: E402
from service.models import masked as masked_types  # noqa: E402

MESSAGE = ("AssertionError: expected tensor([1., 2., 3.], device='openreg:0') to equal "
           "tensor([1., 2., 4.]) at index 2; see /tmp/ootci/run-17/test/test_ops.py:412 in "
           "test_add_out_openreg_float32 (called from torch.testing._comparison.assert_close "
           "with rtol=1.3e-06, atol=1e-05) while running under PYTORCH_TESTING_DEVICE_ONLY_FOR")


def per_call(fn: Callable[[], object], n: int) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        fn()
    return (time.process_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6


def insert_rows(rows: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/b.db")
        upgrade(engine)
        with Session(engine) as s:
            backend = Backend(name="bench", source="/src/bench")
            s.add(backend)
            s.flush()
            run = Run(backend_id=backend.id, torch_spec="nightly")
            s.add(run)
            s.flush()
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(rows):
                s.add(TestResult(run_id=run.id, nodeid=f"tests/test_ops.py::test_{i}",
                                 suite="test_ops.py", outcome="failed", message=MESSAGE,
                                 details=MESSAGE * 3))
            s.commit()
            result = time.process_time() - cpu, time.perf_counter() - wall
        engine.dispose()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--secrets", type=int, default=8)
    args = parser.parse_args()
    known = [f"secret-value-{i:02d}-{'x' * 20}" for i in range(args.secrets)]
    secrets.remember(*known, "postgresql://ootci:db-password-1@db/ootci")
    leaky = f"{MESSAGE} {known[0]} postgresql://u:pw-inline@h/db"
    payload = {f"k{i}": {"description": MESSAGE[:80], "n": i} for i in range(50)}

    for label, fn, n in [
        ("storage_mask, clean message", lambda: secrets.storage_mask(MESSAGE), 20000),
        ("storage_mask, two secrets", lambda: secrets.storage_mask(leaky), 20000),
        ("mask_json, 50-entry payload", lambda: secrets.mask_json(payload), 2000),
    ]:
        cpu_us, wall_us = per_call(fn, n)
        print(f"{label:32} {cpu_us:8.1f} us CPU/call ({wall_us:.1f} us wall)")

    masked_cpu, masked_wall = insert_rows(args.rows)
    with patch.object(masked_types, "storage_mask", lambda text: text):
        plain_cpu, plain_wall = insert_rows(args.rows)
    print(f"insert {args.rows} results, masked   {masked_cpu:6.2f} s CPU ({masked_wall:.2f} s wall)")
    print(f"insert {args.rows} results, unmasked {plain_cpu:6.2f} s CPU ({plain_wall:.2f} s wall)")
    print(f"masking adds {(masked_cpu - plain_cpu) / args.rows * 1e6:.0f} us CPU per result row "
          f"({(masked_cpu - plain_cpu) / max(plain_cpu, 1e-9) * 100:.0f}%)")


if __name__ == "__main__":
    main()
