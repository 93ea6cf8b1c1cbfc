"""``ootci``: the command line, and the composition root (it may wire service and workers)."""

from service.cli.app import app, main

__all__ = ["app", "main"]
