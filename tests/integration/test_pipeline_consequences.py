"""A flat-layout backend whose tests import the source tree's package, which lacks the
built part: the first test module fails with the real cause (ModuleNotFoundError), later
ones with what importing it again says (the package's TORCH_LIBRARY registered twice) or
the same error. One cause: one failure row and one breakage, the import error as its line,
the other modules listed as its consequences on the run document and the run page. The
real pipeline on SQLite with the installed torch; the TestResult rows stay as they were."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.app import create_app
from service.commands.runs import create_run, get_or_create_backend
from service.config import Settings
from service.db import make_engine, session_scope
from service.documents import run_detail
from service.migrate import upgrade
from service.models import Breakage, Failure, Run
from tests.support.helpers import RecordingDispatcher
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.execute import execute_run

# The package as the source tree has it: its compiled part exists only in a built install.
FLATPKG = """\
import torch

_lib = torch.library.Library("flatpkg", "DEF")
from flatpkg._C import ops  # noqa: E402
"""
TEST_MODULE = "import flatpkg\n\n\ndef test_{n}():\n    assert flatpkg.ops\n"


def test_a_half_imported_package_is_one_failure_with_its_consequences(tmp_path: Path) -> None:
    backend = write_pyonly_backend(
        tmp_path / "flat", {f"test_{n}.py": TEST_MODULE.format(n=n) for n in (1, 2, 3)})
    # Named after its package, so a module of it that is missing is the backend's own.
    recipe = backend / "ootci.toml"
    recipe.write_text(recipe.read_text().replace('name = "pyonly"', 'name = "flatpkg"'))
    (backend / "flatpkg").mkdir()
    (backend / "flatpkg" / "__init__.py").write_text(FLATPKG)
    engine = make_engine(f"sqlite:///{tmp_path / 'ootci.db'}")
    upgrade(engine)
    # A first night on the pin itself: the run is the isolating experiment (see below).
    settings = Settings(home=tmp_path / "home", database_url=str(engine.url), broker_url="",
                        test_processes=1, pins=["installed"])
    with session_scope(engine) as s:
        run_id = create_run(s, get_or_create_backend(s, "flatpkg", str(backend)), "installed",
                            trigger="api").id
    assert execute_run(engine, settings, run_id, "w1") == "failed"

    with Session(engine) as s:
        run = s.get_one(Run, run_id)
        results = {t.nodeid: (t.outcome, t.message or "") for t in run.test_results}
        assert {n: o for n, (o, _) in results.items()} == {
            f"tests/test_{n}.py": "error" for n in (1, 2, 3)}
        assert "TORCH_LIBRARY" in results["tests/test_2.py"][1]  # the re-import symptom
        (failure,) = s.scalars(select(Failure).where(Failure.run_id == run_id))
        (breakage,) = s.scalars(select(Breakage))
        assert (failure.nodeid, failure.stage, failure.breakage_id) == (
            "tests/test_1.py", "import", breakage.id)
        assert "No module named 'flatpkg._C'" in failure.line
        # Its owner, from the experiment: it fails on the known-good torch itself.
        assert (failure.triage, breakage.category, run.verdict) == ("backend",) * 3
        assert "this run is the experiment" in (failure.triage_reason or "")
        assert [c["nodeid"] for c in failure.consequences] == ["tests/test_2.py", "tests/test_3.py"]
        assert all(c["message"] == results[c["nodeid"]][1] for c in failure.consequences)
        document = run_detail(s, run_id)
        assert document is not None
        (out,) = document.failures
        assert [c.nodeid for c in out.consequences] == ["tests/test_2.py", "tests/test_3.py"]
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as client:
        page = client.get(f"/runs/{run_id}").text
    engine.dispose()
    assert "2 consequences" in page
    assert page.count('class="nodeid"') >= 3 and "tests/test_3.py" in page
