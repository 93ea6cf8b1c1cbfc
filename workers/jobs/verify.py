"""Verify a breakage's top suspects by undoing them (issue #29): for each of the first
``Settings.culprit_verify_top`` suspects whose change touches installed files, an overlay
of the red torch with those files put back to the range base, and an ordinary run of the
same backend (same commit) on it that repeats only the red run's failing tests (the
whole suite after a failed build). The run's end is the answer
(``service.domain.verification.outcome``).

A verification run is a run like any other: sandboxed, in its own env, on the dashboard,
cancellable; its trigger is ``verify`` and its ``trigger_info`` names the red run, the
breakage and the suspect. GitHub is reached through ``Sources`` (the CLI passes the
PyGithub adapter's methods), so this job never imports it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.commands import verifications
from service.commands.runs import create_run
from service.config import Settings
from service.domain.states import Outcome, StepName, StepStatus
from service.domain.upstream import UpstreamCommit
from service.domain.verification import TRIGGER as VERIFICATION_TRIGGER
from service.domain.verification import (
    RestoreError,
    UndoPlan,
    Verification,
    VerifyState,
    outcome,
    plan_undo,
    to_verify,
)
from service.models import Backend, Breakage, CulpritVerification, Run, TestResult
from workers.jobs.verify_overlay import (
    build_overlay,
    red_torch_dir,
    remove_overlay,
    restored_contents,
    undone_version,
)

VERIFY = VERIFICATION_TRIGGER


class Sources(Protocol):
    """What verification reads from upstream: a commit's files and patches, a file at a ref."""

    def commit(self, sha: str) -> UpstreamCommit: ...

    def file_at(self, path: str, ref: str) -> bytes | None: ...


# Executes a queued run to its end and returns its state (the CLI's in-process pipeline).
Execute = Callable[[int], str | None]


@dataclass(frozen=True)
class RedRun:
    run_id: int
    backend: str
    backend_id: int
    backend_sha: str | None
    torch_spec: str
    python: str | None
    failing: tuple[str, ...]


def verify_breakage(
    sessions: sessionmaker[Session], settings: Settings, breakage_id: int, red_run_id: int,
    sources: Sources, execute: Execute, *, top: int | None = None,
) -> list[Verification]:
    """Verify the breakage's top suspects on the torch of ``red_run_id`` and store every
    answer (``service.commands.verifications.record``). Returns them, in ranking order."""
    top = settings.culprit_verify_top if top is None else top
    with sessions() as session:
        breakage = session.get_one(Breakage, breakage_id)
        suspects = [dict(s) for s in breakage.culprits or []]
        base_sha = breakage.range_base_sha
        red = _red_run(session, red_run_id)
    if not suspects or not base_sha:
        return []
    plans: dict[str, UndoPlan] = {}
    answers: dict[str, Verification] = {}
    for suspect in suspects:
        sha = str(suspect["sha"])
        try:
            plans[sha] = plan_undo(sources.commit(sha).files)
        except Exception as exc:  # GitHub down, a token refused: the experiment never started
            answers[sha] = Verification(sha, suspect.get("pr"), VerifyState.ERROR,
                                        f"could not read the commit's files: {exc}")
    chosen = to_verify(suspects, plans, top)
    for suspect in suspects:
        sha, pr = str(suspect["sha"]), suspect.get("pr")
        plan = plans.get(sha)
        if sha in answers or plan is None:
            continue
        if sha in chosen:
            answers[sha] = _verify_one(sessions, settings, breakage_id, red, sha, pr, plan,
                                       base_sha, sources, execute)
        elif not plan.verifiable:
            answers[sha] = Verification(sha, pr, VerifyState.UNVERIFIABLE, plan.why_not)
    done = [answers[str(s["sha"])] for s in suspects if str(s["sha"]) in answers]
    with sessions() as session:
        verifications.record(session, session.get_one(Breakage, breakage_id), done,
                             repo=settings.upstream_repo, min_score=settings.culprit_min_score)
        session.commit()
    return done


