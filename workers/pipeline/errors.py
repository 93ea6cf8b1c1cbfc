"""The pipeline's errors: one family, each of one kind (``ErrorKind``).

A step raises one of these when it cannot do its job. The kind travels with the exception
to the run's end (``execute.py``): it is stored on the run (``runs.error_kind``), sets the
run's verdict (``ErrorKind.category``), decides whether the attempt is retried (``infra``)
and what ``ootci run`` exits with (``usage``: 2, nothing stored half-way). Nothing reads
the kind back out of a message.
"""

from __future__ import annotations

from service.domain.verdict import ErrorKind


class PipelineError(Exception):
    """A step could not do its job. ``usage`` errors are the caller's fault (exit 2, nothing
    stored half-way); ``infra`` errors are the environment's (network, disk, pip);
    ``upstream`` ones torch's own (``TorchUnusable``)."""

    kind = ErrorKind.INFRA


class UsageError(PipelineError):
    kind = ErrorKind.USAGE


class SpecError(UsageError):
    """A torch spec that cannot be parsed or resolved."""


class RecipeError(UsageError):
    """A backend dir without a usable ootci.toml."""


class ProvisionError(PipelineError):
    pass


class TorchUnusable(ProvisionError):
    """torch itself does not import in a fresh env (a broken nightly): upstream's break, not
    the machine's, so never retried. ``innermost`` is the innermost error of the import."""

    kind = ErrorKind.UPSTREAM

    def __init__(self, message: str, innermost: str) -> None:
        super().__init__(message)
        self.innermost = innermost


class GitError(PipelineError):
    """The backend's repository or commit cannot be fetched: most often the network or the
    git host, so the attempt is retried like any infrastructure fault."""

    kind = ErrorKind.INFRA
