"""A step's log is capped: head and tail kept, the cut said (issue #14 item 6)."""

from __future__ import annotations

from pathlib import Path

from workers.pipeline.logs.sink import LogSink


def test_a_log_over_its_cap_keeps_head_and_tail_and_says_how_much_was_cut(
    tmp_path: Path,
) -> None:
    path = tmp_path / "build.log"
    lines = [f"line {i:06d} " + "x" * 50 for i in range(100_000)]  # ~6.3 MB
    with LogSink(path, max_bytes=200_000) as log:
        for line in lines:
            log.write(line)
    data = path.read_text()
    assert len(data.encode()) < 200_000 + 200
    kept = data.splitlines()
    assert kept[0] == lines[0] and kept[-1] == lines[-1]
    marker = next(line for line in kept if line.startswith("ootci: log capped"))
    cut = int(marker.split(": ")[2].split()[0])
    cut_lines = int(marker.split("(")[1].split()[0])
    assert cut_lines == len(lines) - (len(kept) - 1)
    assert cut == sum(len(line) + 1 for line in lines) - (len(data.encode()) - len(marker) - 1)
    # What is kept is contiguous on both sides of the marker.
    at = kept.index(marker)
    assert kept[:at] == lines[:at]
    assert kept[at + 1 :] == lines[len(lines) - (len(kept) - at - 1) :]


def test_a_log_under_its_cap_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    with LogSink(path, max_bytes=1_000_000) as log:
        for i in range(1000):
            log.write(f"line {i}")
    assert path.read_text().splitlines() == [f"line {i}" for i in range(1000)]
