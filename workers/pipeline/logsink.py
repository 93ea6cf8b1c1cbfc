"""An append-only, line-flushed log for one pipeline step.

Every line reaches the file before the next one is read, so a step that is killed (timeout,
OOM, a worker restart) leaves a log holding everything it printed up to that moment. Known
secret values are masked before a line goes anywhere (file, tail, progress display).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from workers.pipeline.masking import SecretMasker


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
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8", errors="replace")
        self._on_line = on_line
        # Without the worker's settings, the secrets its environment holds.
        self._mask = masker or SecretMasker.from_environ(os.environ)
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._lock = threading.Lock()
        self.lines_written = 0
        # The first error writing the file (ENOSPC): the step reports it as infra.
        self.write_error: OSError | None = None

    def write(self, line: str) -> None:
        """Append one line (a trailing newline is dropped, embedded ones split it)."""
        for part in self._mask(line.rstrip("\n")).split("\n"):
            with self._lock:
                if self._file.closed:
                    raise ValueError(f"log {self.path} is closed")
                try:
                    self._file.write(part + "\n")
                    self._file.flush()
                except OSError as exc:
                    self.write_error = self.write_error or exc
                    raise
                self._tail.append(part)
                self.lines_written += 1
            if self._on_line is not None:
                self._on_line(part)

    def tail(self, n: int = 50) -> list[str]:
        """The last ``n`` lines written (at most the buffer's size)."""
        with self._lock:
            lines = list(self._tail)
        return lines[-n:] if n > 0 else []

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()
                except OSError as exc:  # the buffered rest did not fit (ENOSPC)
                    self.write_error = self.write_error or exc

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
