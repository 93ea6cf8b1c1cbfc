"""``ootci``: the command line, and the composition root (it may wire service and workers)."""

from service.cli.startup import importing

with importing():
    from service.cli.app import app, main

__all__ = ["app", "main"]
