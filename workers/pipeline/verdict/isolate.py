"""The isolate step: the experiment a person would run when a failure's history cannot tell
torch's change from the backend's (triage's unknown with ``needs_isolation``).

This run's backend (its own tree, the same commit) is built on a *reference* torch, and
only the failing tests are run there; triage then blames torch when the failure is gone on
the reference, the backend when it is there with the same fingerprint
(``service.domain.triage``, step 6). :func:`plan` decides what to repeat and on which torch,
:func:`isolate` runs it and answers one ``IsolationResult`` per failure.

The reference torch is the one the failures last passed on (the torch of their
``isolate_against_run_id``; the run most of them point at when they differ), provisioned as
``run:<id>`` when that run recorded its wheel, else from that run's own spec; for failures
that never passed, the first of ``Settings.pins`` that is not this run's spec. A moving
spec (bare ``nightly``) never is: it would not give that torch again. The provisioned torch
must be the one that run recorded and must differ from this run's, else nothing is run.

Bounded: at most one isolating run per run, one provision, one build and one pytest
invocation (``only`` the failing node ids, no rerun of failures) covering every failure
that needs it, in the sandboxes the run's own build and tests use; its build dir is keyed
like the run's (the reference env, this tree), so a later run of the pair reuses it. Not
for a run that met an infrastructure failure, nor with ``Settings.isolate`` off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session

from service.config import Settings
from service.domain.classify import (
    backend_packages,
    classify_log,
)
from service.domain.nodeids import COLLECTION_NODEID, IMPORT_NODEID, SESSION_EXIT_NODEID
from service.domain.states import Outcome, StepName, StepStatus
from service.domain.torch_spec import SourceKind, TorchSpec, TorchSpecError
from service.domain.triage import Isolated, IsolationResult, RunIdentity, TorchIdentity
from service.domain.verdict import Category, Finding, Stage
from service.models import Backend, Run
from service.queries.baseline import run_identity
from service.queries.torch_builds import NoRecordedTorch, recorded_torch
from workers.pipeline.cache.layout import build_dir as cache_build_dir
from workers.pipeline.cache.layout import stamp
from workers.pipeline.env.commit_dates import commit_date
from workers.pipeline.env.probe_sandbox import probe_sandbox
from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.env.run_env import private_env
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.errors import PipelineError
from workers.pipeline.isolation.child_env import ChildEnvPolicy
from workers.pipeline.isolation.sandbox import StepSandbox
from workers.pipeline.logs.masking import SecretMasker
from workers.pipeline.logs.sink import LogSink
from workers.pipeline.steps.build import build, build_sandbox, ccache_dir_for
from workers.pipeline.steps.outcome import StepOutcome
from workers.pipeline.steps.recipe import Recipe
from workers.pipeline.testrun.records import TestRecord, TestRunOutcome
from workers.pipeline.testrun.runner import TestRunOptions, probe_torch_import, run_tests
from workers.pipeline.testrun.suite_sandbox import suite_sandbox
from workers.pipeline.verdict.collect import Triaged, classify_test_record

# Records of the runner's own that name no test of the suite: nothing to repeat.
_NOT_TESTS = frozenset({COLLECTION_NODEID, SESSION_EXIT_NODEID})


@dataclass(frozen=True)
class Reference:
    """The torch the isolating run builds on, and whose it is."""

    spec: TorchSpec  # what is provisioned (a run: spec already pinned to its recorded wheel)
    run_id: int | None  # the run whose torch it is; None: a pin
    recorded: TorchIdentity | None = None  # the torch that run recorded

    @property
    def label(self) -> str:
        return f"pin {self.spec.text!r}" if self.run_id is None else f"the torch of run #{self.run_id}"

    def whose(self, against: int | None) -> str:
        """Whose torch it is, as a failure that last passed on run ``against`` reads it."""
        if self.run_id is None:
            return self.label
        if against == self.run_id:
            return f"{self.label} where it passed"
        return f"{self.label}, where other failures of this run passed"


@dataclass
class Plan:
    """What the isolating run repeats, on which torch. ``wanted``: the index of each
    triaged failure it answers for -> its node id (None: the build). ``skipped``: the
    failures that need isolation and cannot have it, and why. ``why_not``: why there is no
    reference torch (then nothing runs)."""

    this: RunIdentity
    own_packages: frozenset[str]
    against: Mapping[int, int | None]  # index -> the run where that failure last passed
    nodeid_of: Mapping[int, str | None]  # index -> the failure's node id (None: a step's)
    # index -> (fingerprint, decisive line) of the failure in this run: the answer when the
    # reference pin turns out to be this run's own torch (this run is the experiment).
    seen_here: Mapping[int, tuple[str | None, str]] = field(default_factory=dict)
    wanted: dict[int, str | None] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)
    reference: Reference | None = None
    why_not: str = ""

    @property
    def nodeids(self) -> list[str]:
        """The tests pytest repeats (``<import torch>`` is the runner's probe, repeated as
        itself: pytest has no such test, and would record nothing for it)."""
        return [n for n in self.wanted.values() if n is not None and n != IMPORT_NODEID]

    @property
    def repeats_import(self) -> bool:
        return IMPORT_NODEID in self.wanted.values()

    @property
    def runs_anything(self) -> bool:
        return self.reference is not None and bool(self.wanted)


def plan(
    session: Session, run: Run, triaged: list[Triaged], settings: Settings,
    conformance_ids: frozenset[str] = frozenset(),
) -> Plan | None:
    """What to isolate, or None: nothing needs it, or the setting is off."""
    needing = [i for i, t in enumerate(triaged) if t.verdict.needs_isolation]
    if not needing or not settings.isolate:
        return None
    result = Plan(
        this=run_identity(run),
        own_packages=backend_packages(session.get_one(Backend, run.backend_id).name),
        against={i: triaged[i].verdict.isolate_against_run_id for i in needing},
        nodeid_of={i: triaged[i].failure.nodeid for i in needing},
        seen_here={i: (triaged[i].failure.fingerprint, triaged[i].failure.line)
                   for i in needing},
    )
    infra = next((t for t in triaged if t.verdict.category is Category.INFRA), None)
    for i in needing:
        failure = triaged[i].failure
        if infra is not None:
            result.skipped[i] = (f"the run met an infrastructure failure "
                                 f"({infra.verdict.subtype.value}): not isolated on it")
        elif failure.step_name == StepName.BUILD and failure.nodeid is None:
            result.wanted[i] = None
        elif failure.step_name != StepName.TEST or failure.nodeid is None:
            result.skipped[i] = f"the {failure.step_name} step failed without naming a test"
        elif failure.nodeid in conformance_ids:
            result.skipped[i] = "a conformance test: the isolating run repeats the backend's suite"
        elif failure.nodeid in _NOT_TESTS:
            result.skipped[i] = f"{failure.nodeid} is no test to repeat"
        else:
            result.wanted[i] = failure.nodeid
    if result.wanted:
        result.reference, result.why_not = _reference(session, run, result, settings)
    return result


def _moving(spec: TorchSpec) -> bool:
    return spec.kind is SourceKind.NIGHTLY and spec.nightly_date is None


def _parsed(text: str, settings: Settings) -> TorchSpec | None:
    try:
        return parse_spec(text, nightly_index_url=settings.nightly_index_url,
                          pip_index_url=settings.pip_index_url)
    except (TorchSpecError, PipelineError):
        return None


def _reference(
    session: Session, run: Run, found: Plan, settings: Settings
) -> tuple[Reference | None, str]:
    """The reference torch (or why there is none): the run most wanted failures last
    passed on (the newest of those tied), else the first other pin."""
    counts = Counter(r for i, r in found.against.items() if i in found.wanted and r is not None)
    if counts:
        run_id = max(counts, key=lambda r: (counts[r], r))
        return _reference_run(session, run_id, settings)
    # On a pin itself, this run already is the experiment on a known-good torch.
    others = ([run.torch_spec] if run.torch_spec in settings.pins else []) + [
        p for p in settings.pins if p != run.torch_spec]
    if not others:
        on_pin = "this run is on the only pin" if settings.pins else "no pins (OOTCI_PINS)"
        return None, f"no other torch to isolate against: {on_pin}"
    for text in others:
        spec = _parsed(text, settings)
        if spec is not None and not _moving(spec):
            return Reference(spec, None), ""
    return None, (f"no other torch to isolate against: the other pins ({', '.join(others)}) "
                  "move or do not parse")


def _reference_run(
    session: Session, run_id: int, settings: Settings
) -> tuple[Reference | None, str]:
    """Run ``run_id``'s torch: its recorded wheel (``run:<id>``), else its own spec."""
    earlier = session.get_one(Run, run_id)
    recorded = run_identity(earlier).torch
    try:
        wheel = recorded_torch(session, run_id)
    except NoRecordedTorch:
        spec = _parsed(earlier.torch_spec, settings)
        if spec is None or _moving(spec) or spec.kind is SourceKind.RUN:
            return None, (f"run #{run_id}'s torch spec {earlier.torch_spec!r} cannot give "
                          f"its torch again (a moving spec, and no wheel recorded)")
        return Reference(spec, run_id, recorded), ""
    spec = TorchSpec(f"run:{run_id}", SourceKind.WHEEL, location=wheel.url, sha256=wheel.sha256)
    return Reference(spec, run_id, recorded), ""


