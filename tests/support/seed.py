"""Deterministic demo data: nights of runs, contract-test results, classified failures and
the breakages they belong to.

The same generator feeds the dashboard's tests, the browser tests, ``benchmarks/dashboard.py``
(10k runs / 1M test results) and a demo database (``seed_database``). It writes rows with
Core inserts in batches (and COPY for the big tables on Postgres), never through the ORM
unit of work, because a million objects in one session would take minutes.

The story it tells: every night each backend runs against that night's nightly and against
every pin. Now and then an upstream change breaks the nightlies for some backends for a few
nights (a header moves, a signature changes, a test regresses...), a backend bug breaks all
targets of one backend, a build gets OOM-killed (infra), a test flakes. Every failure carries
a classifier Finding (``service.domain.verdict.Finding.to_dict`` shape) with its log context,
and every failed step stores a log in which the decisive line sits at ``line_no``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, func, select, text

from service.domain.verdict import COMPATIBLE, severity_rank
from service.models import (
    Backend,
    Breakage,
    Failure,
    Run,
    Step,
    TestResult,
    TorchBuild,
)

SUITES: dict[str, tuple[str, ...]] = {
    "test_device": ("device_count", "set_device", "device_guard", "current_device",
                    "device_properties", "is_available", "device_context", "synchronize",
                    "exchange_device"),
    "test_memory": ("empty", "copy_h2d", "copy_d2h", "caching_allocator_stats", "empty_cache",
                    "pinned_memory", "memory_isolation", "record_stream", "max_memory"),
    "test_streams": ("default_stream", "stream_priority", "event_record", "event_elapsed",
                     "wait_stream", "stream_context", "query", "synchronize_event",
                     "external_stream"),
    "test_ops": ("add", "mul_broadcast", "matmul", "index_select", "cat", "view_as_strided",
                 "fill_", "copy_", "reduce_sum", "softmax", "addmm", "where"),
    "test_fallback": ("cpu_fallback_global", "per_op_fallback", "fallback_warns",
                      "fallback_inplace", "fallback_out", "fallback_view", "fallback_dtype",
                      "fallback_scalar", "fallback_list"),
    "test_autograd": ("backward_add", "backward_matmul", "grad_accumulate", "no_grad",
                      "retain_graph", "custom_function", "hooks", "double_backward",
                      "anomaly_mode"),
    "test_amp": ("autocast_fp16", "autocast_bf16", "autocast_cache", "grad_scaler",
                 "nested_autocast", "autocast_dtype_policy", "autocast_disabled",
                 "custom_fwd", "custom_bwd"),
    "test_random": ("manual_seed", "generator_state", "fork_rng", "rand_like", "bernoulli",
                    "randperm", "normal_", "seed_all", "offset_increment"),
    "test_serialization": ("save_load", "backend_meta", "map_location", "storage_device",
                           "pickle_protocol", "weights_only", "state_dict", "rebuild_tensor",
                           "load_to_cpu"),
    "test_custom_ops": ("schema", "kernel", "meta_kernel", "autograd_kernel", "opcheck",
                        "fake_tensor", "library_impl", "out_variant", "dispatch_key_set"),
    "test_profiler": ("profile_ops", "profile_memory", "record_function", "kineto_events",
                      "export_trace", "profile_streams", "schedule", "stack", "flops"),
    "test_distributed": ("init_process_group", "all_reduce", "broadcast", "all_gather",
                         "reduce_scatter", "barrier", "send_recv", "backend_registered",
                         "new_group"),
}


def nodeid(suite: str, test: str) -> str:
    klass = "Test" + "".join(p.capitalize() for p in suite.removeprefix("test_").split("_"))
    return f"tests/{suite}.py::{klass}::test_{test}"


ALL_TESTS: tuple[tuple[str, str], ...] = tuple(
    (suite, nodeid(suite, t)) for suite, tests in SUITES.items() for t in tests
)


@dataclass(frozen=True)
class SeedSpec:
    nights: int = 21
    backends: tuple[str, ...] = ("openreg", "acme_npu", "zeta_xpu")
    pins: tuple[str, ...] = ("2.12.0", "2.13.0")
    # The last night; fixed by default so two seeds are identical.
    end: dt.date = dt.date(2026, 11, 25)
    # The last backend's run on the newest nightly is left running (live progress demo).
    running_tail: bool = True
    seed: int = 6
    # Fewer tests per suite make big, fast seeds for tests (None: the whole suite).
    tests_per_suite: int | None = None
    batch_size: int = 20_000

    @property
    def runs(self) -> int:
        return self.nights * len(self.backends) * (1 + len(self.pins))


# --- the failures the story uses ------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One way things break: where (stage/step), who is blamed, and the evidence."""

    name: str
    stage: str  # build | import | test
    category: str  # upstream | backend | infra | flake
    subtype: str
    rule: str
    line: str
    captures: dict[str, str]
    explanation: str
    suite: str | None = None  # for test-stage kinds: which suite's tests fail
    tests: tuple[str, ...] = ()
    pins_too: bool = False  # backend bugs and infra hit every target, upstream ones only nightlies


