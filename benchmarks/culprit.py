"""How fast culprit ranking scores a regression range: commits ranked per second on one core
(target: a 500-commit range with files and patches ranked in <= 1 s).

    .venv/bin/python benchmarks/culprit.py [--commits 500] [--files 8] [--repeat 5]

The range is built from the culprit corpus generator (evals/data/culprit/make_cases.py):
the commits of every case (culprits, decoys, fillers) pooled, then each commit widened to
``--files`` changed files of ~40 patch lines (PyTorch's median commit is smaller; this is
the heavy end), and the getcvar-migration culprit hidden in the middle. Timed:

- cold: index the range and rank it against one failure (what one breakage costs);
- warm: the indexed range ranked against each failure of the corpus in turn (a breakage
  with many failures, or several breakages over one range).

The answer is checked (the hidden culprit must rank first), so a fast wrong answer does not
count. Times are CPU seconds of this process (``time.process_time``); wall time next to it.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evals.culprit import (  # noqa: E402
    DEFAULT_CORPUS,
    commit_from_github,
    load_case,
    load_corpus,
)
from service.domain.culprit import RangeIndex  # noqa: E402
from service.domain.upstream import FileChange, UpstreamCommit  # noqa: E402


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_cases", DEFAULT_CORPUS / "make_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_cases"] = module
    spec.loader.exec_module(module)
    return module


def build_range(n_commits: int, files_per_commit: int, seed: int = 7) -> tuple[
        list[UpstreamCommit], str]:
    gen = _generator()
    rng = random.Random(seed)
    pool: list[UpstreamCommit] = []
    culprit: UpstreamCommit | None = None
    for case in gen.cases():
        data = gen.build(case)
        for c in data["compare"]["commits"]:
            commit = commit_from_github(data["commits"][c["sha"]])
            if case.name == "getcvar-migration":
                if commit.sha == data["expected"]["sha"]:
                    culprit = commit
                continue  # the case's own decoys stay out: one culprit, one revert story
            pool.append(commit)
    rng.shuffle(pool)
    fillers = [c for c in pool if c.files][: n_commits - 1]
    widened = [_widen(c, files_per_commit, rng, gen) for c in fillers]
    assert culprit is not None, "the getcvar-migration case lost its culprit"
    widened.insert(len(widened) // 2, culprit)
    return widened, culprit.sha


def _widen(commit: UpstreamCommit, files: int, rng: random.Random, gen) -> UpstreamCommit:  # type: ignore[no-untyped-def]
    extra: list[FileChange] = list(commit.files)
    while len(extra) < files:
        title, path, removed, added, func = rng.choice(gen._FILLER)
        body = []
        for _ in range(4):  # four hunks of ~10 lines
            start = rng.randint(10, 3000)
            body.append(gen.hunk(start, ["", "  // unchanged context line"], removed, added,
                                 ["  // more context", ""], func))
        patch = "\n".join(body)
        stem, dot, ext = path.rpartition(".")
        extra.append(FileChange(f"{stem}_{len(extra)}{dot}{ext}", "modified", patch=patch,
                                additions=patch.count("\n+"), deletions=patch.count("\n-")))
    return replace(commit, files=tuple(extra))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    commits, culprit = build_range(args.commits, args.files)
    failure = load_case(DEFAULT_CORPUS / "getcvar-migration.json").evidence
    others = [e for case in load_corpus() for e in case.evidence]
    lines = sum((f.patch or "").count("\n") + 1 for c in commits for f in c.files)
    print(f"range: {len(commits)} commits, {sum(len(c.files) for c in commits)} files, "
          f"{lines} patch lines")

    cold: list[float] = []
    warm: list[float] = []
    wall: list[float] = []
    for _ in range(args.repeat):
        w0, t0 = time.perf_counter(), time.process_time()
        index = RangeIndex(commits)
        ranking = index.rank(failure)
        cold.append(time.process_time() - t0)
        wall.append(time.perf_counter() - w0)
        if ranking.top is None or ranking.top.sha != culprit:
            print("WRONG: the hidden culprit is not ranked first", file=sys.stderr)
            return 1
        t1 = time.process_time()
        for evidence in others:
            index.rank([evidence])
        warm.append((time.process_time() - t1) / len(others))

    best_cold = min(cold)
    print(f"cold (index + rank one failure): {best_cold * 1000:.0f} ms CPU "
          f"(median {statistics.median(cold) * 1000:.0f} ms, wall {min(wall) * 1000:.0f} ms)"
          f" = {len(commits) / best_cold:,.0f} commits/s")
    print(f"warm (rank one more failure over the indexed range): {min(warm) * 1000:.1f} ms "
          f"= {len(commits) / min(warm):,.0f} commits/s")
    print(f"target: {len(commits)} commits in <= 1 s: {best_cold:.3f} s "
          f"({1.0 / best_cold:.1f}x under the budget)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
