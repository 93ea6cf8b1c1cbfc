"""Whose fault a failed pip resolution is: the classifier's rules decide (resolve.py)."""

from __future__ import annotations

from pathlib import Path

from service.domain.verdict import ErrorKind
from workers.pipeline.env.resolve import pip_failure
from workers.pipeline.errors import ProvisionError, SpecError
from workers.pipeline.isolation.procs import ProcResult

LOG = Path("/tmp/provision.log")


def test_an_unreachable_index_is_the_machine_s_and_retried() -> None:
    output = [
        "WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(\"Failed"
        " to establish a new connection: [Errno 111] Connection refused\")': /simple/torch/",
        "ERROR: No matching distribution found for torch==2.13.0",
    ]
    error = pip_failure("torch==2.13.0", output, ProcResult(1, 0.1), LOG)
    assert isinstance(error, ProvisionError) and error.kind is ErrorKind.INFRA
    assert "No matching distribution" in str(error)


def test_a_requirement_no_index_has_is_the_user_s() -> None:
    output = ["ERROR: No matching distribution found for torch==99.0"]
    error = pip_failure("torch==99.0", output, ProcResult(1, 0.1), LOG)
    assert isinstance(error, SpecError) and error.kind is ErrorKind.USAGE
    assert str(error) == (
        "torch requirement 'torch==99.0' does not resolve: "
        "ERROR: No matching distribution found for torch==99.0"
    )


def test_pip_killed_by_ootci_is_the_machine_s() -> None:
    error = pip_failure("torch", [], ProcResult(-9, 600.0, killed_reason="timed out after 600 s"),
                        LOG)
    assert isinstance(error, ProvisionError) and "timed out after 600 s" in str(error)
