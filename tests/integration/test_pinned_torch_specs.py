"""Specs that pin upstream exactly, through the real CLI and a local nightly index of tiny
real torch wheels: ``nightly:DATE``, ``commit:SHA`` and ``run:ID`` each install the same
wheel (same sha256, same git_version), and bad input is one line and exit 2 with no run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from service.models import Run, TorchBuild
from tests.support.fake_github import FakeGitHub
from tests.support.fake_torch import NightlyIndex
from tests.support.file_server import serve_directory
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.env.resolve import parse_spec, resolve, wheel_git_version
from workers.pipeline.errors import SpecError
from workers.pipeline.logs.sink import LogSink

pytest_plugins = ["tests.support.github_fixtures"]

ROOT = Path(__file__).resolve().parents[2]
# Three nights; the middle one is the one the specs below pin.
NIGHTS = {
    "2.14.0.dev20261120+cpu": "1" * 40,
    "2.14.0.dev20261121+cpu": "2a" * 20,
    "2.14.0.dev20261124+cpu": "3" * 40,
}
PINNED_VERSION, PINNED_SHA = "2.14.0.dev20261121+cpu", "2a" * 20

SUITE = """\
import torch

def test_torch_is_a_nightly():
    assert ".dev" in torch.__version__
"""


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> tuple[NightlyIndex, dict[str, str]]:
    """The index and each version's wheel sha256."""
    index = NightlyIndex(tmp_path_factory.mktemp("nightly"))
    shas = {}
    for version, git_version in NIGHTS.items():
        wheel = index.publish(version, git_version, {"c10/core/Device.h": f"// {version}\n"})
        shas[version] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return index, shas


def ootci(home: Path, index_url: str, *args: str) -> tuple[int, Any, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(home), "COLUMNS": "200", "OOTCI_NIGHTLY_INDEX_URL": index_url})
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=900,
    )
    data = json.loads(proc.stdout) if proc.stdout.strip().startswith(("{", "[")) else None
    return proc.returncode, data, proc.stdout + proc.stderr


def _database(home: Path) -> str:
    return f"sqlite:///{home / 'ootci.db'}"


@pytest.mark.slow
def test_date_commit_and_run_specs_reproduce_the_same_wheel(
    tmp_path: Path, nightly: tuple[NightlyIndex, dict[str, str]]
) -> None:
    index, shas = nightly
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_suite.py": SUITE})
    home = tmp_path / "home"
    code, by_date, out = ootci(home, index.url, "run", "--torch", "nightly:2026-11-21",
                               "--backend", str(backend), "--json")
    assert code == 0, out
    first_id = by_date[0]["id"]
    # Short shas are how people quote commits.
    code, by_commit, out = ootci(home, index.url, "run", "--torch", f"commit:{PINNED_SHA[:10]}",
                                 "--backend", str(backend), "--json")
    assert code == 0, out
    code, by_run, out = ootci(home, index.url, "run", "--torch", f"run:{first_id}",
                              "--backend", str(backend), "--json")
    assert code == 0, out

    ids = [by_date[0]["id"], by_commit[0]["id"], by_run[0]["id"]]
    engine = create_engine(f"sqlite:///{home / 'ootci.db'}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(Run.id, Run.torch_spec, TorchBuild.version, TorchBuild.git_version,
                       TorchBuild.artifact_url, TorchBuild.artifact_sha256)
                .join(TorchBuild, TorchBuild.id == Run.torch_build_id)
                .where(Run.id.in_(ids)).order_by(Run.id)
            ).all()
    finally:
        engine.dispose()
    assert [r.torch_spec for r in rows] == ["nightly:2026-11-21", f"commit:{PINNED_SHA[:10]}",
                                            f"run:{first_id}"]
    assert {(r.version, r.git_version, r.artifact_sha256) for r in rows} == {
        (PINNED_VERSION, PINNED_SHA, shas[PINNED_VERSION])
    }
    # The recorded URL is the index's file, not a copy somewhere in the cache.
    assert {Path(urllib.parse.unquote(r.artifact_url)).name for r in rows} == {f"torch-{PINNED_VERSION}-py3-none-any.whl"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("nightly:2026-11-22", "no nightly of 2026-11-22 on"),
        ("commit:" + "9" * 40, "was built from commit " + "9" * 40),
        ("run:424242", "run:424242: no run 424242"),
        ("nightly:2026-13-01", "month must be in 1..12"),
    ],
)
def test_a_spec_naming_no_torch_is_one_line_and_exit_2_with_no_run(
    tmp_path: Path, nightly: tuple[NightlyIndex, dict[str, str]], spec: str, expected: str
) -> None:
    index, _ = nightly
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_suite.py": SUITE})
    home = tmp_path / "home"
    code, _, out = ootci(home, index.url, "run", "--torch", spec, "--backend", str(backend))
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], out
    code, runs, out = ootci(home, index.url, "runs", "--json")
    assert code == 0 and runs["total"] == 0, out  # never a run against another torch