KINDS: tuple[Kind, ...] = (
    Kind("header-moved", "build", "upstream", "header-moved", "cxx.missing-header",
         "csrc/runtime/OpenRegHooks.cpp:9:10: fatal error: ATen/detail/PrivateUse1HooksInterface.h: "
         "No such file or directory",
         {"header": "ATen/detail/PrivateUse1HooksInterface.h", "file": "csrc/runtime/OpenRegHooks.cpp"},
         "A header under torch/include that the backend includes no longer exists."),
    Kind("signature-changed", "build", "upstream", "signature-changed", "cxx.override-mismatch",
         "csrc/runtime/OpenRegGuard.h:41:22: error: 'c10::DeviceIndex OpenRegGuardImpl::"
         "deviceCount() const' marked 'override', but does not override",
         {"symbol": "deviceCount", "file": "csrc/runtime/OpenRegGuard.h"},
         "A virtual the backend overrides changed its signature upstream."),
    Kind("symbol-removed", "build", "upstream", "symbol-removed", "cxx.not-a-member",
         "csrc/aten/OpenRegGenerator.cpp:27:18: error: 'getDefaultGenerator' is not a member "
         "of 'at::detail'",
         {"symbol": "at::detail::getDefaultGenerator", "file": "csrc/aten/OpenRegGenerator.cpp"},
         "A symbol the backend uses was removed or renamed upstream."),
    Kind("new-pure-virtual", "build", "upstream", "new-pure-virtual", "cxx.abstract-type",
         "csrc/runtime/OpenRegHooks.cpp:88:12: error: cannot allocate an object of abstract "
         "type 'OpenRegHooksInterface'",
         {"symbol": "OpenRegHooksInterface", "file": "csrc/runtime/OpenRegHooks.cpp"},
         "Upstream added a pure virtual method the backend does not implement."),
    Kind("link-abi", "import", "upstream", "link-abi", "import.undefined-symbol",
         "ImportError: torch_openreg/lib/libtorch_openreg.so: undefined symbol: "
         "_ZN3c1010TensorImpl17set_storage_offsetEl",
         {"symbol": "_ZN3c1010TensorImpl17set_storage_offsetEl",
          "library": "libtorch_openreg.so"},
         "The built library references a symbol libtorch no longer exports."),
    Kind("test-regression", "test", "upstream", "test-regression", "pytest.assertion",
         "AssertionError: Tensor-likes are not close! Mismatched elements: 3 / 16 (18.8%)",
         {"exception": "AssertionError"},
         "A contract test that passed on the last green pin now fails.",
         suite="test_amp", tests=("autocast_bf16", "autocast_dtype_policy")),
    Kind("crash", "test", "upstream", "crash", "pytest.crash",
         "Fatal Python error: Segmentation fault",
         {"signal": "SIGSEGV"},
         "A test process died of a signal; the other tests still ran (crash isolation).",
         suite="test_streams", tests=("event_elapsed",)),
    Kind("new-hook-required", "test", "upstream", "new-hook-required", "python.missing-hook",
         "RuntimeError: Please register PrivateUse1HooksInterface by "
         "`RegisterPrivateUse1HooksInterface` first.",
         {"symbol": "RegisterPrivateUse1HooksInterface"},
         "A Python/C++ API now requires a hook the backend lacks.",
         suite="test_random", tests=("generator_state", "fork_rng", "seed_all")),
    Kind("backend-bug", "test", "backend", "generic", "python.runtime-error",
         "RuntimeError: orMemcpyAsync: invalid stream handle 0x7f3a2c001240",
         {"symbol": "orMemcpyAsync"},
         "Fails on the pinned torch too: the backend change is to blame.",
         suite="test_memory", tests=("copy_h2d", "record_stream"), pins_too=True),
    Kind("oom-killed", "build", "infra", "killed", "infra.killed",
         "c++: fatal error: Killed signal terminated program cc1plus",
         {"signal": "SIGKILL"},
         "The compiler was killed (out of memory): the machine, not the code."),
)
KIND_BY_NAME = {k.name: k for k in KINDS}
# As in service.commands.breakages: flakes and infra trouble are not breakages of the integration path.
NOT_A_BREAKAGE = frozenset({"flake", "infra"})


