"""An append-only, line-flushed log for one pipeline step.

Every line reaches the file before the next one is read, so a step that is killed (timeout,
OOM, a worker restart) leaves a log holding everything it printed up to that moment. Known
secret values are masked before a line goes anywhere (file, tail, progress display).

A log is capped (``max_bytes``): the first half of the budget goes to the file as it comes;
once that is full, lines are held in a bounded tail (the other half) and written at close
after one line saying how much was cut. A step that prints for ever costs the worker, the
database and every reader at most ``max_bytes``; the head (how it started) and the tail
(how it ended) are what a diagnosis reads. While the step runs, readers see the head.

What reaches the file is also handed to ``on_bytes`` (the pipeline streams it to the
database, ``logs/stream.py``): masked and within the cap, exactly as the file holds it.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from workers.pipeline.logs.masking import SecretMasker, process_masker

DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024


class LogSink:
    """Writes lines to ``path`` (appending), keeps the last ``tail_lines`` in memory and hands
    each line to ``on_line`` (e.g. a progress display), all masked by ``masker``. Safe to
    write from several threads: a step's output reader and the step itself both log."""

    def __init__(
        self,
        path: Path,
        *,
        on_line: Callable[[str], None] | None = None,
        tail_lines: int = 200,
        masker: SecretMasker | None = None,
        max_bytes: int = DEFAULT_MAX_LOG_BYTES,
        on_bytes: Callable[[bytes], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("ab")
        self._on_line = on_line
        self._on_bytes = on_bytes
        # Without the worker's settings, the secrets its environment holds.
        self._mask = masker or process_masker()
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._lock = threading.Lock()
        self.lines_written = 0
        self._head_room = max_bytes // 2 - self.path.stat().st_size
        self._tail_budget = max_bytes - max_bytes // 2
        self._held: deque[bytes] = deque()  # the tail held back once the head is full
        self._held_bytes = 0
        self.cut_bytes = 0
        self.cut_lines = 0
        # The first error writing the file (ENOSPC): the step reports it as infra.
        self.write_error: OSError | None = None

    def write(self, line: str) -> None:
        """Append one line (a trailing newline is dropped, embedded ones split it)."""
        for part in self._mask(line.rstrip("\n")).split("\n"):
            with self._lock:
                if self._file.closed:
                    raise ValueError(f"log {self.path} is closed")
                try:
                    self._keep((part + "\n").encode("utf-8", "replace"))
                except OSError as exc:
                    self.write_error = self.write_error or exc
                    raise
                self._tail.append(part)
                self.lines_written += 1
            if self._on_line is not None:
                self._on_line(part)

    def _keep(self, line: bytes) -> None:
        """Write ``line`` while the head has room, else hold it in the bounded tail."""
        if self._head_room >= len(line) and not self._held:
            self._file.write(line)
            self._file.flush()
            self._head_room -= len(line)
            if self._on_bytes is not None:
                self._on_bytes(line)
            return
        self._head_room = 0
        self._held.append(line)
        self._held_bytes += len(line)
        while self._held_bytes > self._tail_budget and self._held:
            dropped = self._held.popleft()
            self._held_bytes -= len(dropped)
            self.cut_bytes += len(dropped)
            self.cut_lines += 1

    def _write_held_tail(self) -> None:
        if self.cut_lines:
            self._file.write(
                f"ootci: log capped: {self.cut_bytes} bytes ({self.cut_lines} lines) cut here; "
                "the head above and the tail below are kept\n".encode()
            )
        self._file.writelines(self._held)
        self._held.clear()
        self._held_bytes = 0

    def tail(self, n: int = 50) -> list[str]:
        """The last ``n`` lines written (at most the buffer's size)."""
        with self._lock:
            lines = list(self._tail)
        return lines[-n:] if n > 0 else []

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                try:
                    self._write_held_tail()
                    self._file.close()
                except OSError as exc:  # the buffered rest did not fit (ENOSPC)
                    self.write_error = self.write_error or exc
                    if not self._file.closed:
                        # The same disk, still full: the first error says so.
                        with contextlib.suppress(OSError):
                            self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> LogSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
