"""A missing module is the environment's unless it is the backend's own package."""

from __future__ import annotations

from service.domain.classify import backend_packages, blame_own_module, classify_log
from service.domain.verdict import Category, Stage, Subtype
from tests.fixtures.logs.golden_logs import HERE, load

LOG = load(HERE / "test_dependency_missing.log").body


def test_a_missing_test_dependency_is_the_environments() -> None:
    finding = classify_log(LOG, Stage.TEST)
    assert finding is not None
    kept = blame_own_module(finding, backend_packages("torch-vendor"))
    assert kept is finding
    assert (kept.category, kept.subtype) == (Category.INFRA, Subtype.ENVIRONMENT)


def test_a_missing_module_of_the_backends_own_package_is_the_backends() -> None:
    finding = classify_log(LOG, Stage.TEST)
    assert finding is not None
    own = blame_own_module(finding, backend_packages("parameterized"))
    assert own.category is Category.BACKEND and own.rule == "py-module-missing-own"
    assert own.captures["module"] == "parameterized"
    assert own.fingerprint and own.fingerprint != finding.fingerprint


def test_backend_names_with_dashes_import_with_underscores() -> None:
    assert "torch_vendor" in backend_packages("torch-vendor")