@dataclass
class Event:
    kind: Kind
    start: int  # first night (index)
    nights: int
    backends: frozenset[str]

    def active(self, night: int) -> bool:
        return self.start <= night < self.start + self.nights


def schedule_events(spec: SeedSpec, rng: random.Random) -> list[Event]:
    """Breakages across the timeline: a new one every few nights, some overlapping."""
    events: list[Event] = []
    night = 1
    i = 0
    while night < spec.nights:
        kind = KINDS[i % len(KINDS)]
        i += 1
        hit = rng.sample(spec.backends, k=rng.randint(1, len(spec.backends)))
        if kind.category == "infra":
            nights = 1
            hit = hit[:1]
        else:
            nights = rng.randint(2, 5)
        events.append(Event(kind, night, nights, frozenset(hit)))
        night += rng.randint(2, 6)
    return events


# --- logs -----------------------------------------------------------------------------------


def _sha(*parts: object) -> str:
    return hashlib.sha1("/".join(str(p) for p in parts).encode()).hexdigest()


BUILD_PRELUDE = (
    "-- The CXX compiler identification is GNU 12.2.0",
    "-- Found Torch: torch/lib/libtorch.so",
    "-- Configuring done",
    "-- Generating done",
    "-- Build files have been written to: build",
)
SOURCES = ("runtime/OpenRegFunctions.cpp", "runtime/OpenRegHooks.cpp", "runtime/OpenRegGuard.cpp",
           "runtime/OpenRegDeviceAllocator.cpp", "runtime/OpenRegHostAllocator.cpp",
           "aten/OpenRegGenerator.cpp", "aten/OpenRegMinimal.cpp", "aten/OpenRegExtra.cpp",
           "aten/native/Copy.cpp", "aten/native/Fill.cpp", "amp/Autocast.cpp",
           "profiler/OpenRegProfiler.cpp", "distributed/ProcessGroupOpenReg.cpp")


def build_log(fail: Kind | None) -> tuple[bytes, int | None, list[str]]:
    """A ninja build log; with ``fail``, the decisive line and its 1-based line number."""
    lines = list(BUILD_PRELUDE)
    n = len(SOURCES)
    decisive = None
    for i, src in enumerate(SOURCES, 1):
        lines.append(f"[{i}/{n + 2}] Building CXX object CMakeFiles/torch_openreg.dir/csrc/{src}.o")
        if fail is not None and i == 3:
            lines.append(f"FAILED: CMakeFiles/torch_openreg.dir/csrc/{src}.o")
            lines.append("/usr/bin/c++ -DTORCH_EXTENSION_NAME=_C -O2 -std=c++17 -c csrc/" + src)
            lines.append("In file included from csrc/" + src + ":3:")
            lines.append(fail.line)
            decisive = len(lines)
            lines.append("    9 | #include <ATen/detail/PrivateUse1HooksInterface.h>")
            lines.append("      |          ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~")
            lines.append("compilation terminated.")
            lines.append("ninja: build stopped: subcommand failed.")
            break
    else:
        lines.append(f"[{n + 1}/{n + 2}] Linking CXX shared library lib/libtorch_openreg.so")
        lines.append(f"[{n + 2}/{n + 2}] Linking CXX shared module _C.so")
    return ("\n".join(lines) + "\n").encode(), decisive, lines


