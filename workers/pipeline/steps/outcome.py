"""What a step ends with: the value every step returns to the orchestration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from service.domain.states import StepStatus


@dataclass(frozen=True)
class StepOutcome:
    status: StepStatus  # one of StepStatus.ENDED
    exit_code: int | None
    summary: str = ""
    log_path: Path | None = None
