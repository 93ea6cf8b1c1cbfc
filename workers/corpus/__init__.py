"""The breakage corpus: mutants (patched torch installs), overlays and the corpus runner.

- ``catalogue``: the named mutants with the upstream change each imitates and its verdict.
- ``overlay``: ``build_overlay`` makes a ``path:`` torch spec out of the installed torch.
- ``runner`` / ``report``: run mutants through the real pipeline (or classify their golden
  logs) and score the classifier.
"""
