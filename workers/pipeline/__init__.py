"""One compatibility run: claim -> source -> provision -> build -> test -> conformance ->
collect. ``execute.py`` orchestrates; see docs/architecture.md for the packages and their
layers."""
