"""Scoring the classifier on the mutant corpus.

- ``golden``: the golden logs of live mutant runs (``evals/data/mutants/``) and their header.
- ``runner`` / ``worker`` / ``interpreter``: classify the golden logs, or run every mutant
  through the real pipeline, each in a throwaway interpreter.
- ``report``: one result per mutant, the confusion matrix and the accuracy.
"""
