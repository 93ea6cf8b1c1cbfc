"""The mutant catalogue: named patches to a torch install that break the bundled backend the
way upstream changes do.

- ``catalogue``: the named mutants with the upstream change each imitates and its verdict.
- ``edits`` / ``mutant``: anchored text edits, and a mutant made of them.
- ``overlay``: ``build_overlay`` makes a ``path:`` torch spec out of an installed torch.
"""