@dataclass(frozen=True)
class Where:
    """Where the isolating run builds and tests: the run's settings, dir and child
    environment, its tree's recipe and key (for the build dir)."""

    settings: Settings
    policy: ChildEnvPolicy
    masker: SecretMasker
    run_dir: Path
    recipe: Recipe
    tree_key: str


def unanswered(found: Plan) -> dict[int, IsolationResult]:
    """The failures the plan cannot answer for, and why: the skipped ones, and every one
    when there is no reference torch."""
    results = {i: IsolationResult.not_run(why, found.nodeid_of[i])
               for i, why in found.skipped.items()}
    if found.reference is None:
        results.update((i, IsolationResult.not_run(found.why_not, nodeid))
                       for i, nodeid in found.wanted.items())
    return results


def isolate(found: Plan, where: Where, log: LogSink) -> tuple[dict[int, IsolationResult], str]:
    """Run the plan: one answer per failure that needs isolation, and the step's summary."""
    results = unanswered(found)
    for result in results.values():
        log.write(f"ootci: not isolating {result.nodeid or 'a step'}: {result.why}")
    reference = found.reference
    if reference is None or not found.wanted:
        return results, found.why_not or "nothing to isolate"
    what = ", ".join([*([f"{len(found.nodeids)} failing test(s)"] if found.nodeids else []),
                      *(["`import torch`"] if found.repeats_import else [])]) or "the build"
    log.write(f"ootci: isolating {what} of backend {found.this.backend} on torch "
              f"{reference.spec.text!r} ({reference.label})")
    env, why = _provisioned(found, reference, where, log)
    if isinstance(env, _ThisRunsTorch) and reference.run_id is None:
        log.write(f"ootci: {why}: the failures happened on the pin itself")
        results.update(_on_this_runs_torch(found, reference))
        return results, f"{why}: failed on the pin itself"
    if not isinstance(env, TorchEnv):
        log.write(f"ootci: not isolated: {why}")
        results.update((i, IsolationResult.not_run(why, nodeid))
                       for i, nodeid in found.wanted.items())
        return results, why
    results.update(_experiment(found, reference, env, where, log))
    ran = Counter(r.outcome.value for i, r in results.items() if i in found.wanted)
    summary = ", ".join(f"{n} {o}" for o, n in sorted(ran.items()))
    log.write(f"ootci: isolated on torch {_identity(env).label}: {summary}")
    return results, f"on torch {_identity(env).label}: {summary}"


