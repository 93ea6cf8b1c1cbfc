"""ootci's evaluators: the tools that score ootci itself, and their data. Not the product.

``python -m evals --help`` lists them:

- ``classifier``: the mutant corpus (``evals.mutants``: patched torch installs that break the
  bundled backend the way upstream PRs did) through the classifier, from their golden logs
  (``data/mutants/``) or live through the real pipeline (``evals.classifier``).
- ``culprit``: culprit ranking on regression ranges with a known culprit
  (``data/culprit/``, ``evals.culprit``).
- ``mutants list|apply``: the catalogue, and an overlay of a torch install with one applied.

``service`` and ``workers`` never import this package (an import-linter contract), it is not
installed with them (``pyproject.toml``), and no product code reads ``data/``. Tests may use
it. See docs/corpus.md.
"""
