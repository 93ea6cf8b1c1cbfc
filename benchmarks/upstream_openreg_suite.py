"""PyTorch's own OpenReg test files, run unchanged against our torch_openreg.

Upstream keeps a test suite for its example PrivateUse1 backend in
``test/cpp_extensions/open_registration_extension/torch_openreg/tests/`` of
pytorch/pytorch. Our bundled backend has the same package and device name, so
those files run against it as they are. This script measures how many pass: it
runs every ``test_*.py`` of a directory the operator provides (the upstream
files, fetched from the PyTorch revision of interest; they are not part of
this repository) in a pytest process of its own, and prints a table of
passed / failed / skipped per file and each failing test with the first line
of its error.

    .venv/bin/python benchmarks/upstream_openreg_suite.py /path/to/upstream/tests
    .venv/bin/python benchmarks/upstream_openreg_suite.py DIR -k test_ops.py --details

Each file gets its own interpreter because the files leave process-wide state
behind (the current device, a distributed process group, a test that exits
the interpreter when a backend is absent). pytest runs from a scratch
directory, so ``import torch_openreg`` finds the installed package, never a
source tree. The numbers are in docs/upstream-openreg-suite.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class FileResult:
    name: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    # (test id, first line of the failure) for each failed or erroring test
    failures: list[tuple[str, str]] = field(default_factory=list)
    note: str = ""


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def parse_junit(path: Path, result: FileResult) -> None:
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        test_id = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            result.failed += 1
            result.failures.append((test_id, first_line(bad.get("message")) or first_line(bad.text)))
        elif case.find("skipped") is not None:
            result.skipped += 1
        else:
            result.passed += 1


def run_file(python: str, test_file: Path, timeout: float, workdir: Path) -> FileResult:
    result = FileResult(test_file.name)
    junit = workdir / f"{test_file.stem}.xml"
    log = workdir / f"{test_file.stem}.log"
    start = time.monotonic()
    # A session of its own: a file whose multiprocessing children hang keeps pytest from
    # exiting after it wrote its report; on timeout the whole group goes.
    proc = subprocess.Popen(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         f"--junitxml={junit}", str(test_file)],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        result.note = f"killed after {timeout:.0f}s"
    log.write_text(output)
    result.seconds = time.monotonic() - start
    if junit.exists():
        parse_junit(junit, result)
    if result.note:
        return result
    if not junit.exists() or (proc.returncode not in (0, 1, 5) and not result.failures):
        result.note = f"pytest exit {proc.returncode}: {first_line(output)}"
    elif proc.returncode == 5:
        result.note = "no tests collected"
    return result


def print_table(results: list[FileResult], details: bool) -> None:
    width = max(len(r.name) for r in results)
    print(f"{'file':<{width}}  passed  failed  skipped  seconds")
    for r in results:
        extra = f"  ({r.note})" if r.note else ""
        print(f"{r.name:<{width}}  {r.passed:>6}  {r.failed:>6}  {r.skipped:>7}  {r.seconds:>7.1f}{extra}")
    total = FileResult("total")
    for r in results:
        total.passed += r.passed
        total.failed += r.failed
        total.skipped += r.skipped
    print(f"{'total':<{width}}  {total.passed:>6}  {total.failed:>6}  {total.skipped:>7}")
    failing = [(r.name, t, why) for r in results for t, why in r.failures]
    if failing:
        print("\nfailures:")
        for name, test_id, why in failing:
            print(f"  {name}::{test_id}" + (f"\n      {why}" if details else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="directory holding upstream's test_*.py files")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with torch and torch_openreg installed (default: this one)")
    parser.add_argument("-k", "--only", action="append", default=[],
                        help="run only this file name (repeatable)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per file")
    parser.add_argument("--details", action="store_true", help="print the first error line of each failure")
    parser.add_argument("--keep", type=Path, help="keep the junit xml and pytest logs in this directory")
    args = parser.parse_args(argv)

    files = sorted(p.resolve() for p in args.directory.glob("test_*.py"))
    if args.only:
        files = [p for p in files if p.name in set(args.only)]
    if not files:
        print(f"no test_*.py files in {args.directory}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="upstream-openreg-") as scratch:
        workdir = args.keep or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        results = []
        for f in files:
            results.append(run_file(args.python, f, args.timeout, workdir))
            print(f"  {f.name}: {results[-1].passed} passed, {results[-1].failed} failed", file=sys.stderr)
        print_table(results, args.details)
    return 0 if all(not r.failures and not r.note for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
