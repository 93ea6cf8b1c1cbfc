"""Three mutants live, end to end, through the real pipeline on SQLite: overlay -> run row ->
provision (path:) -> pip/CMake build of the bundled backend -> pytest suite -> collect.

One build break (allocate-const), the import-time undefined symbol, and a behaviour change
the contract suite catches. Slow (backend builds): `pytest -m slow tests/integration/
test_corpus_live.py`. The baseline (unpatched torch) runs first because the bundled suite is
not green yet: its failures must not be taken for a mutant's. It is the one full build; the
mutants reuse its compiler cache and recompile only what they change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evals.classifier.report import CaseResult
from evals.classifier.runner import LiveConfig, run_live
from evals.mutants import catalogue
from evals.mutants.overlay import installed_torch_dir
from service.config import Settings
from service.db import make_engine
from service.migrate import upgrade

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3 * 3600)]

BACKEND = Path(__file__).resolve().parents[2] / "backend"
LIVE = ["allocate-const", "host-allocator-undefined-symbol", "is-backend-property-regression"]
WATCHED = "include/c10/core/Allocator.h"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, CaseResult], tuple[int, ...]]:
    tmp = tmp_path_factory.mktemp("corpus")
    settings = Settings(home=tmp / "home", database_url=f"sqlite:///{tmp}/ootci.db")
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    torch_dir = installed_torch_dir()
    before = os.stat(torch_dir / WATCHED)
    cfg = LiveConfig(engine=engine, settings=settings, backend_dir=BACKEND,
                     torch_dir=torch_dir, work_root=tmp / "work", baseline=True)
    results, _ = run_live(cfg, [catalogue.get(n) for n in LIVE])
    engine.dispose()
    identity = (before.st_ino, before.st_size, before.st_mtime_ns)
    return {r.mutant.name: r for r in results}, identity


def test_build_break_names_the_override(live: tuple[dict[str, CaseResult], object]) -> None:
    r = live[0]["allocate-const"]
    assert r.got is not None, r.error
    assert (r.got.stage, r.got.category, r.got.subtype) == ("build", "upstream",
                                                           "signature-changed")
    assert r.got.captures["symbol"] == "allocate"
    assert "marked" in r.got.line and "does not override" in r.got.line
    assert r.correct


def test_import_undefined_symbol_is_link_abi(live: tuple[dict[str, CaseResult], object]) -> None:
    r = live[0]["host-allocator-undefined-symbol"]
    assert r.got is not None, r.error
    assert (r.got.stage, r.got.subtype) == ("import", "link-abi")
    assert "registerHostAllocatorStats" in r.got.captures["symbol"]


def test_behaviour_change_fails_the_contract_test(
    live: tuple[dict[str, CaseResult], object],
) -> None:
    r = live[0]["is-backend-property-regression"]
    assert r.got is not None, r.error
    assert (r.got.stage, r.got.category, r.got.subtype) == ("test", "upstream",
                                                           "test-regression")
    assert r.got.nodeid is not None and "::" in r.got.nodeid
    assert "is_openreg" in r.got.line or "AssertionError" in r.got.line
    assert r.correct


def test_the_install_is_untouched(live: tuple[dict[str, CaseResult], tuple[int, ...]]) -> None:
    after = os.stat(installed_torch_dir() / WATCHED)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == live[1]
