"""Whose module is missing: the classifier cannot know the backend's package names, the
pipeline can. A missing module of the backend's own package is the backend's fault (its build
did not install what its tests import), not the environment's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from service.domain.fingerprint import with_fingerprint
from service.domain.verdict import Category, Finding

MISSING_MODULE_RULE = "py-module-missing"
OWN_MODULE_RULE = "py-module-missing-own"


def backend_packages(backend_name: str) -> frozenset[str]:
    """The import names a backend called ``backend_name`` goes by (``torch-acme`` is
    imported as ``torch_acme``)."""
    return frozenset({backend_name, backend_name.replace("-", "_")})


def blame_own_module(finding: Finding, packages: Iterable[str]) -> Finding:
    if finding.rule != MISSING_MODULE_RULE:
        return finding
    top = finding.captures.get("module", "").split(".")[0]
    if top not in set(packages):
        return finding
    return with_fingerprint(replace(
        finding,
        category=Category.BACKEND,
        rule=OWN_MODULE_RULE,
        explanation="the backend's own module is missing: its build did not install what "
                    "its tests import",
    ))
