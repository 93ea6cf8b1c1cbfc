"""Build the backend against several torch releases and run its suite on each.

The release matrix of backend/docs/compat.md ("Verified releases"), made
repeatable: for every venv given (one torch release each, with numpy,
pytest, pytest-timeout, expecttest, pyyaml, ``setuptools>=68,<82``, wheel,
ninja and cmake installed next to torch; psutil too for ``--upstream``), one
after the other:

1. install the backend non-editable into it
   (``pip install --no-build-isolation --no-deps --force-reinstall ./backend``;
   CMake build dir ``backend/build/<torch version>``, so releases never share
   objects; setuptools' own staging dirs ``backend/build/lib.*`` /
   ``bdist.*`` are removed first so no library of another release is packed);
2. run the whole backend suite from a scratch directory
   (``python -m pytest <repo>/backend/tests -p no:cacheprovider``), so
   ``import torch_openreg`` is the installed package;
3. optionally (``--upstream DIR``) run PyTorch's OpenReg test files in DIR with
   benchmarks/upstream_openreg_suite.py (docs/upstream-openreg-suite.md).

It prints passed / failed / skipped and the build and suite seconds per
release, then the failing tests. Logs (build, pytest, junit xml, upstream
table) go to ``--log-dir``. The machines are shared: run it under nice.

    nice -n 19 python benchmarks/torch_releases.py \\
        /work/venvs/torch-2.9.1 /work/venvs/torch-2.13.0 \\
        /work/venvs/torch-2.14.1 /work/venvs/torch-2.15.0 --log-dir /tmp/matrix
    nice -n 19 python benchmarks/torch_releases.py VENV... \\
        --upstream /path/to/upstream/tests          # also upstream's files
    python benchmarks/torch_releases.py VENV... --no-build   # suite only

Exit status 0 when every build succeeded and every suite was green.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Release:
    venv: Path
    torch: str = "?"
    build_s: float = 0.0
    suite_s: float = 0.0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    note: str = ""
    failures: list[str] = field(default_factory=list)


def python_of(venv: Path) -> str:
    return str(venv / "bin" / "python")


def torch_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
    )
    return out.stdout.strip() if out.returncode == 0 else ""


def build(rel: Release, backend: Path, log: Path) -> bool:
    for staging in [*backend.glob("build/lib.*"), *backend.glob("build/bdist.*")]:
        shutil.rmtree(staging, ignore_errors=True)
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(
            [
                python_of(rel.venv),
                "-m",
                "pip",
                "install",
                "-v",
                "--no-build-isolation",
                "--no-deps",
                "--force-reinstall",
                str(backend),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tempfile.gettempdir(),
        )
    rel.build_s = time.monotonic() - start
    if proc.returncode != 0:
        rel.note = f"build failed (pip exit {proc.returncode}, see {log})"
        return False
    return True


def run_suite(rel: Release, tests: Path, log_dir: Path, tag: str) -> None:
    junit = log_dir / f"suite-{tag}.xml"
    start = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="openreg-suite-") as scratch,
        (log_dir / f"suite-{tag}.log").open("w") as out,
    ):
        subprocess.run(
            [
                python_of(rel.venv),
                "-m",
                "pytest",
                str(tests),
                "-p",
                "no:cacheprovider",
                "-q",
                "-rfE",
                f"--junitxml={junit}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=scratch,
        )
    rel.suite_s = time.monotonic() - start
    if not junit.exists():
        rel.note = rel.note or "no junit xml: pytest did not finish"
        return
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            rel.failed += 1
            rel.failures.append(test_id)
        elif case.find("skipped") is not None:
            rel.skipped += 1
        else:
            rel.passed += 1


def run_upstream(rel: Release, directory: Path, log_dir: Path, tag: str) -> None:
    keep = log_dir / f"upstream-{tag}"
    with (log_dir / f"upstream-{tag}.txt").open("w") as out:
        subprocess.run(
            [
                python_of(rel.venv),
                str(REPO / "benchmarks" / "upstream_openreg_suite.py"),
                str(directory),
                "--details",
                "--keep",
                str(keep),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venvs", nargs="+", type=Path, help="one venv per torch release")
    parser.add_argument(
        "--backend",
        type=Path,
        default=REPO / "backend",
        help="backend source tree (default: this repository's)",
    )
    parser.add_argument(
        "--log-dir", type=Path, default=Path(tempfile.gettempdir()) / "torch-releases"
    )
    parser.add_argument(
        "--no-build", action="store_true", help="run the suites on what is installed"
    )
    parser.add_argument(
        "--upstream", type=Path, help="also run upstream's OpenReg test files in this dir"
    )
    args = parser.parse_args(argv)

    args.log_dir.mkdir(parents=True, exist_ok=True)
    backend = args.backend.resolve()
    releases = []
    for venv in args.venvs:
        rel = Release(venv.resolve())
        releases.append(rel)
        rel.torch = torch_version(python_of(rel.venv)) or "?"
        tag = rel.torch.replace("+", "_")
        if rel.torch == "?":
            rel.note = "no torch importable"
        elif args.no_build or build(rel, backend, args.log_dir / f"build-{tag}.log"):
            run_suite(rel, backend / "tests", args.log_dir, tag)
            if args.upstream:
                run_upstream(rel, args.upstream.resolve(), args.log_dir, tag)
        print(
            f"  {rel.torch}: {rel.passed} passed, {rel.failed} failed, {rel.skipped} skipped "
            f"(build {rel.build_s:.0f}s, suite {rel.suite_s:.0f}s) {rel.note}",
            file=sys.stderr,
            flush=True,
        )

    print("| torch | passed | failed | skipped | build s | suite s | notes |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for rel in releases:
        print(
            f"| {rel.torch} | {rel.passed} | {rel.failed} | {rel.skipped} "
            f"| {rel.build_s:.0f} | {rel.suite_s:.0f} | {rel.note} |"
        )
    for rel in releases:
        for test_id in rel.failures:
            print(f"  {rel.torch} FAILED {test_id}")
    if args.upstream:
        print(f"upstream tables: {args.log_dir}/upstream-<torch>.txt")
    return 0 if all(not r.note and not r.failed for r in releases) else 1


if __name__ == "__main__":
    sys.exit(main())
