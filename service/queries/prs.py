"""One upstream PR as ootci saw it: the runs of its own wheel (one per backend and head
sha, ``service/github/pr_runs.py``) and the breakages whose ranking names it as a suspect.

Takes a session and never writes. PR runs are found by their dedupe key
(``pr:<number>:<sha>:<backend id>``, unique and indexed); the breakages naming it by a
text prefilter on their ranking, then exactly in Python (the ranking is a JSON list, and
only upstream breakages with suspects have one).
"""

from __future__ import annotations

import datetime as dt
import shlex
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from service.models import Backend, Breakage, Run, TorchBuild

# A PR's page shows at most this many runs (a PR pushed often: newest first).
RUN_LIMIT = 200
BREAKAGE_LIMIT = 200
PR_KEY = "pr:{number}:"


@dataclass(frozen=True)
class PrRun:
    run_id: int
    backend: str
    state: str
    verdict: str | None
    verdict_subtype: str | None
    verdict_reason: str | None
    torch_spec: str
    torch_version: str | None
    torch_git_version: str | None
    head_sha: str | None  # the PR's head commit the run was made for
    created_at: dt.datetime
    finished_at: dt.datetime | None


@dataclass(frozen=True)
class PrSuspicion:
    """A breakage naming the PR as its ``rank``-th suspect (1: the top one)."""

    breakage_id: int
    backend: str
    title: str
    status: str
    category: str | None
    subtype: str | None
    rank: int
    sha: str
    commit_title: str
    score: float
    reasons: list[str]
    verification: str | None  # confirmed, refuted, unverifiable, error; None: not run
    evidence: str | None
    verification_run_id: int | None
    range_base_sha: str | None
    range_head_sha: str | None
    range_head_version: str | None


@dataclass(frozen=True)
class Repro:
    backend: str
    torch: str  # the spec to pass to --torch
    why: str

    @property
    def command(self) -> str:
        return f"ootci run --torch {shlex.quote(self.torch)} --backend {shlex.quote(self.backend)}"


@dataclass(frozen=True)
class PrView:
    number: int
    title: str | None
    url: str | None
    runs: list[PrRun]
    suspicions: list[PrSuspicion]
    shas: list[str] = field(default_factory=list)

    @property
    def backends(self) -> list[str]:
        return sorted({r.backend for r in self.runs} | {s.backend for s in self.suspicions})

    @property
    def repros(self) -> list[Repro]:
        """How to run it again, per backend: on the red nightly of each breakage naming
        the PR (``commit:<its git sha>``), and on the PR's own wheel of each PR run."""
        seen: dict[tuple[str, str], Repro] = {}
        for s in self.suspicions:
            if s.range_head_sha:
                key = (s.backend, f"commit:{s.range_head_sha}")
                seen.setdefault(key, Repro(s.backend, key[1], f"the first red torch of breakage {s.breakage_id}"))
        for r in self.runs:
            key = (r.backend, r.torch_spec)
            seen.setdefault(key, Repro(r.backend, r.torch_spec, f"the PR's own torch (run {r.run_id})"))
        return sorted(seen.values(), key=lambda x: (x.backend, not x.torch.startswith("commit:")))


def pr_runs(session: Session, number: int, *, limit: int = RUN_LIMIT) -> list[PrRun]:
    rows = session.execute(
        select(Run, Backend.name, TorchBuild.version, TorchBuild.git_version)
        .join(Backend, Backend.id == Run.backend_id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(Run.dedupe_key.like(PR_KEY.format(number=number) + "%"))
        .order_by(Run.id.desc())
        .limit(limit)
    ).all()
    return [
        PrRun(
            run_id=run.id, backend=name, state=run.state, verdict=run.verdict,
            verdict_subtype=run.verdict_subtype, verdict_reason=run.verdict_reason,
            torch_spec=run.torch_spec, torch_version=version, torch_git_version=git,
            head_sha=_text(run.trigger_info.get("sha")), created_at=run.created_at,
            finished_at=run.finished_at,
        )
        for run, name, version, git in rows
    ]


def suspicions(session: Session, number: int, *, limit: int = BREAKAGE_LIMIT) -> list[PrSuspicion]:
    rows = session.execute(
        select(Breakage, Backend.name)
        .join(Backend, Backend.id == Breakage.backend_id)
        .where(cast(Breakage.culprits, Text).like(f"%{number}%"))
        .order_by(Breakage.id.desc())
        .limit(limit)
    ).all()
    found = []
    for breakage, name in rows:
        for rank, suspect in enumerate(breakage.culprits or [], start=1):
            if not _names(suspect, number):
                continue
            verification = suspect.get("verification") or {}
            found.append(PrSuspicion(
                breakage_id=breakage.id, backend=name, title=breakage.title,
                status=breakage.status, category=breakage.category, subtype=breakage.subtype,
                rank=rank, sha=str(suspect.get("sha", "")),
                commit_title=str(suspect.get("title", "")), score=float(suspect.get("score", 0)),
                reasons=[str(r) for r in suspect.get("reasons", [])],
                verification=_text(verification.get("state")),
                evidence=_text(verification.get("evidence")),
                verification_run_id=_int(verification.get("run_id")),
                range_base_sha=breakage.range_base_sha, range_head_sha=breakage.range_head_sha,
                range_head_version=breakage.range_head_version,
            ))
            break
    return found


def pr_view(session: Session, number: int) -> PrView | None:
    """The PR's page, or None when ootci never ran its wheel nor suspected it."""
    runs = pr_runs(session, number)
    suspected = suspicions(session, number)
    if not runs and not suspected:
        return None
    info = _pr_info(session, number)
    shas = [*(r.head_sha for r in runs), *(r.torch_git_version for r in runs),
            *(s.sha for s in suspected), *(s.range_head_sha for s in suspected)]
    return PrView(
        number=number,
        title=_text(info.get("title")) or next((s.commit_title for s in suspected), None), url=_text(info.get("url")),
        runs=runs, suspicions=suspected, shas=sorted({s for s in shas if s}),
    )


def _pr_info(session: Session, number: int) -> dict[str, Any]:
    newest = session.scalar(
        select(Run.trigger_info).where(Run.dedupe_key.like(PR_KEY.format(number=number) + "%"))
        .order_by(Run.id.desc()).limit(1)
    )
    return dict(newest or {})


def _names(suspect: Any, number: int) -> bool:
    pr = suspect.get("pr") if isinstance(suspect, dict) else None
    return pr is not None and str(pr) == str(number)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
