"""Search by identifier: an upstream PR number (``#123``, ``123``), a torch commit sha (7
to 40 hex digits, a prefix), a torch version (``2.14.1``, ``2.15.0.dev20261001``).

What the text search (``service/queries/search.py``) cannot find: these live in keys and
the torch builds, not in failure text. Each lookup is bounded (LIMIT, newest first); a
sha or version prefix is matched on indexed-width columns of the few torch builds and
the breakages, never on test results.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from sqlalchemy import Text, cast, func, or_, select
from sqlalchemy.orm import Session

from service.models import Backend, Breakage, Run, TorchBuild
from service.queries import prs as pr_queries

PR_QUERY = re.compile(r"^#?(\d{1,9})$")
SHA_QUERY = re.compile(r"^[0-9a-f]{7,40}$")
VERSION_QUERY = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:[.+][0-9a-z.+]*)?$")
# The PR run's dedupe key: "pr:<number>:<head sha>:<backend id>".
_PR_KEY = re.compile(r"^pr:(\d+):")


@dataclass(frozen=True)
class PrHit:
    number: int
    title: str | None


@dataclass(frozen=True)
class RunHit:
    run_id: int
    backend: str
    state: str
    verdict: str | None
    torch_spec: str
    torch_version: str | None
    torch_git_version: str | None
    created_at: dt.datetime


@dataclass(frozen=True)
class IdHits:
    kinds: list[str] = field(default_factory=list)  # what the query was read as
    prs: list[PrHit] = field(default_factory=list)
    runs: list[RunHit] = field(default_factory=list)
    breakages: list[Breakage] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.prs or self.runs or self.breakages)


def find_ids(session: Session, q: str, *, limit: int = 50) -> IdHits:
    text = q.strip().lower()
    kinds: list[str] = []
    prs: dict[int, PrHit] = {}
    runs: list[RunHit] = []
    breakages: list[Breakage] = []
    if match := PR_QUERY.match(text):
        kinds.append("PR number")
        number = int(match.group(1))
        view = pr_queries.pr_view(session, number)
        if view is not None:
            prs[number] = PrHit(number, view.title)
    if SHA_QUERY.match(text):
        kinds.append("torch commit sha")
        runs = _runs(session, _sha_runs(text), limit)
        breakages = _sha_breakages(session, text, limit)
        for number in sorted(_prs_of(runs, session) | _suspected_prs(breakages, text)):
            prs.setdefault(number, PrHit(number, _title(session, number)))
    elif VERSION_QUERY.match(text):
        kinds.append("torch version")
        runs = _runs(session, or_(TorchBuild.version == text,
                                  TorchBuild.version.like(text + "+%"),
                                  TorchBuild.version.like(text + ".%")), limit)
    return IdHits(kinds=kinds, prs=list(prs.values()), runs=runs, breakages=breakages)


def _sha_runs(sha: str) -> object:
    # A PR run carries the PR's head sha in its key; any run its torch build's commit.
    return or_(TorchBuild.git_version.like(sha + "%"), Run.dedupe_key.like(f"pr:%:{sha}%"))


def _runs(session: Session, where: object, limit: int) -> list[RunHit]:
    rows = session.execute(
        select(Run.id, Backend.name, Run.state, Run.verdict, Run.torch_spec, TorchBuild.version,
               TorchBuild.git_version, Run.created_at)
        .join(Backend, Backend.id == Run.backend_id)
        .outerjoin(TorchBuild, TorchBuild.id == Run.torch_build_id)
        .where(where)  # type: ignore[arg-type]
        .order_by(Run.id.desc())
        .limit(limit)
    ).all()
    return [RunHit(*row) for row in rows]


def _sha_breakages(session: Session, sha: str, limit: int) -> list[Breakage]:
    return list(session.scalars(
        select(Breakage)
        .where(or_(
            Breakage.range_head_sha.like(sha + "%"),
            Breakage.range_base_sha.like(sha + "%"),
            func.lower(cast(Breakage.culprits, Text)).like(f'%"{sha}%'),
        ))
        .order_by(Breakage.id.desc())
        .limit(limit)
    ))


def _prs_of(runs: list[RunHit], session: Session) -> set[int]:
    if not runs:
        return set()
    keys = session.scalars(select(Run.dedupe_key).where(Run.id.in_([r.run_id for r in runs])))
    return {int(m.group(1)) for k in keys if k and (m := _PR_KEY.match(k))}


def _suspected_prs(breakages: list[Breakage], sha: str) -> set[int]:
    return {
        int(s["pr"]) for b in breakages for s in (b.culprits or [])
        if isinstance(s, dict) and s.get("pr") is not None
        and str(s.get("sha", "")).lower().startswith(sha)
    }


def _title(session: Session, number: int) -> str | None:
    view = pr_queries.pr_view(session, number)
    return view.title if view else None
