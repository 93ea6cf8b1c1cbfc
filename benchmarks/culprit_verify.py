"""What verifying one culprit costs, against what the red run it verifies cost.

The set-up of tests/integration/test_culprit_verify.py, as real processes: a header
backend built with the real compiler against nightly wheels from a local index, a green
night, a red night, then `ootci culprit RED --verify` against the loopback fake GitHub.
Prints the red run's build + failing tests (its step durations), the verification run's
own duration and the whole `--verify` command's wall time (ranking, overlay, run, report),
and the ratio. Then the one cost the tiny wheels hide: making an overlay of the real
installed torch (~15k files, hard links) with one header restored.

    .venv/bin/python benchmarks/culprit_verify.py

Target (issue #29): one verification <= the red run's build + failing tests + 30 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from evals.mutants.overlay import installed_torch_dir  # noqa: E402
from evals.paths import CULPRIT_CASES  # noqa: E402
from service.domain.verification import unified_patch  # noqa: E402
from service.models import Run  # noqa: E402
from tests.support.fake_github import FakeGitHub  # noqa: E402
from tests.support.fake_torch import NightlyIndex  # noqa: E402
from tests.support.header_backend import ALLOCATOR_H, ALLOCATOR_H_CONST, write_header_backend  # noqa: E402
from tests.support.paths import REPO_ROOT  # noqa: E402
from workers.jobs.verify_overlay import build_overlay, remove_overlay  # noqa: E402

HEADER = "c10/core/Allocator.h"


def ootci(env: dict[str, str], *args: str) -> tuple[float, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update(env)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO_ROOT, env=environ,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ootci {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - start, proc.stdout


def step_seconds(engine_url: str, run_id: int) -> dict[str, float]:
    engine = create_engine(engine_url)
    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        out = {step.name: float(step.duration_s or 0.0) for step in run.steps}
        out["run"] = ((run.finished_at - run.started_at).total_seconds()
                      if run.finished_at and run.started_at else 0.0)
    engine.dispose()
    return out


def main() -> None:
    case = json.loads((CULPRIT_CASES / "allocate-const.json").read_text())
    for f in case["commits"][case["expected"]["sha"]]["files"]:
        if f["filename"] == HEADER:
            f["patch"] = unified_patch(ALLOCATOR_H, ALLOCATOR_H_CONST)
    with tempfile.TemporaryDirectory(prefix="ootci-bench-verify-") as tmp, FakeGitHub() as fake:
        root = Path(tmp)
        base, head = fake.load_compare_case(case)
        index = NightlyIndex(root / "index")
        backend = write_header_backend(root / "vendor")
        url = f"sqlite:///{root / 'ootci.db'}"
        env = {"OOTCI_HOME": str(root / "home"), "OOTCI_DATABASE_URL": url,
               "OOTCI_NIGHTLY_INDEX_URL": index.url, "OOTCI_GITHUB_API_URL": fake.url,
               "OOTCI_GITHUB_TOKEN": fake.token, "OOTCI_CULPRIT_VERIFY_TOP": "0"}
        for day, git, header in ((20, base, ALLOCATOR_H), (21, head, ALLOCATOR_H_CONST)):
            index.publish(f"2.14.0.dev202611{day:02d}+cpu", git, {HEADER: header})
            _, stdout = ootci(env, "run", "--torch", "nightly", "--backend", str(backend), "--json")
        red_id = json.loads(stdout)[0]["id"]
        red = step_seconds(url, red_id)
        # The nights do not verify (0 above): the one verification measured is this one.
        wall, stdout = ootci({**env, "OOTCI_CULPRIT_VERIFY_TOP": "3"},
                             "culprit", str(red_id), "--verify", "--json")
        doc = json.loads(stdout)
        verification = doc["suspects"][0]["verification"]
        ran = step_seconds(url, int(verification["run_id"]))

    red_cost = red.get("build", 0.0) + red.get("test", 0.0)
    print(f"red run {red_id}: build {red.get('build', 0):.2f} s + tests {red.get('test', 0):.2f} s "
          f"= {red_cost:.2f} s (whole run {red['run']:.2f} s)")
    print(f"verification ({verification['state']}): its run {ran['run']:.2f} s (provision "
          f"{ran.get('provision', 0):.2f} s, build {ran.get('build', 0):.2f} s, tests "
          f"{ran.get('test', 0):.2f} s); `ootci culprit --verify` wall {wall:.2f} s")
    print(f"ratio verification run / (red build + failing tests): {ran['run'] / red_cost:.2f}; "
          f"margin over the target (+30 s): {red_cost + 30 - ran['run']:.2f} s")
    print(f"ratio whole --verify command / (red build + failing tests): {wall / red_cost:.2f}; "
          f"margin: {red_cost + 30 - wall:.2f} s")

    torch_dir = installed_torch_dir()
    with tempfile.TemporaryDirectory(prefix="ootci-bench-overlay-", dir=torch_dir.parent.parent) as tmp:
        rel = "torch/include/c10/core/Allocator.h"
        start = time.perf_counter()
        overlay = build_overlay(torch_dir, Path(tmp) / "o", {rel: (torch_dir.parent / rel).read_bytes()})
        made = time.perf_counter() - start
        files = sum(len(f) for _, _, f in os.walk(overlay))
        start = time.perf_counter()
        remove_overlay(overlay)
        print(f"overlay of the installed torch ({files} files, hard links): made in {made:.2f} s, "
              f"removed in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
