"""Live progress of a run in the terminal (rich): one line per step, the latest log line."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from workers.pipeline.run_context import RunEvent

STATUS_STYLE = {"running": "cyan", "passed": "green", "failed": "red", "errored": "yellow"}


class RunProgress:
    def __init__(self, console: Console, run_id: int, *, enabled: bool = True) -> None:
        self.console = console
        self.run_id = run_id
        self.enabled = enabled and console.is_terminal
        self.plain = enabled and not console.is_terminal
        self.steps: dict[str, tuple[str, float, float | None]] = {}
        self.last_line = ""
        self.tests_done = 0
        self._live: Live | None = None

    def __enter__(self) -> RunProgress:
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(t, e, tb)

    def on_event(self, event: RunEvent) -> None:
        if event.kind == "step":
            started = self.steps.get(event.step, ("", time.monotonic(), None))[1]
            ended = None if event.status == "running" else time.monotonic()
            self.steps[event.step] = (event.status, started, ended)
            if self.plain:
                # Not a terminal (CI logs): one line per step transition, no redraws.
                extra = f" ({ended - started:.1f}s)" if ended else ""
                self.console.print(f"run {self.run_id}: {event.step} {event.status}{extra}")
        elif event.kind == "line":
            self.last_line = event.text.rstrip()[-160:]
            if event.step == "test" and (" PASSED" in event.text or " FAILED" in event.text):
                self.tests_done += 1
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_row(Text(f"run {self.run_id}", style="bold"))
        for name, (status, started, ended) in self.steps.items():
            elapsed = (ended or time.monotonic()) - started
            style = STATUS_STYLE.get(status, "white")
            label = f"{name:<10} {status:<8} {elapsed:6.1f}s"
            if name == "test" and self.tests_done:
                label += f"  {self.tests_done} tests"
            table.add_row(Text(label, style=style))
        if self.last_line:
            table.add_row(Text(self.last_line, style="dim"))
        return table
