"""Three mutants live, end to end, through the real pipeline on SQLite: overlay -> run row ->
provision (path:) -> pip/CMake build of the bundled backend -> pytest suite -> collect.

One build break (allocate-const), the import-time undefined symbol, and a behaviour change
the contract suite catches. Slow (backend builds): `pytest -m slow tests/integration/
test_corpus_live.py`. No baseline run: the bundled suite is green on the unpatched torch, so
the first failure of each run is the mutant's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.config import Settings
from service.db import make_engine
from service.migrate import upgrade
from workers.corpus import catalogue
from workers.corpus.overlay import installed_torch_dir
from workers.corpus.runner import LiveConfig, run_live

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3 * 3600)]

BACKEND = Path(__file__).resolve().parents[2] / "backend"
LIVE = ["allocate-const", "host-allocator-undefined-symbol", "is-backend-property-regression"]


def test_three_mutants_live(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path}/ootci.db")
    engine = make_engine(settings.resolved_database_url)
    upgrade(engine)
    torch_dir = installed_torch_dir()
    before = os.stat(torch_dir / "include/c10/core/Allocator.h")
    cfg = LiveConfig(engine=engine, settings=settings, backend_dir=BACKEND,
                     torch_dir=torch_dir, work_root=tmp_path / "corpus", baseline=False)

    results, _ = run_live(cfg, [catalogue.get(n) for n in LIVE])
    by_name = {r.mutant.name: r for r in results}

    build = by_name["allocate-const"]
    assert build.got is not None, build.error
    assert (build.got.stage, build.got.category, build.got.subtype) == (
        "build", "upstream", "signature-changed")
    assert build.got.captures["symbol"] == "allocate"
    assert "marked" in build.got.line and "override" in build.got.line

    link = by_name["host-allocator-undefined-symbol"]
    assert link.got is not None, link.error
    assert (link.got.stage, link.got.subtype) == ("import", "link-abi")
    assert "registerHostAllocatorStats" in link.got.captures["symbol"]

    regression = by_name["is-backend-property-regression"]
    assert regression.got is not None, regression.error
    assert (regression.got.stage, regression.got.subtype) == ("test", "test-regression")
    assert "is_openreg" in regression.got.line or regression.got.nodeid

    assert all(r.correct for r in results), [r.to_dict() for r in results if not r.correct]
    # The install the overlays were made from is exactly as it was.
    after = os.stat(torch_dir / "include/c10/core/Allocator.h")
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns)
    engine.dispose()
