"""The weekly pin report, made: per registered backend, its current upstream pin (the pin
file in its source tree, ``[pins] file`` of its ootci.toml, else the first of OOTCI_PINS),
the newest build it passed on, the breakages open since, a recommendation, stored; and,
when ``[pins] repo`` is configured too, the bump PR owed to the vendor's repository.

Plain functions: the worker task (``workers/tasks.py``) and ``ootci pins report`` call
``make_weekly_reports``.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, select

from service.commands.notifications import notify
from service.commands.pin_reports import PinTarget, owe_bump_pr, store_report, week_of
from service.config import Settings
from service.db import session_scope
from service.domain.notify import Event
from service.domain.pin_bump import BUMP, recommend
from service.models import Backend, utcnow
from service.queries.pin_reports import newest_green, open_breakages_since, pinned_build

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_BARE_SHA = re.compile(r"[0-9a-fA-F]{7,40}")


class PinConfigError(ValueError):
    """A ``[pins]`` table that cannot be used; the message names the file and the key."""


def pin_target(source: Path) -> PinTarget | None:
    """``[pins]`` of the backend's ootci.toml, or None when it has none."""
    recipe = source / "ootci.toml"
    try:
        data = tomllib.loads(recipe.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None  # the run's recipe step reports a broken recipe, not the pin report
    table = data.get("pins")
    if not isinstance(table, dict):
        return None
    repo, file = table.get("repo", ""), table.get("file")
    if not isinstance(repo, str) or (repo and not _REPO.fullmatch(repo)):
        raise PinConfigError(f"{recipe}: [pins] repo must be owner/name, not {repo!r}")
    if not isinstance(file, str) or not file or file.startswith("/") or ".." in file.split("/"):
        raise PinConfigError(f"{recipe}: [pins] file must be a path inside the repository")
    base = table.get("branch", "main")
    branch = table.get("bump_branch", "ootci/pytorch-pin-bump")
    if not isinstance(base, str) or not isinstance(branch, str) or base == branch:
        raise PinConfigError(f"{recipe}: [pins] branch and bump_branch must differ")
    return PinTarget(repo, file, base, branch)


def current_pin(source: Path, target: PinTarget | None, settings: Settings) -> str | None:
    """The pin the backend builds against now: its pin file's first line (a bare sha, as
    PyTorch's own pin files hold, means ``commit:<sha>``), else the first configured pin."""
    if target is not None:
        path = source / target.file
        if path.is_file():
            for line in path.read_text().splitlines():
                text = line.strip()
                if text and not text.startswith("#"):
                    return f"commit:{text.lower()}" if _BARE_SHA.fullmatch(text) else text
    return settings.pins[0] if settings.pins else None


@dataclass(frozen=True)
class Made:
    backend: str
    report_id: int
    action: str
    reason: str
    bump_owed: bool


def make_weekly_reports(
    engine: Engine, settings: Settings, *, now: dt.datetime | None = None
) -> list[Made]:
    """This week's report for every backend (made again: replaced), each committed with
    the bump PR it owes."""
    now = now or utcnow()
    made = []
    with session_scope(engine) as session:
        backends = list(session.scalars(select(Backend).order_by(Backend.name)))
        for backend in backends:
            source = Path(backend.source)
            target = pin_target(source)
            pin_text = current_pin(source, target, settings)
            pin = pinned_build(session, pin_text) if pin_text else None
            green = newest_green(session, backend.id, now=now)
            breakages = open_breakages_since(session, backend.id, pin.date if pin else None)
            recommendation = recommend(pin_text, pin, green, breakages)
            report = store_report(
                session, backend, week_of(now.date()), pin_text=pin_text, pin=pin, green=green,
                recommendation=recommendation,
            )
            owed = owe_bump_pr(session, report, backend, target) if target and target.repo else False
            if report.action == BUMP and report.proposed_spec:
                notify(session, backend.id, Event.PIN_BUMP,
                       {"id": report.id, "to": report.proposed_spec, "from": pin_text,
                        "title": report.reason},
                       key=f"pin-report:{report.id}:{report.proposed_spec}",
                       digest_hour=settings.notify_digest_hour)
            made.append(Made(backend.name, report.id, report.action, report.reason, owed))
    return made