def _identity(env: TorchEnv) -> TorchIdentity:
    return TorchIdentity(env.version, env.git_version, env.artifact_sha256 or None)


class _ThisRunsTorch:
    """The reference torch turned out to be the one this run is on."""


def _provisioned(
    found: Plan, reference: Reference, where: Where, log: LogSink
) -> tuple[TorchEnv | _ThisRunsTorch | None, str]:
    """The reference torch's private env in the run dir, or why there is none: it could
    not be provisioned, it is not the torch that run recorded, or it is this run's
    (``_ThisRunsTorch``: then this run is the experiment on it)."""
    settings, spec = where.settings, reference.spec
    try:
        committed = commit_date(settings, spec.commit, log) if spec.kind is SourceKind.COMMIT else None
        base = provision(spec, settings.resolved_cache_dir, log, commit_date=committed,
                         package_cache=settings.resolved_package_cache_dir,
                         probe_sandbox=probe_sandbox(settings, where.policy))
    except PipelineError as exc:
        return None, f"torch {spec.text!r} could not be provisioned: {exc}"
    torch = _identity(base)
    log.write(f"ootci: reference torch {torch.label} at {base.torch_dir}")
    if reference.recorded is not None and not torch.same_as(reference.recorded):
        return None, (f"torch {spec.text!r} is {torch.label} now, not the "
                      f"{reference.recorded.label} run #{reference.run_id} tested")
    if found.this.torch is not None and torch.same_as(found.this.torch):
        return _ThisRunsTorch(), f"the reference torch is this run's own: {spec.text!r} is {torch.label}"
    return private_env(base, where.run_dir / "isolate"), ""


