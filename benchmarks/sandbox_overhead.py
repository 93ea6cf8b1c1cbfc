"""What the sandbox costs a step: starting a process in it versus plain, setting it up
once before the step (``prepare``: the dirs handed over and bwrap's set-up checked with
``true``), and one disk budget check over a large tree (this checkout's .venv stands in
for a build dir).

    .venv/bin/python benchmarks/sandbox_overhead.py

``--bundled``: the acceptance numbers of issue #33, in one run. The bundled backend's whole
``ootci run --torch installed`` (warm: each mode's home is warmed once first) sealed and
``--no-sandbox``, alternated, the min of ``--repeat``: wall, the CPU seconds of the run's
own process tree (sampled from /proc, ``_TreeCpu``: other load on the machine does not
count) and the machine's busy CPU (``cpu_meter``),
and the test counts of both, which must be equal. Then the legit fixture's the same way.

    .venv/bin/python benchmarks/sandbox_overhead.py --bundled [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_meter import CpuMeter  # noqa: E402
from service.config import Settings  # noqa: E402
from workers.pipeline.isolation.sandbox import (  # noqa: E402
    DiskBudget,
    probe,
    sandbox_for_tests,
)

ROUNDS = 20


def _spawn(cmd: list[str], preexec: object, cwd: Path) -> float:
    start = time.perf_counter()
    for _ in range(ROUNDS):
        subprocess.run(cmd, cwd=cwd, env={"PATH": os.environ["PATH"]}, check=True,
                       preexec_fn=preexec)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / ROUNDS


def main() -> None:
    root = ROOT
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home")
        print(f"support: {probe(settings.sandbox_uid).describe()}")
        sandbox = sandbox_for_tests(settings, writable=[Path(tmp) / "w"], visible=[root],
                                    watched=[], tmp=Path(tmp) / "t")
        start = time.perf_counter()
        for _ in range(ROUNDS):
            sandbox.prepare()
        prepared = (time.perf_counter() - start) / ROUNDS
        print(sandbox.describe())
        print(f"prepare (set-up check before each step): {prepared * 1000:.1f} ms")
        cmd = [sys.executable, "-c", "pass"]
        plain = _spawn(cmd, None, root)
        boxed = _spawn(sandbox.command(cmd, root), sandbox.preexec(), root)
        print(f"python -c pass: plain {plain * 1000:.1f} ms, sandboxed {boxed * 1000:.1f} ms, "
              f"ratio {boxed / plain:.2f}")
    tree = root / ".venv" if (root / ".venv").is_dir() else Path(sys.prefix)  # a worktree
    files = sum(len(f) for _, _, f in os.walk(tree))
    start = time.perf_counter()
    budget = DiskBudget([tree], budget_mb=1)  # one usage() walk
    walk = time.perf_counter() - start
    print(f"disk budget check over {files} files: {walk * 1000:.0f} ms "
          f"({walk * 1000 / files * 1000:.1f} us/file), then every {budget.interval_s:.1f} s: "
          f"{walk / budget.interval_s:.0%} of a core")


# ------------------------------------------------------------------ --bundled
_TICK = os.sysconf("SC_CLK_TCK")


class _TreeCpu:
    """The CPU seconds of a process tree, sampled from /proc every ``every_s``: the most
    each pid of the tree was seen to use, summed. ``RUSAGE_CHILDREN`` cannot count a sealed
    step (bwrap's pid-namespace init is never reaped by the monitor the worker waits for,
    so its children's time never reaches the worker), and other helpers' load makes the
    machine's busy time useless; the sampler treats both modes alike (a process shorter
    than ``every_s`` may be missed in either)."""

    def __init__(self, root: int, every_s: float = 0.25) -> None:
        import threading

        self.root, self.every_s = root, every_s
        self.seen: dict[tuple[int, int], float] = {}  # (pid, start time) -> CPU s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every_s)

    def _sample(self) -> None:
        stats: dict[int, tuple[int, int, float]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # after the comm: state ppid ... utime(12) stime(13) ... starttime(20)
            stats[int(entry)] = (int(fields[1]), int(fields[19]),
                                 (int(fields[11]) + int(fields[12])) / _TICK)
        tree = {self.root}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            if pid in stats:
                _, start, cpu = stats[pid]
                key = (pid, start)
                self.seen[key] = max(cpu, self.seen.get(key, 0.0))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self.seen.values())


def _whole_run(home: Path, backend: Path, sealed: bool) -> tuple[float, float, float, dict]:
    """One ``ootci run --torch installed``: wall s, the run tree's CPU s, the machine's
    busy CPU s, and the run's document."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env["OOTCI_HOME"] = str(home)
    env["CCACHE_DIR"] = str(home / "ccache")
    cmd = [sys.executable, "-m", "service.cli", "run", "--torch", "installed",
           "--backend", str(backend), "--json", *([] if sealed else ["--no-sandbox"])]
    start = time.perf_counter()
    with CpuMeter() as meter, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        sampler = _TreeCpu(child.pid)
        child.wait()
        cpu = sampler.stop()
        out.seek(0)
        err.seek(0)
        proc = subprocess.CompletedProcess(cmd, child.returncode, out.read(), err.read())
    wall = time.perf_counter() - start
    if warning := meter.use.quiet_warning():
        print(f"  {'sealed' if sealed else 'unsealed'}: {warning}", flush=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"ootci run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (doc,) = json.loads(proc.stdout)
    return wall, cpu, meter.use.busy_cpu_s, doc


def _give_back(home: Path) -> None:
    """One home for both modes (one torch env, one build dir: both warm alike): what an
    unsealed run wrote as root goes back to the sandbox uid, as a sealed run leaves it.
    Not timed."""
    if os.geteuid() != 0:
        return
    uid = Settings().sandbox_uid
    for top in (home / "cache" / "builds", home / "cache" / "ccache", home / "work"):
        for root, dirs, files in os.walk(top):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                if os.lstat(name).st_uid == 0:
                    os.lchown(name, uid, uid)


def _counts(doc: dict) -> dict[str, int]:
    counts = doc.get("test_counts") or {}
    return {k: int(v) for k, v in sorted(counts.items())}


def _compare(name: str, backend: Path, repeat: int, tmp: Path,
             warm: tuple[Path, Path] | None = None) -> None:
    """``warm``: (sealed, unsealed) homes an earlier run of this backend warmed."""
    if warm is not None:
        homes = {True: warm[0], False: warm[1]}
    else:
        homes = {True: tmp / f"{name}-sealed", False: tmp / f"{name}-open"}
        for sealed, home in homes.items():  # warm each: torch env, build dir, ccache
            _whole_run(home, backend, sealed)
    got: dict[bool, list[tuple[float, float, float, dict]]] = {True: [], False: []}
    for _ in range(repeat):  # alternated: a load change on the machine hits both
        for sealed, home in homes.items():
            if sealed and homes[False] == home:
                _give_back(home)
            got[sealed].append(_whole_run(home, backend, sealed))
            wall, cpu, busy, doc = got[sealed][-1]
            print(f"  {name} {'sealed' if sealed else 'unsealed'}: wall {wall:.1f} s, tree CPU "
                  f"{cpu:.1f} s, machine busy {busy:.1f} CPU-s, {doc.get('state')}, "
                  f"{_counts(doc)}, steps {[(s['name'], s['duration_s']) for s in doc['steps']]}",
                  flush=True)
    rows = {}
    for sealed, runs in got.items():
        wall = min(r[0] for r in runs)
        cpu = min(r[1] for r in runs)
        busy = min(r[2] for r in runs)
        counts = {json.dumps(_counts(r[3])) for r in runs}
        states = {r[3].get("state") for r in runs}
        rows[sealed] = (wall, cpu, busy)
        label = "sealed" if sealed else "--no-sandbox"
        print(f"{name} {label:>12}: wall {wall:6.1f} s, run tree CPU (sampled) {cpu:6.1f} s, machine "
              f"busy {busy:6.1f} CPU-s (min of {repeat}); states {sorted(map(str, states))}; "
              f"tests {' | '.join(sorted(counts))}")
    sealed_counts = {json.dumps(_counts(r[3])) for r in got[True]}
    open_counts = {json.dumps(_counts(r[3])) for r in got[False]}
    (ws, cs, bs), (wo, co, bo) = rows[True], rows[False]
    print(f"{name} overhead sealed/unsealed: wall {ws / wo - 1:+.1%}, run tree CPU (sampled) "
          f"{cs / co - 1:+.1%}, machine busy {bs / bo - 1:+.1%}; test counts "
          f"{'equal' if sealed_counts == open_counts else 'DIFFER'}")


def bundled(repeat: int, only: str | None, warm: tuple[Path, Path] | None) -> None:
    print(f"support: {probe(Settings().sandbox_uid).describe()}")
    with tempfile.TemporaryDirectory(prefix="ootci-seal-bench-") as tmp:
        if only in (None, "bundled"):
            _compare("bundled", ROOT / "backend", repeat, Path(tmp), warm)
        if only in (None, "legit"):
            _compare("legit", ROOT / "tests" / "fixtures" / "backends" / "legit", repeat,
                     Path(tmp))
    print(f"load average (1, 5 min): {os.getloadavg()[0]:.2f}, {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundled", action="store_true",
                        help="the bundled backend's and the legit fixture's whole runs")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=["bundled", "legit"])
    parser.add_argument("--warm-homes", nargs=2, type=Path, metavar=("SEALED", "UNSEALED"),
                        help="OOTCI_HOMEs an earlier bundled run warmed (skips the warm-up)")
    args = parser.parse_args()
    if args.bundled:
        bundled(args.repeat, args.only, tuple(args.warm_homes) if args.warm_homes else None)
    else:
        main()
