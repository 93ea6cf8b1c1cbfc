"""The ``installed`` torch's probe is remembered only while the install is unchanged:
its fingerprint moves with every reinstall, upgrade or replaced library, and provision
probes again (and answers the torch that is there) when the remembered one is another's."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

from workers.pipeline.cache.layout import envs_dir
from workers.pipeline.env import installed_probe
from workers.pipeline.env.provision import provision
from workers.pipeline.env.resolve import parse_spec
from workers.pipeline.logs.sink import LogSink


def _fake_torch(site: Path) -> Path:
    package = site / "torch"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '2.13.0'\n")
    (package / "version.py").write_text("__version__ = '2.13.0'\n")
    (package / "lib" / "libtorch_cpu.so").write_bytes(b"\0" * 64)
    (site / "torch-2.13.0.dist-info").mkdir()
    (site / "torch-2.13.0.dist-info" / "RECORD").write_text("torch/__init__.py,,\n")
    return package


def test_the_fingerprint_moves_with_what_a_reinstall_or_a_swap_changes(tmp_path: Path) -> None:
    package = _fake_torch(tmp_path)
    first = installed_probe.fingerprint(package)
    assert installed_probe.fingerprint(package) == first  # stable while nothing changes
    changes = [
        lambda: (package / "version.py").write_text("__version__ = '2.14.0'\n"),
        lambda: (package / "lib" / "libtorch_cpu.so").write_bytes(b"\1" * 64),
        lambda: (tmp_path / "torch-2.13.0.dist-info" / "RECORD").write_text("other\n"),
        lambda: (package / "lib" / "libc10.so").write_bytes(b""),
        lambda: os.replace(tmp_path / "torch-2.13.0.dist-info", tmp_path / "torch-2.14.0.dist-info"),
    ]
    seen = {first}
    for change in changes:
        change()
        now = installed_probe.fingerprint(package)
        assert now not in seen
        seen.add(now)


def _provision_installed(cache: Path, log: Path) -> tuple[str, str]:
    with LogSink(log) as sink:
        env = provision(parse_spec("installed"), cache, sink)
    return env.version, log.read_text()


def test_installed_is_probed_once_per_install(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    version, first_log = _provision_installed(cache, tmp_path / "first.log")
    assert version == importlib.metadata.version("torch")
    assert "since its import was probed" not in first_log
    again, second_log = _provision_installed(cache, tmp_path / "second.log")
    assert again == version and "torch unchanged at" in second_log

    # What another install of torch answered is not this one's: probed again.
    saved = envs_dir(cache) / installed_probe.FILE
    other = json.loads(saved.read_text())
    other["fingerprint"] = "0" * 64
    other["probe"]["version"] = "0.0.1-another-torch"
    saved.write_text(json.dumps(other))
    third, third_log = _provision_installed(cache, tmp_path / "third.log")
    assert third == version and "since its import was probed" not in third_log
    assert json.loads(saved.read_text())["probe"]["version"] == version