def junit_report(nid: str, kind: Kind) -> tuple[str, str]:
    """A failed test's JUnit message and traceback; the decisive line ends the traceback."""
    name = nid.split("::")[-1]
    details = "\n".join((
        "Traceback (most recent call last):",
        f'  File "backend/{nid.split("::")[0]}", line 42, in {name}',
        "    self.assertEqual(x.cpu(), expected)",
        '  File "torch/testing/_internal/common_utils.py", line 4103, in assertEqual',
        "    raise error_metas.pop()[0].to_error(msg)",
        kind.line,
    ))
    return kind.line, details


def pytest_log(
    results: Sequence[tuple[str, str, str]], fail: Kind | None, import_fail: bool
) -> tuple[bytes, dict[str, int], list[str]]:
    """A pytest log; returns where each failing test's decisive line is (nodeid -> line_no)."""
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.2, pytest-8.3.3", "rootdir: backend"]
    where: dict[str, int] = {}
    if import_fail and fail is not None:
        lines += ["ImportError while loading conftest 'backend/tests/conftest.py'.",
                  "backend/tests/conftest.py:3: in <module>", "    import torch_openreg",
                  "torch_openreg/__init__.py:12: in <module>", "    from torch_openreg import _C",
                  fail.line]
        where["<import>"] = len(lines)
        lines += ["=========================== 1 error in 0.41s ==========================="]
        return ("\n".join(lines) + "\n").encode(), where, lines
    for _suite, nid, outcome in results:
        lines.append(f"{nid} {outcome.upper()}")
    for _suite, nid, outcome in results:
        if outcome in ("failed", "crashed") and fail is not None:
            lines += [f"_______________________ {nid.split('::')[-1]} _______________________",
                      "    def " + nid.split("::")[-1] + "(self):",
                      "        x = torch.randn(4, 4, device='openreg')",
                      ">       self.assertEqual(x.cpu(), expected)", fail.line]
            where[nid] = len(lines)
            lines += [f"{nid.split('::')[0]}:42: {fail.captures.get('exception', 'Error')}", ""]
    passed = sum(1 for r in results if r[2] == "passed")
    lines.append(f"======================== {passed} passed in 12.34s ========================")
    return ("\n".join(lines) + "\n").encode(), where, lines


# --- the row generator ----------------------------------------------------------------------


@dataclass
class _Ids:
    run: int = 0
    step: int = 0
    result: int = 0
    failure: int = 0
    breakage: int = 0
    torch: int = 0

    def next(self, name: str) -> int:
        value = int(getattr(self, name)) + 1
        setattr(self, name, value)
        return value


@dataclass
class Rows:
    """One batch of rows per table, in foreign-key order."""

    torch_builds: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    test_results: list[dict[str, Any]] = field(default_factory=list)
    breakages: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def size(self) -> int:
        return len(self.runs) + len(self.steps) + len(self.test_results) + len(self.failures)


def _context(lines: list[str], line_no: int) -> tuple[list[str], list[str]]:
    return lines[max(0, line_no - 6): line_no - 1], lines[line_no: line_no + 4]


