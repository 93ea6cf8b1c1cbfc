"""The states and outcomes of a run, its steps and its tests: one enum each, and the sets
of them the code asks about (finished, failing, ...) named once, on the enum.

Plain ``StrEnum`` values: they are what the database stores, the API answers and the
pipeline hands between steps, and they compare equal to those strings.
"""

from __future__ import annotations

import enum


class RunState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"  # ootci or the infrastructure failed, not the backend
    # A PR run whose upstream build (the PR's own wheel) is not published yet: nothing is
    # claimed or tested until it is; it expires (errored) if it never comes.
    WAITING = "waiting"

    # Class-body names are the plain values here: these are sets of the values, which
    # compare equal to the members and go straight into SQL ``IN``.
    FINISHED = enum.nonmember(frozenset({PASSED, FAILED, ERRORED}))
    # Finished with something to say about the backend (an errored run was ootci's trouble).
    CONCLUSIVE = enum.nonmember(frozenset({PASSED, FAILED}))
    ACTIVE = enum.nonmember(frozenset({QUEUED, RUNNING, WAITING}))

    @property
    def finished(self) -> bool:
        return self in RunState.FINISHED


class StepName(enum.StrEnum):
    PROVISION = "provision"
    BUILD = "build"
    TEST = "test"
    CONFORMANCE = "conformance"
    # This run's backend on an earlier torch, for the failures its history cannot blame.
    ISOLATE = "isolate"
    COLLECT = "collect"


class StepStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERRORED = "errored"
    SKIPPED = "skipped"

    # How a step that ran ends (a pipeline step's StepOutcome carries one of these).
    ENDED = enum.nonmember(frozenset({PASSED, FAILED, ERRORED}))
    # The step ran and did not succeed (its log is worth showing).
    UNSUCCESSFUL = enum.nonmember(frozenset({FAILED, ERRORED}))


class Outcome(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    CRASHED = "crashed"
    FLAKY = "flaky"  # failed, then passed on the automatic rerun

    # The test did not pass: what a rerun repeats and the dashboard counts as failing.
    FAILING = enum.nonmember(frozenset({FAILED, ERROR, CRASHED}))
    # Outcomes the collect step classifies: the failing ones and the flaky (a flake is
    # recorded and triaged as one, never a breakage).
    CLASSIFIED = enum.nonmember(frozenset({FAILED, ERROR, CRASHED, FLAKY}))