def _red_run(session: Session, run_id: int) -> RedRun:
    run = session.get_one(Run, run_id)
    backend = session.get_one(Backend, run.backend_id)
    failing = session.scalars(
        select(TestResult.nodeid).where(
            TestResult.run_id == run.id, TestResult.outcome.in_(Outcome.FAILING),
            TestResult.nodeid.not_like("<%"),
        ).order_by(TestResult.nodeid)
    )
    return RedRun(run.id, backend.name, backend.id, run.backend_sha, run.torch_spec,
                  run.torch_build.python if run.torch_build else None, tuple(failing))


def _verify_one(
    sessions: sessionmaker[Session], settings: Settings, breakage_id: int, red: RedRun,
    sha: str, pr: int | None, plan: UndoPlan, base_sha: str, sources: Sources, execute: Execute,
) -> Verification:
    files = plan.files

    def answer(state: VerifyState, evidence: str, run_id: int | None = None) -> Verification:
        return Verification(sha, pr, state, evidence, run_id=run_id, files=files)

    try:
        torch_dir = red_torch_dir(red.torch_spec, red.python)
    except RestoreError as exc:  # nothing to undo it in: the experiment, not the suspect
        return answer(VerifyState.ERROR, f"no red torch to undo it in: {exc}")
    try:
        contents, skipped = restored_contents(torch_dir, plan, base_sha, sources.file_at)
    except RestoreError as exc:
        return answer(VerifyState.UNVERIFIABLE, f"the files could not be restored: {exc}")
    except Exception as exc:  # the contents API down: not the suspect's fault
        return answer(VerifyState.ERROR, f"restoring the files broke: {exc}")
    files = tuple(f for f in plan.files if f not in skipped)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    overlay = settings.home / "verify" / f"b{breakage_id}-{sha[:12]}-{stamp}"
    try:
        build_overlay(torch_dir, overlay, {**contents, **undone_version(torch_dir, sha)})
    except (OSError, RestoreError) as exc:
        return answer(VerifyState.ERROR, f"the overlay could not be made: {exc}")
    try:
        with sessions() as session:
            backend = session.get_one(Backend, red.backend_id)
            run = create_run(
                session, backend, f"path:{overlay}", trigger=VERIFY, backend_sha=red.backend_sha,
                trigger_info={"verify_of": red.run_id, "breakage_id": breakage_id, "sha": sha,
                              "pr": pr, "files": list(files), "skipped": list(skipped),
                              "failed_tests": list(red.failing[:500])},
            )
            session.commit()
            run_id = run.id
        execute(run_id)
        with sessions() as session:
            done = session.get_one(Run, run_id)
            provision = next((s for s in done.steps if s.name == StepName.PROVISION), None)
            state, evidence = outcome(
                run_state=done.state, verdict=done.verdict, error_kind=done.error_kind,
                error=done.error or done.verdict_reason,
                provisioned=provision is not None and provision.status == StepStatus.PASSED,
                failing=_shown(red.failing), files=files, backend=red.backend,
                compiled=plan.compiled,
            )
        return answer(state, evidence, run_id)
    finally:
        remove_overlay(overlay)


def _shown(failing: Sequence[str]) -> list[str]:
    return list(failing[:5]) + ([f"{len(failing) - 5} more"] if len(failing) > 5 else [])


def pending(session: Session, *, opened_by: int | None = None) -> list[tuple[int, int]]:
    """(breakage, red run) pairs that are ranked and not verified yet, nor being verified:
    open upstream breakages with suspects and a range base, whose first run failed (that
    run's torch is what is undone). ``opened_by``: only those that run opened."""
    query = select(Breakage).where(Breakage.category == "upstream", Breakage.status == "open",
                                   Breakage.range_base_sha.is_not(None),
                                   Breakage.first_seen_run_id.is_not(None))
    if opened_by is not None:
        query = query.where(Breakage.first_seen_run_id == opened_by)
    verified = set(session.scalars(select(CulpritVerification.breakage_id).distinct()))
    # A verify run's trigger_info names its breakage; the JSON is read here, not in SQL.
    started = {int(info.get("breakage_id", 0)) for info in session.scalars(
        select(Run.trigger_info).where(Run.trigger == VERIFY)) if isinstance(info, dict)}
    out = []
    for b in session.scalars(query.order_by(Breakage.id)):
        if b.culprits and b.id not in verified | started and b.first_seen_run_id is not None:
            out.append((b.id, b.first_seen_run_id))
    return out