# ------------------------------------------------------------------ resolution on its own
def _resolve(text: str, index_url: str, cache: Path, **kw: Any) -> Any:
    with LogSink(cache / "log") as log:
        return resolve(parse_spec(text, nightly_index_url=index_url), cache, log, **kw)


def test_commit_reads_the_git_version_out_of_the_wheel_itself(
    tmp_path: Path, nightly: tuple[NightlyIndex, dict[str, str]]
) -> None:
    index, shas = nightly
    artifact = _resolve(f"commit:{PINNED_SHA}", index.url, tmp_path)
    assert (artifact.version, artifact.sha256) == (PINNED_VERSION, shas[PINNED_VERSION])
    wheel = index.files / f"torch-{PINNED_VERSION}-py3-none-any.whl"
    assert wheel_git_version(wheel) == PINNED_SHA


def test_a_known_commit_date_bounds_the_search(
    tmp_path: Path, nightly: tuple[NightlyIndex, dict[str, str]]
) -> None:
    import datetime as dt

    index, _ = nightly
    # Committed the day before it shipped: found.
    found = _resolve(f"commit:{PINNED_SHA}", index.url, tmp_path,
                     commit_date=dt.date(2026, 11, 20))
    assert found.version == PINNED_VERSION
    # A date after it shipped: the 21st is not inspected, so the sha is not found there.
    with pytest.raises(SpecError, match=r"1 nightlies dated 2026-11-22 to 2026-11-26"):
        _resolve(f"commit:{PINNED_SHA}", index.url, tmp_path, commit_date=dt.date(2026, 11, 22))


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "www"
    root.mkdir()
    with serve_directory(root) as url:
        yield root, url


def test_a_wheel_url_that_404s_is_the_specs_fault_and_a_changed_wheel_is_refused(
    tmp_path: Path, http_root: tuple[Path, str], nightly: tuple[NightlyIndex, dict[str, str]]
) -> None:
    root, url = http_root
    with pytest.raises(SpecError, match="HTTP 404"):
        _resolve(f"wheel:{url}/torch-2.14.0-py3-none-any.whl", "file:///unused", tmp_path)
    index, shas = nightly
    wheel = index.files / f"torch-{PINNED_VERSION}-py3-none-any.whl"
    (root / "torch-2.14.0-py3-none-any.whl").write_bytes(wheel.read_bytes())
    pinned = parse_spec(f"wheel:{url}/torch-2.14.0-py3-none-any.whl")
    from dataclasses import replace

    with LogSink(tmp_path / "log") as log:
        from workers.pipeline.env.resolve import resolve as do_resolve

        ok = do_resolve(replace(pinned, sha256=shas[PINNED_VERSION]), tmp_path / "c1", log)
        assert ok.sha256 == shas[PINNED_VERSION]
        with pytest.raises(SpecError, match="expected " + "0" * 64):
            do_resolve(replace(pinned, sha256="0" * 64), tmp_path / "c2", log)


def test_with_a_token_the_commit_date_comes_from_github_and_bounds_the_search(
    tmp_path: Path, nightly: tuple[NightlyIndex, dict[str, str]], fake_github: FakeGitHub
) -> None:
    from service.config import Settings
    from workers.pipeline.env.commit_dates import commit_date

    fake_github.add_commit("pytorch/pytorch", {
        "sha": PINNED_SHA, "parents": [],
        "commit": {"message": "x", "committer": {"name": "a", "date": "2026-11-20T22:10:00Z"}},
    })
    settings = Settings(home=tmp_path, github_api_url=fake_github.url,
                        github_token=fake_github.token, github_max_retries=0)
    with LogSink(tmp_path / "log") as log:
        date = commit_date(settings, PINNED_SHA, log)
        assert date is not None and date.isoformat() == "2026-11-20"
        # A sha GitHub does not know: no date, and the bounded scan is used instead.
        assert commit_date(settings, "9" * 40, log) is None
    index, shas = nightly
    artifact = _resolve(f"commit:{PINNED_SHA}", index.url, tmp_path, commit_date=date)
    assert artifact.sha256 == shas[PINNED_VERSION]
    # Nights are opened oldest first from the commit date: the 24th's wheel never was.
    opened = (tmp_path / "log").read_text()
    assert "2.14.0.dev20261120+cpu was built from" in opened
    assert "2.14.0.dev20261124+cpu was built from" not in opened


def test_a_wheel_url_that_404s_is_one_line_and_exit_2_from_the_cli(
    tmp_path: Path, http_root: tuple[Path, str], nightly: tuple[NightlyIndex, dict[str, str]]
) -> None:
    _, url = http_root
    index, _ = nightly
    backend = write_pyonly_backend(tmp_path / "pyonly", {"test_suite.py": SUITE})
    home = tmp_path / "home"
    code, _, out = ootci(home, index.url, "run", "--torch",
                         f"wheel:{url}/torch-2.14.0-py3-none-any.whl", "--backend", str(backend))
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "HTTP 404" in errors[0], out
    code, runs, out = ootci(home, index.url, "runs", "--json")
    assert code == 0 and runs["total"] == 0, out