def _on_this_runs_torch(found: Plan, reference: Reference) -> dict[int, IsolationResult]:
    """The answers when the reference pin is the torch this run is on: every failure failed
    there already, in this run, on the known-good torch (a vendor's first night on its pin,
    a ``installed`` torch that is the pin's wheel)."""
    torch = found.this.torch
    return {i: IsolationResult(
        Isolated.FAILED, nodeid=nodeid, backend=found.this.backend, torch=torch,
        reference=f"{reference.label}, which is this run's own torch: this run is the experiment",
        fingerprint=found.seen_here.get(i, (None, ""))[0],
        line=found.seen_here.get(i, (None, ""))[1]) for i, nodeid in found.wanted.items()}


def _experiment(
    found: Plan, reference: Reference, env: TorchEnv, where: Where, log: LogSink
) -> dict[int, IsolationResult]:
    """Build on the reference torch, then run the failing tests once there."""
    settings, recipe = where.settings, where.recipe
    build_dir = cache_build_dir(settings.resolved_cache_dir, recipe.name, env.env_key,
                                where.tree_key)
    stamp(build_dir)  # one per (torch build, backend source), like the run's own
    torch = _identity(env)
    answer = _Answers(found, reference, torch)
    results: dict[int, IsolationResult] = {}
    built, finding = _build(found, env, build_dir, where, log)
    for i, nodeid in found.wanted.items():
        if nodeid is None:  # the build is what failed
            results[i] = (
                answer(i, Isolated.PASSED) if built.status is StepStatus.PASSED
                else answer(i, Isolated.FAILED, finding, built.summary)
                if built.status is StepStatus.FAILED
                else IsolationResult.not_run(
                    f"the build on torch {torch.label} could not run to its end: "
                    f"{built.summary}"))
        elif built.status is not StepStatus.PASSED:
            decisive = finding.line if finding is not None else built.summary
            results[i] = IsolationResult.not_run(
                f"the backend does not build on torch {torch.label} either: {decisive}", nodeid)
    if built.status is StepStatus.PASSED and found.repeats_import:
        record = _import(env, build_dir, where, log)
        for i, nodeid in found.wanted.items():
            if nodeid == IMPORT_NODEID:
                results[i] = (answer(i, Isolated.PASSED) if record is None else
                              answer(i, Isolated.FAILED,
                                     classify_test_record(record, found.own_packages)[1]))
    if built.status is StepStatus.PASSED and found.nodeids:
        tests = _tests(found, env, build_dir, where, log)
        for i, nodeid in found.wanted.items():
            if nodeid is not None and nodeid != IMPORT_NODEID:
                results[i] = _test_result(nodeid, tests, found.own_packages, answer, i)
    return results


