"""Provisioning torch environments with real pip, real venvs and a real HTTP index.

Real torch wheels are ~1 GB, so the pip/nightly/wheel paths are exercised with a tiny but
genuine wheel named ``torch`` (built here) served from a PEP 503 index on 127.0.0.1;
``installed`` and ``path:`` use the torch of the interpreter running the tests.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import hashlib
import http.server
import importlib.metadata
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_torch import BROKEN_INIT, build_wheel
from tests.support.torch_overlay import overlay_of_installed_torch
from tests.support.waiting import wait_until
from workers.pipeline.cache.layout import STAMP
from workers.pipeline.env.installer import Installer
from workers.pipeline.env.provision import MARKER, provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.env.run_env import private_env
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.errors import ProvisionError, SpecError, TorchUnusable
from workers.pipeline.logs.sink import LogSink

OLD_NIGHTLY = "2.14.0.dev20261120+cpu"
NEW_NIGHTLY = "2.14.0.dev20261124+cpu"


def git_sha(version: str) -> str:
    return hashlib.sha1(version.encode()).hexdigest()


def build_fake_torch_wheel(out_dir: Path, version: str, tag: str = "py3-none-any") -> Path:
    """A valid wheel of a package named torch: torch.__version__ and torch.version.git_version,
    nothing else."""
    files = {
        "torch/__init__.py": f"from torch import version\n__version__ = {version!r}\n",
        "torch/version.py": f"__version__ = {version!r}\ngit_version = {git_sha(version)!r}\n",
        f"torch-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"torch-{version}.dist-info/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: ootci-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
        ),
    }
    record = f"torch-{version}.dist-info/RECORD"
    lines = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    files[record] = "\n".join([*lines, f"{record},,"]) + "\n"
    wheel = out_dir / f"torch-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            # A fixed timestamp: the same version built twice is the same bytes.
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), text)
    return wheel


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PEP 503 index on loopback with two nightlies and a newer, incompatible wheel."""
    root = tmp_path_factory.mktemp("index")
    files = root / "files"
    files.mkdir()
    wheels = [
        build_fake_torch_wheel(files, OLD_NIGHTLY),
        build_fake_torch_wheel(files, NEW_NIGHTLY),
        # Newer, but for a Python/platform this interpreter cannot install: must be skipped.
        build_fake_torch_wheel(files, "2.15.0.dev20261125", tag="cp27-cp27mu-linux_armv7l"),
    ]
    project = root / "simple" / "torch"
    project.mkdir(parents=True)
    anchors = "\n".join(
        f'<a href="../../files/{w.name.replace("+", "%2B")}#sha256={sha256_of(w)}">{w.name}</a><br>'
        for w in wheels
    )
    (project / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{anchors}\n</body></html>\n")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: later tests reuse envs the earlier ones made."""
    return tmp_path_factory.mktemp("cache")


def do_provision(text: str, cache: Path, log_path: Path, **index_urls: str) -> TorchEnv:
    with LogSink(log_path) as log:
        return provision(parse_spec(text, **index_urls), cache, log)


def test_installed_is_the_running_torch_in_a_thin_env_of_its_own(tmp_path: Path) -> None:
    env = do_provision("installed", tmp_path / "cache", tmp_path / "log")
    # Its own interpreter (a backend built for it must not land in ootci's environment) ...
    assert env.python != Path(sys.executable)
    assert env.python.is_relative_to(tmp_path / "cache" / "envs")
    assert env.version == importlib.metadata.version("torch")
    assert len(env.git_version) == 40
    assert env.pythonpath == () and env.environ() == {}
    assert (env.torch_dir / "__init__.py").is_file()
    # ... which imports the very torch ootci runs with, and installs into its own prefix.
    probe = subprocess.run(
        [str(env.python), "-c",
         "import sysconfig, torch; print(torch.__file__); print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    ).stdout.split()
    assert Path(probe[0]).parent == env.torch_dir
    assert Path(probe[1]).is_relative_to(tmp_path / "cache")
    again = do_provision("installed", tmp_path / "cache", tmp_path / "log")
    assert (again.env_key, again.python) == (env.env_key, env.python)


@pytest.mark.slow
def test_path_overlay_comes_first(tmp_path: Path) -> None:
    overlay = overlay_of_installed_torch(tmp_path, "2.13.0+overlay", "f" * 40)
    env = do_provision(f"path:{overlay}", tmp_path / "cache", tmp_path / "log")
    assert env.source_kind == "path"
    assert (env.version, env.git_version) == ("2.13.0+overlay", "f" * 40)
    assert env.pythonpath == (overlay.resolve(),)
    assert env.torch_dir == overlay.resolve() / "torch"
    # Its own venv: a backend `pip install`ed for this overlay lands there, not in ootci's env.
    venv = tmp_path / "cache" / "envs" / env.env_key
    assert env.python == venv / "bin" / "python"
    purelib = subprocess.run(
        [
            str(env.python),
            "-c",
            "import sysconfig, pytest, numpy, pip; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(purelib).is_relative_to(venv)
    # What build and test subprocesses get imports the overlay, not site-packages' torch.
    out = subprocess.run(
        [str(env.python), "-c", "import torch; print(torch.__version__, torch.__file__)"],
        env={**os.environ, **env.environ()},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["2.13.0+overlay", str(overlay.resolve() / "torch" / "__init__.py")]
    # A backend built the way recipes do it, in a run's private env over this one, installs
    # into the run's env only: the shared env stays read-only and as it was made.
    run_env = private_env(env, tmp_path / "run")
    assert run_env.base_dirs == (venv,) and run_env.python.is_relative_to(tmp_path / "run")
    pkg = tmp_path / "vendor_pkg"
    (pkg / "ootci_vendor_probe").mkdir(parents=True)
    (pkg / "ootci_vendor_probe" / "__init__.py").write_text("")
    (pkg / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "ootci_vendor_probe"\nversion = "1.0"\n'
    )
    subprocess.run(
        [str(run_env.python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
         "."],
        cwd=pkg,
        env={**os.environ, **env.environ()},
        check=True,
        capture_output=True,
    )
    assert list((tmp_path / "run" / "env").glob("lib/*/site-packages/ootci_vendor_probe*"))
    assert not list(Path(purelib).glob("ootci_vendor_probe*"))
    assert importlib.util.find_spec("ootci_vendor_probe") is None  # not in ootci's env
    # The run's env imports the overlay's torch and the vendor package.
    out = subprocess.run(
        [str(run_env.python), "-c", "import torch, ootci_vendor_probe; print(torch.__version__)"],
        env={**os.environ, **env.environ()}, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert out == ["2.13.0+overlay"]

    # Reuse restamps the env, so the cache GC counts it as used now.
    env_stamp = tmp_path / "cache" / "envs" / env.env_key / STAMP
    month_ago = time.time() - 30 * 86400
    os.utime(env_stamp, (month_ago, month_ago))
    again = do_provision(f"path:{overlay}", tmp_path / "cache", tmp_path / "log2")
    assert again == env
    assert "reusing overlay env" in (tmp_path / "log2").read_text()
    assert env_stamp.stat().st_mtime > time.time() - 3600
    # Patched again in place, same version string: a different env (and build dir).
    (overlay / "torch" / "_ootci_patch.py").write_text("PATCHED = 2\n")
    repatched = do_provision(f"path:{overlay}", tmp_path / "cache", tmp_path / "log3")
    assert repatched.version == env.version and repatched.env_key != env.env_key
    # The installed torch was not touched through the hard links.
    assert importlib.metadata.version("torch") != "2.13.0+overlay"
    assert (
        "2.13.0+overlay"
        not in (Path(importlib.util.find_spec("torch").origin).parent / "version.py").read_text()
    )  # type: ignore[arg-type,union-attr]


def test_path_without_torch_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is not a torch install"):
        do_provision(f"path:{tmp_path}", tmp_path / "cache", tmp_path / "log")


def test_unresolvable_requirement_is_a_spec_error_quickly(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(SpecError) as info:
        do_provision("pip:torch==0.0.0.1", tmp_path / "cache", tmp_path / "log")
    assert time.monotonic() - start < 60
    message = str(info.value)
    assert "'torch==0.0.0.1' does not resolve" in message
    assert "ERROR" in message  # pip's own reason
    assert not (tmp_path / "cache" / "envs").exists() or not any(
        (tmp_path / "cache" / "envs").iterdir()
    )


def test_unreachable_nightly_index_is_an_infra_error_quickly(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/simple"
    start = time.monotonic()
    with pytest.raises(ProvisionError, match="package index unreachable") as info:
        do_provision("nightly", tmp_path / "cache", tmp_path / "log", nightly_index_url=dead)
    assert info.value.kind == "infra"
    assert time.monotonic() - start < 10


@pytest.mark.slow
def test_nightly_resolves_the_newest_compatible_wheel_and_reuses_its_env(
    index: str, cache: Path, tmp_path: Path
) -> None:
    env = do_provision("nightly", cache, tmp_path / "first.log", nightly_index_url=index)
    assert (env.source_kind, env.version, env.git_version) == (
        "nightly",
        NEW_NIGHTLY,
        git_sha(NEW_NIGHTLY),
    )
    assert env.python == cache / "envs" / env.env_key / "bin" / "python"
    assert env.torch_dir.is_relative_to(cache / "envs" / env.env_key)
    assert (cache / "envs" / env.env_key / MARKER).is_file()
    # The test tools every suite relies on are in the env.
    subprocess.run(
        [str(env.python), "-c", "import numpy, expecttest, pytest, pytest_timeout"], check=True
    )

    start = time.monotonic()
    again = do_provision("nightly", cache, tmp_path / "second.log", nightly_index_url=index)
    assert time.monotonic() - start < 10
    assert again == env
    assert "reusing env" in (tmp_path / "second.log").read_text()


@pytest.mark.slow
def test_specs_resolving_to_the_same_wheel_share_one_env(
    index: str, cache: Path, tmp_path: Path
) -> None:
    nightly = do_provision("nightly", cache, tmp_path / "n.log", nightly_index_url=index)
    pinned = do_provision(f"pip:torch=={NEW_NIGHTLY}@@{index}", cache, tmp_path / "p.log")
    assert pinned.source_kind == "pip"
    assert pinned.env_key == nightly.env_key and pinned.python == nightly.python
    assert "reusing env" in (tmp_path / "p.log").read_text()

    older = do_provision(f"pip:torch=={OLD_NIGHTLY}@@{index}", cache, tmp_path / "o.log")
    assert older.version == OLD_NIGHTLY
    assert older.env_key != nightly.env_key


@pytest.mark.slow
def test_wheel_file_spec(index: str, cache: Path, tmp_path: Path) -> None:
    wheel = build_fake_torch_wheel(tmp_path, NEW_NIGHTLY)
    env = do_provision(f"wheel:{wheel}", cache, tmp_path / "w.log")
    assert (env.source_kind, env.version) == ("wheel", NEW_NIGHTLY)
    # Same bytes as the nightly on the index: content-addressed, so the same env.
    nightly = do_provision("nightly", cache, tmp_path / "n.log", nightly_index_url=index)
    assert env.env_key == nightly.env_key

    # A wheel URL is downloaded once into the cache, then hashed like a local file.
    url = index.replace("/simple", f"/files/{wheel.name.replace('+', '%2B')}")
    remote = do_provision(f"wheel:{url}", cache, tmp_path / "u.log")
    assert remote.env_key == nightly.env_key
    assert list((cache / "wheels").glob(f"*/{wheel.name}"))
    assert "downloading" in (tmp_path / "u.log").read_text()


def test_missing_wheel_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no wheel file at"):
        do_provision(
            f"wheel:{tmp_path}/torch-2.13.0-py3-none-any.whl", tmp_path / "c", tmp_path / "log"
        )


def test_requirement_missing_from_an_index_is_a_spec_error(index: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="'torch==2.9.0' does not resolve"):
        do_provision(f"pip:torch==2.9.0@@{index}", tmp_path / "cache", tmp_path / "log")


def _site_file(env: TorchEnv, rel: str) -> Path:
    return env.torch_dir.parent / rel


@pytest.mark.slow
def test_uv_hard_links_envs_from_the_shared_package_cache(index: str, tmp_path: Path) -> None:
    packages = tmp_path / "packages"  # one cache for two workers' cache dirs
    first = provision(
        parse_spec("nightly", nightly_index_url=index), tmp_path / "w1", LogSink(tmp_path / "1.log"),
        package_cache=packages,
    )
    log = (tmp_path / "1.log").read_text()
    assert "installing with uv" in log and "venv --python" in log
    assert "--link-mode hardlink" in log
    version_py = _site_file(first, "torch/version.py")
    # Linked from the package cache, and read-only: writing it would write the cache.
    assert version_py.stat().st_nlink >= 2
    assert any(p.stat().st_ino == version_py.stat().st_ino
               for p in (packages / "uv").rglob("version.py") if "torch" in p.parts)
    assert version_py.stat().st_mode & 0o222 == 0
    assert (tmp_path / "w1" / "envs" / f"{first.env_key}.manifest.json").is_file()
    # Seeded with pip: recipes run `{python} -m pip install ...`.
    subprocess.run([str(first.python), "-m", "pip", "--version"], check=True, capture_output=True)
    subprocess.run([str(first.python), "-c", "import pytest_timeout, setuptools"], check=True)

    # A second worker's env of the same torch: the same inodes, nothing fetched again.
    second = provision(
        parse_spec("nightly", nightly_index_url=index), tmp_path / "w2", LogSink(tmp_path / "2.log"),
        package_cache=packages,
    )
    assert second.python != first.python
    assert _site_file(second, "torch/version.py").stat().st_ino == version_py.stat().st_ino


def _provision_in_thread(
    spec: str, cache_dir: Path, packages: Path, log: Path
) -> tuple[threading.Thread, list[TorchEnv]]:
    made: list[TorchEnv] = []

    def work() -> None:
        with LogSink(log) as sink:
            made.append(provision(parse_spec(spec), cache_dir, sink, package_cache=packages))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, made


def _wait_for_line(log: Path, text: str, timeout_s: float = 60) -> None:
    wait_until(lambda: text in (log.read_text() if log.exists() else ""), timeout_s,
               lambda: f"{log}: no {text!r} in\n" + (log.read_text() if log.exists() else "(no log)"),
               every=0.1)


@pytest.mark.slow
def test_new_envs_take_turns_at_the_package_cache_and_share_what_both_need(
    index: str, tmp_path: Path
) -> None:
    # Two workers, one package cache, two torches neither has seen: an install already
    # holds the cache, so both queue; then numpy (and the other tools) are unpacked once,
    # by whichever goes first, and linked into both envs.
    packages = tmp_path / "packages"
    packages.mkdir()
    logs = [tmp_path / f"{n}.log" for n in (0, 1)]
    with (packages / "uv.install.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        runs = [_provision_in_thread(f"pip:torch=={version}@@{index}", tmp_path / f"w{n}", packages,
                                     logs[n])
                for n, version in enumerate((OLD_NIGHTLY, NEW_NIGHTLY))]
        for log in logs:
            _wait_for_line(log, "waiting for another install into the package cache")
        time.sleep(1)
        assert all(thread.is_alive() and not made for thread, made in runs)
        assert not list(tmp_path.glob(f"w*/envs/*/{MARKER}"))
    for thread, _ in runs:
        thread.join(600)
    (old,), (new,) = (made for _, made in runs)
    assert (old.version, new.version) == (OLD_NIGHTLY, NEW_NIGHTLY)
    for shared in ("numpy/__init__.py", "pytest/__init__.py", "setuptools/__init__.py"):
        assert _site_file(old, shared).stat().st_ino == _site_file(new, shared).stat().st_ino, shared
    assert all("waited" in log.read_text() for log in logs)


@pytest.mark.slow
def test_pip_is_the_fallback_installer(index: str, tmp_path: Path) -> None:
    env = provision(
        parse_spec("nightly", nightly_index_url=index), tmp_path / "cache",
        LogSink(tmp_path / "pip.log"), installer=Installer("pip", tmp_path / "packages"),
    )
    assert env.version == NEW_NIGHTLY
    log = (tmp_path / "pip.log").read_text()
    assert "installing with pip" in log and "-m pip install" in log
    assert _site_file(env, "torch/version.py").stat().st_nlink == 1  # a copy of its own


@pytest.mark.slow
def test_a_tampered_env_is_rebuilt_not_reused(index: str, tmp_path: Path) -> None:
    cache, packages = tmp_path / "cache", tmp_path / "packages"
    spec = parse_spec("nightly", nightly_index_url=index)
    env = provision(spec, cache, LogSink(tmp_path / "1.log"), package_cache=packages)
    init = _site_file(env, "torch/__init__.py")
    # Bytecode an interpreter left behind is a cache, not tampering.
    stray = init.parent / "__pycache__" / "ootci_stray.cpython-311.pyc"
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"\0")
    reused = provision(spec, cache, LogSink(tmp_path / "2.log"), package_cache=packages)
    assert reused == env and "reusing env" in (tmp_path / "2.log").read_text()
    assert not stray.exists()

    # A startup hook dropped into site-packages, and torch itself rewritten in place (through
    # the hard link: the package cache's file changes with it).
    (init.parent.parent / "zz_evil.pth").write_text("import sys; print('TAMPERED')\n")
    init.chmod(0o644)
    with init.open("a") as f:
        f.write("print('TAMPERED')\n")
    rebuilt = provision(spec, cache, LogSink(tmp_path / "3.log"), package_cache=packages)
    log = (tmp_path / "3.log").read_text()
    assert "changed since it was made, rebuilding it" in log
    assert "added lib/" in log and "zz_evil.pth" in log and "changed lib/" in log
    assert "--no-cache" in log  # past the package cache whose file was rewritten
    assert rebuilt.version == env.version
    out = subprocess.run([str(rebuilt.python), "-c", "import torch"], capture_output=True,
                         text=True, check=True)
    assert "TAMPERED" not in out.stdout
    assert not (init.parent.parent / "zz_evil.pth").exists()


@pytest.mark.slow
def test_a_torch_that_does_not_import_is_torch_unusable_with_its_innermost_error(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path, "2.14.0.dev20261126+cpu", "b" * 40, {}, init=BROKEN_INIT)
    with pytest.raises(TorchUnusable) as info:
        do_provision(f"wheel:{wheel}", tmp_path / "cache", tmp_path / "log")
    assert info.value.kind == "upstream"
    assert info.value.innermost == "ModuleNotFoundError: No module named 'torch._C_missing'"
    log = (tmp_path / "log").read_text()
    assert ("ootci: torch itself does not import (TORCH_DEVICE_BACKEND_AUTOLOAD=0): "
            "ModuleNotFoundError: No module named 'torch._C_missing'") in log
    assert not any((tmp_path / "cache" / "envs").glob("*/bin"))  # nothing half-made kept
