"""The weekly pin report's evidence and history.

Evidence counts only the runs of the nightly schedule (the pins and the nightly track):
a CLI experiment, an API request, a PR run or a corpus run says nothing about whether
upstream is safe to pin.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.domain.pin_bump import OpenBreakage, Suspect, UpstreamBuild, reproducible_spec
from service.domain.torch_spec import SourceKind, nightly_date_of
from service.models import Backend, Breakage, BreakageStatus, PinReport, Run, RunState, TorchBuild

EVIDENCE_TRIGGERS = ("nightly",)
# How far back a green run still counts (a pin older than this is stale anyway).
EVIDENCE_WINDOW = dt.timedelta(days=90)


def newest_green(session: Session, backend_id: int, *, now: dt.datetime) -> UpstreamBuild | None:
    """The newest upstream build a nightly/pin-track run of the backend passed on, named by
    a reproducible spec; newest by the nightly date, then by when it was provisioned."""
    rows = session.execute(
        select(Run.id, TorchBuild)
        .join(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(
            Run.backend_id == backend_id,
            Run.state == RunState.PASSED,
            Run.trigger.in_(EVIDENCE_TRIGGERS),
            Run.created_at >= now - EVIDENCE_WINDOW,
        )
        .order_by(Run.id)
    ).all()
    best: tuple[tuple[dt.date, dt.datetime, int], UpstreamBuild] | None = None
    for run_id, build in rows:
        spec = reproducible_spec(build.spec, build.source_kind, build.version, build.git_version)
        if spec is None:
            continue
        key = (nightly_date_of(build.version) or dt.date.min, build.created_at, run_id)
        if best is None or key > best[0]:
            best = (key, UpstreamBuild(spec, build.version, build.git_version, run_id))
    return best[1] if best else None


def pinned_build(session: Session, pin: str) -> UpstreamBuild | None:
    """What the pin resolved to when a run provisioned it (None: never provisioned yet;
    a ``nightly:DATE`` pin still carries its date)."""
    query = select(TorchBuild).order_by(TorchBuild.created_at.desc()).limit(1)
    kind, _, arg = pin.partition(":")
    if kind == SourceKind.COMMIT and arg:
        query = query.where(TorchBuild.git_version.startswith(arg.lower()))
    else:
        query = query.where(TorchBuild.spec == pin)
    build = session.scalar(query)
    if build is not None:
        return UpstreamBuild(pin, build.version, build.git_version)
    if kind == SourceKind.NIGHTLY and arg:
        try:
            date = dt.date.fromisoformat(arg)
        except ValueError:
            return None
        # The version is unknown until provisioned; its date is what orders it.
        return UpstreamBuild(pin, "", pinned_date=date)
    return None


def open_breakages_since(
    session: Session, backend_id: int, since: dt.date | None
) -> list[OpenBreakage]:
    """The backend's open breakages first seen on the nightly/pin tracks (since the pin's
    date, when known), with their ranked suspects."""
    query = (
        select(Breakage)
        .join(Run, Run.id == Breakage.first_seen_run_id)
        .where(
            Breakage.backend_id == backend_id,
            Breakage.status == BreakageStatus.OPEN,
            Run.trigger.in_(EVIDENCE_TRIGGERS),
        )
        .order_by(Breakage.first_seen_at, Breakage.id)
    )
    if since is not None:
        query = query.where(
            Breakage.first_seen_at >= dt.datetime.combine(since, dt.time(), tzinfo=dt.UTC)
        )
    found = []
    for b in session.scalars(query):
        kind = "/".join(part for part in (b.category, b.subtype) if part) or "unclassified"
        suspects = tuple(
            Suspect(
                pr=int(c["pr"]) if c.get("pr") else None,
                sha=str(c.get("sha") or ""),
                score=float(c.get("score") or 0.0),
                title=str(c.get("title") or ""),
            )
            for c in (b.culprits or [])[:3]
            if isinstance(c, dict)
        )
        found.append(OpenBreakage(b.id, b.title, kind, b.first_seen_at.date(), suspects))
    return found


def reports(session: Session, *, weeks: int = 4, backend: str | None = None) -> list[tuple[PinReport, str]]:
    """The stored reports of the newest ``weeks`` weeks, newest week first, by backend."""
    query = select(PinReport.week).distinct().order_by(PinReport.week.desc()).limit(weeks)
    recent = list(session.scalars(query))
    if not recent:
        return []
    rows = select(PinReport, Backend.name).join(Backend, Backend.id == PinReport.backend_id).where(
        PinReport.week.in_(recent)
    )
    if backend is not None:
        rows = rows.where(Backend.name == backend)
    return [
        (report, name)
        for report, name in session.execute(rows.order_by(PinReport.week.desc(), Backend.name))
    ]
