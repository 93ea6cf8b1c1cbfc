"""`ootci culprit` (which upstream change broke a run) and `ootci report` (tell its PR)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import (
    EXIT_FAILED,
    console,
    die,
    load_settings,
    migrated_engine,
    out,
    print_json,
    worker_id,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from service.config import Settings
    from service.models import Run
    from service.schemas import Culprits


def _run_or_die(session: Session, run_id: int) -> Run:
    from service.models import Run

    run = session.get(Run, run_id)
    if run is None:
        die(f"no run {run_id}")
    return run


def _print_culprits(doc: Culprits) -> None:
    r = doc.range
    out.print(f"range: {escape(r.base_version or '?')} ({(r.base or '?')[:12]}) -> "
              f"{escape(r.head_version or '?')} ({(r.head or '?')[:12]})"
              + (f"  {r.compare_url}" if r.compare_url else ""))
    if not doc.suspects:
        out.print(escape(doc.note or "no suspect"))
        return
    table = Table(title="suspects, best first")
    for col in ("score", "PR", "commit", "title", "why", "verified"):
        table.add_column(col)
    for s in doc.suspects:
        v = s.verification
        table.add_row(f"{s.score:.2f}", f"#{s.pr}" if s.pr else "-", s.sha[:12], escape(s.title),
                      escape("\n".join(s.reasons)),
                      escape(f"{v.state} (run {v.run_id}): {v.evidence}" if v and v.run_id
                             else f"{v.state}: {v.evidence}" if v else "-"))
    out.print(table)


def _rank_run(settings: Settings, session: Session, run: Run, base: Run | None) -> Culprits:
    """The range of ``run`` (against ``base`` or its track's last green run) listed from
    GitHub and ranked against the run's classified failures."""
    from service.documents import compare_url
    from service.github.analysis import rank_range, ranking_note
    from service.github.client import GitHubClient
    from service.github.errors import GitHubError
    from service.queries.regression import range_for
    from service.schemas import Culprits, RangeOut, SuspectOut

    found = range_for(session, run, base)
    if not found.complete or found.base is None:
        die(f"run {run.id}: no regression range: {found.note}")
    failures = [f for f in run.failures if f.finding]
    if not failures:
        die(f"run {run.id} has no classified failure to look for in the range")
    base_sha, head_sha = found.base.git_version, found.head.git_version
    console.print(f"listing {settings.upstream_repo} {base_sha[:12]}...{head_sha[:12]} "
                  f"from {settings.github_api_url}")
    try:
        ranking = rank_range(GitHubClient.from_settings(settings), failures, base_sha, head_sha)
    except GitHubError as exc:
        die(str(exc))
    return Culprits(
        range=RangeOut(base=base_sha, head=head_sha, base_version=found.base.version,
                       head_version=found.head.version, base_run_id=found.base.run_id, note=None,
                       compare_url=compare_url(settings.upstream_repo, base_sha, head_sha)),
        suspects=[SuspectOut.model_validate(s.to_dict()) for s in ranking.suspects],
        note=ranking_note(ranking, base_sha, head_sha),
    )


def _passed(run: Run, as_json: bool) -> bool:
    """A passed run broke nothing: there is no culprit to look for (exit 0, not a usage
    error); its document has no range and no suspect, and says why."""
    from service.models import RunState
    from service.schemas import Culprits, RangeOut

    if run.state != RunState.PASSED:
        return False
    note = (f"run {run.id} passed (verdict {run.verdict or 'compatible'}): nothing broke, "
            "so there is no culprit to look for")
    if as_json:
        print_json(Culprits(
            range=RangeOut(base=None, head=None, base_version=None, head_version=None,
                           base_run_id=None, note=note, compare_url=None),
            suspects=[], note=note,
        ).model_dump(mode="json"))
    else:
        out.print(escape(note))
    return True


def culprit(
    run_id: Annotated[int | None, typer.Argument(help="A red run to find the upstream change for.")] = None,
    base_run: Annotated[
        int | None,
        typer.Option("--base-run", help="Compare against this run's torch (default: the "
                     "newest passed run of the same backend on the same track before RUN)."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Verify the top suspects (OOTCI_CULPRIT_VERIFY_TOP) by "
                     "undoing each one's changes to installed torch files in an overlay of the "
                     "red torch and rerunning the failing tests there: a run per suspect."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The regression range of RUN and its upstream commits ranked by how well they match
    what the failures name, with the reasons (and, with --verify, what undoing each of the
    top suspects did: confirmed, refuted, unverifiable or error)."""
    if run_id is None:
        die("give a RUN: a red run to find the upstream change for")
    from service.db import session_scope

    settings = load_settings()
    with session_scope(migrated_engine(settings)) as session:
        run = _run_or_die(session, run_id)
        if _passed(run, as_json):
            return
        base = _run_or_die(session, base_run) if base_run is not None else None
        if base is not None and base.backend_id != run.backend_id:
            die(f"run {base.id} is of another backend than run {run.id}: a range compares "
                "two runs of one backend")
        doc = _rank_run(settings, session, run, base)
        breakage_id = _breakage_of(session, run, verify)
        if verify and breakage_id is not None:
            _adopt_ranking(settings, session, breakage_id, doc)
    if verify and breakage_id is not None:
        _verify(settings, breakage_id, run_id)
    if breakage_id is not None:
        with session_scope(migrated_engine(settings)) as session:
            doc = _with_verifications(session, breakage_id, doc)
    if as_json:
        print_json(doc.model_dump(mode="json"))
    else:
        _print_culprits(doc)


def _breakage_of(session: Session, run: Run, verify: bool) -> int | None:
    """The upstream breakage the run's failures belong to (what a verification is of)."""
    ids = sorted({f.breakage_id for f in run.failures if f.breakage_id is not None
                  and (f.triage or f.category) == "upstream"})
    if verify and not ids:
        die(f"run {run.id} has no upstream breakage: there is no culprit to verify")
    return ids[0] if ids else None


def _adopt_ranking(settings: Settings, session: Session, breakage_id: int, doc: Culprits) -> None:
    """The breakage keeps the ranking it was analysed with; one not analysed yet (GitHub
    was down) takes this one, so what is verified is what the report will name."""
    from service.commands import culprits
    from service.models import Breakage

    breakage = session.get_one(Breakage, breakage_id)
    if not breakage.range_base_sha:
        die(f"breakage {breakage_id} has no regression range base: nothing to restore to")
    if not breakage.culprits:
        culprits.store_suspects(session, breakage, [s.model_dump(exclude={"verification"})
                                                    for s in doc.suspects],
                                doc.note, repo=settings.upstream_repo,
                                min_score=settings.culprit_min_score)


def _verify(settings: Settings, breakage_id: int, red_run_id: int) -> None:
    from service.db import session_factory
    from service.github.client import GitHubClient
    from service.github.reporter import drain_quietly
    from workers.jobs.verify import verify_breakage
    from workers.pipeline.execute import execute_run

    engine = migrated_engine(settings)
    console.print(f"verifying the top {settings.culprit_verify_top} suspects of breakage "
                  f"{breakage_id} by undoing them on the torch of run {red_run_id}")

    def execute(run_id: int) -> str | None:
        console.print(f"  verification run {run_id} ...")
        return execute_run(engine, settings, run_id, worker_id())

    done = verify_breakage(session_factory(engine), settings, breakage_id, red_run_id,
                           GitHubClient.from_settings(settings), execute)
    for v in done:
        console.print(f"  {v.sha[:12]} #{v.pr or '-'}: {v.state} — {escape(v.evidence)}")
    result = drain_quietly(settings, session_factory(engine))  # the report the answers changed
    if result is not None and (result.sent or result.errors):
        console.print(f"github: {result.sent} sent"
                      + (f"; kept for later: {escape(result.errors[0])}" if result.errors else ""))


def verify_after_run(engine: Engine, settings: Settings, run_id: int) -> None:
    """The embedded mode's verification: each upstream breakage the red run opened and
    the drain just ranked gets its top suspects verified (one run each), unless
    ``OOTCI_CULPRIT_VERIFY_TOP=0``. Never fails the run: trouble is printed, the
    suspects stay unverified (``ootci culprit RUN --verify`` tries again)."""
    from service.db import session_scope
    from service.domain.experiments import EXPERIMENTS
    from service.models import Run

    with session_scope(engine) as session:
        run = session.get(Run, run_id)
        if run is None or run.trigger in EXPERIMENTS or run.state != "failed":
            return
    verify_ranked(engine, settings, opened_by=run_id)


def verify_ranked(engine: Engine, settings: Settings, *, opened_by: int | None = None,
                  only: set[int] | None = None) -> None:
    """Verify the top suspects of every ranked, unverified breakage (``opened_by``: those
    that run opened; ``only``: those breakages, e.g. the ones a bisection just narrowed).
    Trouble is printed, never raised: the suspects stay unverified."""
    if settings.culprit_verify_top <= 0:
        return
    from service.db import session_scope
    from workers.jobs.verify import pending

    with session_scope(engine) as session:
        due = [(b, r) for b, r in pending(session, opened_by=opened_by)
                if only is None or b in only]
    for breakage_id, red_run_id in due:
        try:
            _verify(settings, breakage_id, red_run_id)
        except Exception as exc:  # a report never fails the run; neither does its check
            console.print(f"[yellow]verification of breakage {breakage_id} failed:[/] {escape(str(exc))}")


def _with_verifications(session: Session, breakage_id: int, doc: Culprits) -> Culprits:
    """Each suspect with its newest verification, confirmed ones first."""
    from service.domain.verification import is_confirmed
    from service.queries.verifications import of_breakage
    from service.schemas import VerificationOut

    newest: dict[str, VerificationOut] = {}
    for row in of_breakage(session, breakage_id):
        newest.setdefault(row.sha, VerificationOut(state=row.state, run_id=row.run_id,
                                                   evidence=row.evidence))
    suspects = [s.model_copy(update={"verification": newest.get(s.sha)}) for s in doc.suspects]
    first = [s for s in suspects if s.verification and is_confirmed(s.model_dump())]
    return doc.model_copy(update={"suspects": first + [s for s in suspects if s not in first]})


def report(
    breakage_id: Annotated[
        int | None, typer.Argument(help="The breakage to report (default: send what is due).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be posted.")] = False,
) -> None:
    """Label the suspected upstream PR of BREAKAGE and post (or edit) ootci's one comment on
    it; without BREAKAGE, send everything the outbox holds that is due."""
    from service.db import session_factory
    from service.github.reporter import drain_with_settings

    settings = load_settings()
    sessions = session_factory(migrated_engine(settings))
    if breakage_id is not None:
        _queue_report(settings, sessions, breakage_id, dry_run)
        if dry_run:
            return
    result = drain_with_settings(settings, sessions)
    for error in result.errors:
        console.print(f"[yellow]github:[/] {escape(error)} (kept, tried again later)")
    console.print(f"outbox: {result.sent} sent, {result.dry_run} dry-run (no token), "
                  f"{result.retried} kept for later")
    if result.errors:
        raise typer.Exit(EXIT_FAILED)


def _queue_report(
    settings: Settings, sessions: sessionmaker[Session], breakage_id: int, dry_run: bool
) -> None:
    from service.commands import culprits
    from service.github.reporter import pr_body, pr_reports, report_settings
    from service.models import Breakage

    cfg = report_settings(settings)
    with sessions() as session:
        breakage = session.get(Breakage, breakage_id)
        if breakage is None:
            die(f"no breakage {breakage_id}")
        pr = culprits.reported_pr(breakage, cfg.min_score)
        if pr is None:
            top = breakage.culprits[0] if breakage.culprits else None
            die(f"breakage {breakage_id}: nothing to report: "
                + (f"its top suspect scores {float(top['score']):.2f}, below "
                   f"OOTCI_CULPRIT_MIN_SCORE={cfg.min_score}" if top else
                   (breakage.culprits_note or "no suspect yet")), code=EXIT_FAILED)
        if dry_run:
            out.print(f"would {'add' if breakage.status == 'open' else 'keep'} label "
                      f"{cfg.label!r} and post on {cfg.repo}#{pr}:\n")
            out.print(escape(pr_body(session, pr, pr_reports(session, pr, cfg), cfg)),
                      soft_wrap=True)
            return
        culprits.request_pr_report(session, breakage, repo=cfg.repo, min_score=cfg.min_score,
                                   again=True)
        session.commit()
