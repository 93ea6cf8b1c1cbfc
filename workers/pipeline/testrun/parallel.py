"""The test step across the worker's cores: the suite split by file into one part per process.

Each part is the serial step in miniature (``runner.py``): its own pytest process(es) with
the same crash isolation, per-test limits and rerun of failures, its own results file and
JUnit files under ``<work_dir>/part-<n>/``, and its own log (``part-<n>/test.log``) whose
lines also reach the step's log prefixed with ``[part n]``. A part never collects the files
of another part (``$OOTCI_IGNORE_FILES``), so a crash or a hang costs one result in one part
and the others run on.

The files come from pytest itself (the plugin's listing mode, which imports no test module):
whatever the recipe's command and pytest.ini select, nothing more. They are spread by what
each took in the backend's previous run (the longest first onto the lightest part), by size
for a file that has no time yet.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workers.pipeline.isolation.procs import ProcResult, attempt_scope, current_attempt
from workers.pipeline.logs.masking import SecretMasker
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.testrun.records import TestRecord


@dataclass(frozen=True)
class PartResult:
    """What one part (or the whole serial step) ran to: its records in the order they were
    recorded, its first pytest process's exit and, when it could not finish, why."""

    records: dict[str, TestRecord]
    first: ProcResult
    problem: str | None


# Runs one part: (its dir, its log, the file naming the files it must not collect).
RunPart = Callable[[Path, LogSink, Path], PartResult]


def default_processes() -> int:
    """The worker's cores (those this process may run on, not the machine's)."""
    return max(1, len(os.sched_getaffinity(0)))


def partition(
    files: Sequence[str], processes: int, seconds: Mapping[str, float] | None = None
) -> list[list[str]]:
    """``files`` in at most ``processes`` non-empty parts of about the same expected running
    time, each part in the listing's order (the order a serial run takes them in).

    A file's expected time is what it took last time (``seconds``, keyed like ``files``);
    a file without one (new, or no earlier run) is weighed by its size, converted to
    seconds at the rate the timed files ran at."""
    count = max(1, min(processes, len(files)))
    cost = _expected_seconds(files, seconds or {})
    parts: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    # Longest first onto the lightest part; ties keep the listing's order.
    for path in sorted(files, key=cost.__getitem__, reverse=True):
        lightest = loads.index(min(loads))
        parts[lightest].append(path)
        loads[lightest] += cost[path]
    order = {path: i for i, path in enumerate(files)}
    return [sorted(part, key=order.__getitem__) for part in parts if part]


def _expected_seconds(files: Sequence[str], seconds: Mapping[str, float]) -> dict[str, float]:
    size = {f: max(_size(f), 1) for f in files}
    timed = [f for f in files if f in seconds]
    # Untimed files cost what their bytes cost in the timed ones (1 unit/byte with none).
    rate = sum(seconds[f] for f in timed) / sum(size[f] for f in timed) if timed else 0.0
    return {f: seconds[f] if f in seconds else size[f] * (rate or 1.0) for f in files}


def keyed_by_path(
    file_seconds: Mapping[str, float], files: Sequence[str], root: Path
) -> dict[str, float]:
    """``file_seconds`` (keyed as pytest names files: relative to the suite's root) keyed
    by the listing's absolute paths, as ``partition`` takes them."""
    listed = {os.path.relpath(f, root): f for f in files}
    return {listed[name]: s for name, s in file_seconds.items() if name in listed}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def run_parts(
    parts: list[list[str]],
    work_dir: Path,
    log: LogSink,
    run_part: RunPart,
    *,
    masker: SecretMasker | None = None,
    also_ignored: Sequence[str] = (),
) -> PartResult:
    """Run every part at once, one thread each (the work is in their pytest processes),
    and merge what they recorded into one result, in the order of the parts' files.
    ``also_ignored``: files no part collects (those of the other shards of a run)."""
    everything = [path for part in parts for path in part]
    results: list[PartResult | BaseException | None] = [None] * len(parts)

    def one(index: int) -> None:
        part_dir = work_dir / f"part-{index}"
        part_dir.mkdir(parents=True, exist_ok=True)
        mine = set(parts[index])
        ignore = part_dir / "ignore-files.txt"
        others = [*also_ignored, *(p for p in everything if p not in mine)]
        ignore.write_text("".join(f"{p}\n" for p in others), encoding="utf-8")

        def forward(line: str) -> None:
            log.write(f"[part {index}] {line}")

        try:
            with LogSink(part_dir / "test.log", on_line=forward, masker=masker) as part_log:
                results[index] = run_part(part_dir, part_log, ignore)
        except BaseException as exc:  # re-raised in the step's thread below
            results[index] = exc

    log.write(
        f"ootci: running the suite's {len(everything)} file(s) in {len(parts)} processes: "
        + "; ".join(f"part {i}: {len(p)} file(s)" for i, p in enumerate(parts))
    )
    # Each part's children belong to the step like the serial ones: the same attempt (the
    # lease's abort, the process groups a retry reaps) and the same child environment
    # policy (a context variable: a new thread starts without it).
    attempt = current_attempt()

    def in_step(index: int) -> None:
        with attempt_scope(attempt) if attempt is not None else contextlib.nullcontext():
            one(index)

    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(in_step, i),
                         name=f"test-part-{i}")
        for i in range(len(parts))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done: list[PartResult] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        assert result is not None  # every thread stores its result or its exception
        done.append(result)
    return merge(done, everything)


def merge(results: Sequence[PartResult], files: Sequence[str]) -> PartResult:
    """One result from the parts': records ordered by their file in the listing (records
    of no file, e.g. ``<session exit>``, last; the same one from several parts once), the
    first part's first exit, and every part's problem."""
    order = {path: i for i, path in enumerate(files)}
    merged: dict[str, TestRecord] = {}
    for result in results:
        for nodeid, record in result.records.items():
            merged.setdefault(nodeid, record)

    def position(nodeid: str) -> int:
        return order.get(_file_of(nodeid, order), len(order))

    ordered = dict(sorted(merged.items(), key=lambda item: position(item[0])))
    problems = [r.problem for r in results if r.problem is not None]
    return PartResult(ordered, results[0].first, "; ".join(problems) if problems else None)


def _file_of(nodeid: str, order: dict[str, int]) -> str:
    """The listed file a node id belongs to: node ids are relative to pytest's rootdir, the
    listing is absolute, so the longest listed path ending with the id's file part."""
    head = nodeid.split("::", 1)[0]
    best = ""
    for path in order:
        if (path == head or path.endswith("/" + head)) and len(path) > len(best):
            best = path
    return best
