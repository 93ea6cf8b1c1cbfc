"""A torch env is installed unsealed, as the worker: its installer takes wheels only, so an
sdist (whose setup.py would run with the worker's rights) is refused, never built."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from workers.pipeline.env.installer import Installer
from workers.pipeline.isolation.procs import child_env


def _evil_sdist(tmp_path: Path, marker: Path) -> Path:
    src = tmp_path / "evil-0.1"
    src.mkdir()
    (src / "setup.py").write_text(
        f"open({str(marker)!r}, 'w').write('setup.py ran as the worker')\n"
        "from setuptools import setup\nsetup(name='evil', version='0.1')\n"
    )
    (src / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n")
    sdist = tmp_path / "evil-0.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(src, arcname="evil-0.1")
    return sdist


@pytest.mark.parametrize("which", ["uv", "pip"])
def test_an_sdist_is_refused_and_its_setup_py_never_runs(tmp_path: Path, which: str) -> None:
    installer = Installer.detect(tmp_path / "cache")
    if which == "pip":
        installer = Installer("pip", tmp_path / "cache")
    elif installer.uv is None:
        pytest.skip("no uv")
    marker = tmp_path / "outside" / "pwned"
    marker.parent.mkdir()
    venv = tmp_path / "venv"
    environ = child_env(installer.environ())
    environ.pop("PYTHONPATH", None)
    subprocess.run(installer.create_venv(venv), env=environ, check=True, capture_output=True)
    sdist = _evil_sdist(tmp_path, marker)
    # uv refuses the sdist's path itself; pip builds a path it is handed whatever it is
    # told (ootci hands it only wheel URLs), so for pip the sdist is what an index offers
    # for a name.
    wanted = ([str(sdist)] if which == "uv"
              else ["--no-index", "--find-links", str(sdist.parent), "evil"])
    cmd = installer.install(venv / "bin" / "python", wanted, "")
    done = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert not marker.exists(), "the sdist's setup.py ran"
    if which == "uv":  # uv names the reason
        assert "binary" in said.lower() or "source distribution" in said.lower(), said
    else:  # pip skips the sdist: the index offers nothing it may take
        assert "no matching distribution found for evil" in said.lower(), said

