"""``python -m evals``: see ``evals/cli.py``."""

from evals.cli import main

main()