@dataclass(frozen=True)
class _Answers:
    """The isolating run's answers for the failures of one plan on one reference torch."""

    found: Plan
    reference: Reference
    torch: TorchIdentity

    def __call__(self, i: int, outcome: Isolated, finding: Finding | None = None,
                 line: str = "") -> IsolationResult:
        return IsolationResult(
            outcome, nodeid=self.found.wanted[i], backend=self.found.this.backend,
            torch=self.torch, reference=self.reference.whose(self.found.against.get(i)),
            fingerprint=(finding.fingerprint or None) if finding else None,
            line=finding.line if finding else line)


def _build(
    found: Plan, env: TorchEnv, build_dir: Path, where: Where, log: LogSink
) -> tuple[StepOutcome, Finding | None]:
    """The build on the reference torch, its log in the step's and in a file of its own
    (what is classified: the build's lines only)."""
    settings, recipe = where.settings, where.recipe
    sandbox = build_sandbox(settings, where.policy, recipe, env, build_dir, where.run_dir)
    path = where.run_dir / "isolate" / "build.log"
    path.unlink(missing_ok=True)
    with LogSink(path, on_line=log.write, masker=where.masker) as build_log:
        outcome = build(recipe, env, build_dir, build_log, timeout_s=settings.step_timeout_s,
                        sandbox=sandbox, ccache_dir=ccache_dir_for(settings, recipe))
    log.write(f"ootci: the build on the reference torch {outcome.status}: {outcome.summary}")
    if outcome.status is StepStatus.PASSED:
        return outcome, None
    return outcome, classify_log(path.read_bytes(), Stage.BUILD)


def _import(env: TorchEnv, build_dir: Path, where: Where, log: LogSink) -> TestRecord | None:
    """The runner's ``import torch`` probe (torch alone, then with the backend autoloaded)
    on the reference torch: its record when the import fails there too, else None."""
    work_dir = where.run_dir / "isolate" / "import"
    work_dir.mkdir(parents=True, exist_ok=True)
    record = probe_torch_import(where.recipe, env, build_dir, work_dir, log,
                                _suite_sandbox(env, build_dir, work_dir, where))
    log.write("ootci: `import torch` on the reference torch "
              + ("fails too" if record is not None else "works"))
    return record


def _suite_sandbox(env: TorchEnv, build_dir: Path, work_dir: Path, where: Where) -> StepSandbox:
    return suite_sandbox(where.settings, where.policy, env, build_dir=build_dir,
                         source_dir=where.recipe.source_dir, work_dir=work_dir,
                         run_dir=where.run_dir)


def _tests(
    found: Plan, env: TorchEnv, build_dir: Path, where: Where, log: LogSink
) -> TestRunOutcome:
    settings = where.settings
    work_dir = where.run_dir / "isolate" / "test"
    sandbox = _suite_sandbox(env, build_dir, work_dir, where)
    options = TestRunOptions(
        timeout_s=settings.step_timeout_s, per_test_timeout_s=settings.test_timeout_s,
        rerun_failures=False, build_dir=build_dir, only=found.nodeids, sandbox=sandbox,
        masker=where.masker,
    )
    return run_tests(where.recipe, env, work_dir, log, options)


def _test_result(
    nodeid: str, tests: TestRunOutcome, own: frozenset[str], answer: _Answers, i: int,
) -> IsolationResult:
    """What ``nodeid`` did on the reference torch. A test module that did not import (its
    node id has no ``::``) passes there when pytest ran and recorded no error for it."""
    record = next((r for r in tests.results if r.nodeid == nodeid), None)
    if record is not None and record.outcome in Outcome.FAILING:
        return answer(i, Isolated.FAILED, classify_test_record(record, own)[1])
    if record is not None and record.outcome == Outcome.PASSED:
        return answer(i, Isolated.PASSED)
    if record is None and "::" not in nodeid and tests.problem is None:
        return answer(i, Isolated.PASSED)
    torch = answer.torch
    if record is not None:
        why = f"it was {record.outcome} on torch {torch.label}: {record.message or ''}".rstrip(": ")
    else:
        why = (f"no result for it on torch {torch.label}: "
               f"{tests.problem or tests.step.summary or 'not collected'}")
    return IsolationResult.not_run(why, nodeid)
