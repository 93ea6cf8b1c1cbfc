"""A second torch env from the shared package cache: seconds and almost no new disk.

Provisions torch 2.13.0 (the local wheel in pip's find-links dirs, or ``--spec``) twice, as two workers sharing one package cache would: the first env
fetches and unpacks the wheels into the cache and hard-links them, the second finds
everything in the cache. For each: wall time and the bytes of disk it added (blocks of
files whose inodes were not on disk before, each inode once). One run, same machine.

    .venv/bin/python benchmarks/env_cache.py [--spec pip:torch==2.13.0] [--keep]

Target (issue #19): the second env <= 10 s and <= 200 MB of new disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from workers.pipeline.env.installer import Installer
from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.logs.sink import LogSink

MB = 1 << 20


def inodes(*roots: Path) -> dict[tuple[int, int], int]:
    """(dev, inode) -> bytes on disk, for every regular file under ``roots``."""
    found: dict[tuple[int, int], int] = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                found[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return found


def measure(spec: str, cache: Path, packages: Path, tmp: Path, label: str) -> tuple[float, int]:
    before = inodes(tmp)
    started = time.monotonic()
    with LogSink(tmp / f"{label}.log") as log:
        env = provision(parse_spec(spec), cache, log, package_cache=packages)
    seconds = time.monotonic() - started
    added = sum(size for key, size in inodes(tmp).items() if key not in before)
    print(f"{label}: torch {env.version} in {seconds:.1f} s, {added / MB:.0f} MB new disk "
          f"({env.python.parent.parent})")
    return seconds, added


def local_wheel() -> str:
    """``wheel:`` of a torch 2.13.0 wheel in pip's find-links dirs (where ``pip install
    torch==2.13.0`` finds it on this machine), else ``pip:torch==2.13.0`` (pip's choice)."""
    for entry in os.environ.get("PIP_FIND_LINKS", "").split():
        for wheel in sorted(Path(entry).glob("torch-2.13.0*.whl")):
            return f"wheel:{wheel}"
    return "pip:torch==2.13.0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=None, help="default: the local torch 2.13.0 wheel")
    parser.add_argument("--keep", action="store_true", help="keep the temporary caches")
    args = parser.parse_args()
    spec = args.spec or local_wheel()
    print(f"spec: {spec}")
    # Beside the repository: hard links need the package cache and the envs on one filesystem.
    tmp = Path(tempfile.mkdtemp(prefix="ootci-env-cache-", dir=Path(__file__).resolve().parent))
    packages = tmp / "packages"
    installer = Installer.detect(packages)
    print(f"installer: {installer.name}; package cache {packages}")
    try:
        first_s, first_b = measure(spec, tmp / "worker1", packages, tmp, "first env")
        second_s, second_b = measure(spec, tmp / "worker2", packages, tmp, "second env")
        ok = second_s <= 10 and second_b <= 200 * MB
        print(f"second/first: time {second_s / first_s:.2f}x, disk {second_b / max(first_b, 1):.3f}x; "
              f"target second <= 10 s and <= 200 MB: {'met' if ok else 'NOT met'}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            # The envs are read-only: give the dirs their write bit back to remove them.
            for dirpath, dirs, _files in os.walk(tmp):
                for name in [".", *dirs]:
                    full = os.path.join(dirpath, name)
                    if not os.path.islink(full):
                        os.chmod(full, os.lstat(full).st_mode | 0o200)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