def generate(spec: SeedSpec, backend_ids: dict[str, int], ids: _Ids) -> Iterator[Rows]:
    """Yield rows night by night (batched by ``spec.batch_size``); breakages are updated in
    place as nights go by and yielded once at the very end, so they carry final counts.
    The breakage rows of the last batch must therefore be written before its failures."""
    rng = random.Random(spec.seed)
    events = schedule_events(spec, rng)
    start = spec.end - dt.timedelta(days=spec.nights - 1)
    rows = Rows()
    pin_ids: dict[str, int] = {}
    for pin in spec.pins:
        pin_ids[pin] = ids.next("torch")
        rows.torch_builds.append(dict(
            id=pin_ids[pin], spec=f"pip:torch=={pin}", source_kind="pip", version=f"{pin}+cpu",
            git_version=_sha("pin", pin)[:40], env_key=_sha("env", pin)[:16],
            python="/usr/bin/python3.11",
            created_at=dt.datetime.combine(start, dt.time(2, 50), dt.UTC)))
    breakages: dict[tuple[str, str], dict[str, Any]] = {}
    all_breakages: list[dict[str, Any]] = []
    # Failure rows wait for the end: their breakage rows must exist first (foreign key).
    pending_failures: list[dict[str, Any]] = []
    flaky_rng = random.Random(spec.seed + 1)
    tests = ALL_TESTS if spec.tests_per_suite is None else tuple(
        (suite, nodeid(suite, t)) for suite, names in SUITES.items()
        for t in names[: spec.tests_per_suite])
    green_logs: dict[str, tuple[bytes, int]] = {}

    for night in range(spec.nights):
        day = start + dt.timedelta(days=night)
        nightly_id = ids.next("torch")
        nightly_sha = _sha("nightly", day)[:40]
        rows.torch_builds.append(dict(
            id=nightly_id, spec="nightly", source_kind="nightly",
            version=f"2.14.0.dev{day:%Y%m%d}+cpu", git_version=nightly_sha,
            env_key=_sha("env", day)[:16], python="/usr/bin/python3.11",
            created_at=dt.datetime.combine(day, dt.time(2, 55), dt.UTC)))
        active = [e for e in events if e.active(night)]
        targets = [("nightly", nightly_id, "nightly")] + [
            (f"pip:torch=={p}", pin_ids[p], "pin") for p in spec.pins]
        slot = 0
        for backend in spec.backends:
            backend_sha = _sha(backend, night // 7)[:12]
            for torch_spec, torch_id, target_kind in targets:
                slot += 1
                created = dt.datetime.combine(day, dt.time(3, 0), dt.UTC) + dt.timedelta(
                    minutes=7 * slot)
                hits = [e for e in active if backend in e.backends
                        and (target_kind == "nightly" or e.kind.pins_too)]
                is_tail = (spec.running_tail and night == spec.nights - 1
                           and backend == spec.backends[-1] and target_kind == "nightly")
                if is_tail:
                    hits = []  # still running: nothing has failed yet
                # Build/import kinds stop the run; the first such event wins.
                stopper = next((e for e in hits if e.kind.stage in ("build", "import")), None)
                test_hits = [e for e in hits if e.kind.stage == "test"]
                run_id = ids.next("run")
                run = dict(
                    id=run_id, backend_id=backend_ids[backend], torch_spec=torch_spec,
                    torch_build_id=torch_id, backend_sha=backend_sha, trigger="schedule",
                    trigger_info={"schedule": "nightly", "night": day.isoformat()},
                    created_at=created, started_at=created + dt.timedelta(seconds=5),
                    finished_at=None, claimed_by=None, lease_expires_at=None, attempts=1,
                    error=None, verdict=None, verdict_subtype=None, verdict_reason=None,
                    state="running")
                rows.runs.append(run)
                t = created + dt.timedelta(seconds=5)

                def step(name: str, status: str, seconds: float, log: bytes | None,
                         exit_code: int | None, summary: str | None = None,
                         _run_id: int = run_id, _rows: Rows = rows) -> None:
                    nonlocal t
                    finished = status not in ("running", "pending", "skipped")
                    _rows.steps.append(dict(
                        id=ids.next("step"), run_id=_run_id, name=name, status=status,
                        started_at=t if status != "pending" and status != "skipped" else None,
                        finished_at=t + dt.timedelta(seconds=seconds) if finished else None,
                        duration_s=seconds if finished else None, exit_code=exit_code,
                        log_path=None,
                        log_compressed=zlib.compress(log, 6) if log is not None else None,
                        log_size=len(log) if log is not None else None, summary=summary))
                    if finished:
                        t += dt.timedelta(seconds=seconds)

                step("provision", "passed", 4.0 + slot % 3,
                     b"resolved torch " + torch_spec.encode() + b"\nreusing environment\n", 0)
                failures: list[tuple[Kind, str, str | None, int, list[str]]] = []
                if stopper and stopper.kind.stage == "build":
                    log, line_no, lines = build_log(stopper.kind)
                    assert line_no is not None
                    step("build", "failed", 61.0, log, 1, "ninja: build stopped")
                    step("test", "skipped", 0, None, None)
                    step("collect", "skipped", 0, None, None)
                    failures.append((stopper.kind, "build", None, line_no, lines))
                else:
                    if "build" not in green_logs:
                        log, _, _ = build_log(None)
                        green_logs["build"] = (log, 0)
                    step("build", "passed", 148.0 + (run_id % 17), green_logs["build"][0], 0)
                    if is_tail:
                        run["claimed_by"] = "worker-1"
                        run["lease_expires_at"] = created + dt.timedelta(hours=2)
                        step("test", "running", 0, None, None)
                        step("collect", "pending", 0, None, None)
                        continue
                    if stopper:  # import failure: the suite could not even be collected
                        log, where, lines = pytest_log([], stopper.kind, import_fail=True)
                        step("test", "failed", 3.2, log, 4, "ImportError")
                        step("collect", "passed", 0.3, None, 0)
                        failures.append((stopper.kind, "test", None, where["<import>"], lines))
                    else:
                        failing = {nodeid(e.kind.suite or "", tn): e.kind
                                   for e in test_hits for tn in e.kind.tests}
                        results = []
                        for suite, nid in tests:
                            outcome = "passed"
                            if nid in failing:
                                outcome = "crashed" if failing[nid].subtype == "crash" else "failed"
                            elif flaky_rng.random() < 0.0015:
                                outcome = "flaky"
                            elif suite == "test_distributed" and nid.endswith("send_recv"):
                                outcome = "skipped"
                            results.append((suite, nid, outcome))
                        if test_hits:
                            log, _, _ = pytest_log(results, test_hits[0].kind, False)
                        else:
                            cache_key = f"test/{len(results)}"
                            if cache_key not in green_logs or any(r[2] == "flaky" for r in results):
                                glog, _, _ = pytest_log(results, None, False)
                                if not any(r[2] == "flaky" for r in results):
                                    green_logs[cache_key] = (glog, 0)
                                log = glog
                            else:
                                log = green_logs[cache_key][0]
                        n_fail = sum(1 for r in results if r[2] in ("failed", "crashed"))
                        step("test", "failed" if n_fail else "passed", 35.0 + run_id % 11, log,
                             1 if n_fail else 0, f"{n_fail} failed" if n_fail else "all passed")
                        step("collect", "passed", 0.4, None, 0)
                        for i, (suite, nid, outcome) in enumerate(results):
                            kind = failing.get(nid)
                            report = junit_report(nid, kind) if kind else None
                            rows.test_results.append(dict(
                                id=ids.next("result"), run_id=run_id, nodeid=nid, suite=suite,
                                outcome=outcome, duration_s=round(0.01 + (i % 7) * 0.013, 3),
                                message=report[0] if report else None,
                                details=report[1] if report else None))
                            if kind and report:
                                # As the pipeline does: a failed test is classified from its
                                # JUnit report, so the line number is within that text.
                                text = f"{report[0]}\n{report[1]}".split("\n")
                                failures.append((kind, "test", nid, len(text), text))

                # Classified failures, attached to their breakages.
                for kind, step_name, failed_id, line_no, lines in failures:
                    fp = _sha("fp", kind.name, failed_id or "")[:16]
                    key = (backend, fp)
                    b = breakages.get(key)
                    if kind.category in NOT_A_BREAKAGE:
                        b = None
                    elif b is None or b["status"] == "resolved":
                        b = dict(
                            id=ids.next("breakage"), backend_id=backend_ids[backend],
                            fingerprint=fp + f"-{len(all_breakages)}", fingerprint_version=1,
                            category=kind.category, subtype=kind.subtype,
                            title=_title(kind, failed_id),
                            captures=dict(kind.captures), status="open",
                            first_seen_run_id=run_id, last_seen_run_id=run_id,
                            first_seen_at=created, last_seen_at=created, occurrences=1,
                            resolved_at=None, resolved_by_run_id=None,
                            culprits=_culprits(kind, nightly_sha, rng), note=None)
                        breakages[key] = b
                        all_breakages.append(b)
                    if b is not None and b["last_seen_run_id"] != run_id:
                        b["occurrences"] += 1
                    if b is not None:
                        b["last_seen_run_id"] = run_id
                        b["last_seen_at"] = created
                    before, after = _context(lines, line_no)
                    finding = dict(
                        category=kind.category, subtype=kind.subtype, rule=kind.rule,
                        stage=kind.stage, line=kind.line, line_number=line_no,
                        context_before=before, context_after=after,
                        captures=dict(kind.captures), explanation=kind.explanation,
                        fingerprint=b["fingerprint"] if b else fp, fingerprint_version=1)
                    reason = (f"new since the last green run on {backend}: "
                              f"{kind.explanation}" if kind.category == "upstream"
                              else kind.explanation)
                    pending_failures.append(dict(
                        id=ids.next("failure"), run_id=run_id, step_name=step_name,
                        stage=kind.stage, nodeid=failed_id, line=kind.line, line_no=line_no,
                        captures=dict(kind.captures), category=kind.category,
                        subtype=kind.subtype, rule=kind.rule,
                        fingerprint=b["fingerprint"] if b else fp,
                        fingerprint_version=1, finding=finding, triage=kind.category,
                        triage_reason=reason, breakage_id=b["id"] if b else None))
                # A breakage of this backend that did not show up tonight on a target it
                # would hit is resolved by this run.
                if target_kind == "nightly":
                    seen = {(backend, _sha("fp", k.name, n or "")[:16])
                            for k, _s, n, _l, _ls in failures}
                    for key, b in breakages.items():
                        if key[0] == backend and b["status"] == "open" and key not in seen:
                            b["status"] = "resolved"
                            b["resolved_at"] = created
                            b["resolved_by_run_id"] = run_id
                # The run's verdict: the worst failure decides, as collect's does.
                finished = t
                run["finished_at"] = finished
                if failures:
                    kind = min((f[0] for f in failures), key=lambda k: severity_rank(k.category))
                    run["state"] = "errored" if kind.category == "infra" else "failed"
                    run["verdict"] = kind.category
                    run["verdict_subtype"] = kind.subtype
                    run["verdict_reason"] = kind.explanation
                else:
                    run["state"] = "passed"
                    run["verdict"] = COMPATIBLE
                    run["verdict_reason"] = "passed"
        if rows.size() >= spec.batch_size:
            yield rows
            rows = Rows()
    rows.breakages = all_breakages
    rows.failures = pending_failures
    yield rows


def _title(kind: Kind, nid: str | None) -> str:
    """The title service.commands.breakages gives a breakage: subtype and what the failure names."""
    subject = next((kind.captures[k] for k in ("symbol", "header") if k in kind.captures),
                   nid or kind.line[:200])
    return f"{kind.subtype}: {subject}"


def _culprits(kind: Kind, sha: str, rng: random.Random) -> list[dict[str, Any]]:
    if kind.category != "upstream":
        return []
    pr = rng.randint(150_000, 169_999)
    what = kind.captures.get("symbol") or kind.captures.get("header") or kind.suite or kind.subtype
    return [
        {"sha": _sha("culprit", sha, kind.name)[:40], "pr": pr,
         "title": f"[PrivateUse1] refactor {what.split('/')[-1]}", "score": 0.82,
         "reasons": [f"edits a line declaring {what}"]},
        {"sha": _sha("culprit2", sha, kind.name)[:40], "pr": pr + 17,
         "title": "Remove deprecated device hooks", "score": 0.31,
         "reasons": ["touches aten/src/ATen/detail/, where hooks live"]},
    ]


# --- writing --------------------------------------------------------------------------------

_COPY_TABLES = ("test_results", "steps")


def _max_ids(conn: Connection) -> _Ids:
    def mx(model: Any) -> int:
        return int(conn.execute(select(func.coalesce(func.max(model.id), 0))).scalar_one())

    return _Ids(run=mx(Run), step=mx(Step), result=mx(TestResult), failure=mx(Failure),
                breakage=mx(Breakage), torch=mx(TorchBuild))


def _copy(conn: Connection, table: str, rows: list[dict[str, Any]]) -> None:
    cols = list(rows[0])
    raw = conn.connection.driver_connection
    with raw.cursor() as cur, cur.copy(  # type: ignore[union-attr]
        f"COPY {table} ({', '.join(cols)}) FROM STDIN"
    ) as copy:
        for row in rows:
            copy.write_row([json.dumps(v) if isinstance(v, dict | list) else v
                            for v in row.values()])


def _write(conn: Connection, rows: Rows) -> None:
    tables = Backend.metadata.tables
    postgres = conn.dialect.name == "postgresql"
    for name in ("torch_builds", "runs", "steps", "test_results", "breakages", "failures"):
        batch = getattr(rows, name)
        if not batch:
            continue
        if postgres and name in _COPY_TABLES:
            _copy(conn, name, batch)
        else:
            conn.execute(tables[name].insert(), batch)


def _ensure_backends(conn: Connection, names: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        found = conn.execute(select(Backend.id).where(Backend.name == name)).scalar()
        if found is None:
            found = conn.execute(
                Backend.__table__.insert().returning(Backend.__table__.c.id),  # type: ignore[attr-defined]
                dict(name=name, source=f"https://git.example.com/{name}.git", ref="main",
                     recipe={"name": name, "build": ["cmake", "--build", "build"],
                             "test": ["pytest", "tests"]},
                     created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
            ).scalar_one()
        out[name] = int(found)
    return out


class SeedRefused(RuntimeError):
    pass


def seed_database(engine: Engine, spec: SeedSpec | None = None) -> dict[str, int]:
    """Fill an empty database (schema migrated) with ``spec``'s story; returns row counts."""
    spec = spec or SeedSpec()
    with engine.begin() as conn:
        if conn.execute(select(func.count()).select_from(Run)).scalar_one():
            raise SeedRefused("the database already has runs: seed an empty database")
        backend_ids = _ensure_backends(conn, spec.backends)
        ids = _max_ids(conn)
        for rows in generate(spec, backend_ids, ids):
            _write(conn, rows)
        if conn.dialect.name == "postgresql":
            # Rows were written with explicit ids: move the sequences past them.
            for table in ("torch_builds", "runs", "steps", "test_results", "breakages",
                          "failures"):
                conn.execute(text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"))
            conn.execute(text("ANALYZE"))
        counts = {}
        for model in (Run, Step, TestResult, Failure, Breakage, TorchBuild):
            counts[model.__tablename__] = int(
                conn.execute(select(func.count()).select_from(model)).scalar_one())
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.support.seed [--nights N]``: a demo database for the dashboard, in the
    configured database (OOTCI_DATABASE_URL, default SQLite under OOTCI_HOME)."""
    import argparse

    from service.config import get_settings
    from service.db import make_engine
    from service.migrate import upgrade

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--nights", type=int, default=SeedSpec.nights)
    parser.add_argument("--no-running", action="store_true",
                        help="finish every run (by default the newest one is left running)")
    args = parser.parse_args(argv)
    engine = make_engine(get_settings().resolved_database_url)
    upgrade(engine)
    try:
        counts = seed_database(engine, SeedSpec(nights=args.nights,
                                                running_tail=not args.no_running))
    except SeedRefused as exc:
        print(f"error: {exc}")
        return 1
    print(", ".join(f"{n} {name}" for name, n in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
