"""The diagnostic import: a real interpreter, a real chain of exceptions, real c++filt."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from workers.pipeline.env.import_probe import (
    INNERMOST_MARKER,
    TORCH_ITSELF,
    decisive_text,
    demangle,
    probe_import,
)


def _module(root: Path, name: str, body: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(body)


def test_the_working_directory_cannot_shadow_an_installed_module(tmp_path: Path) -> None:
    installed, neutral = tmp_path / "site", tmp_path / "neutral"
    _module(installed, "vendor_pkg", "VALUE = 'installed'\n")
    _module(neutral, "vendor_pkg", "raise ImportError('the source tree was imported')\n")
    env = {**os.environ, "PYTHONPATH": str(installed)}
    result = probe_import(Path(sys.executable), "vendor_pkg", env, neutral)
    assert not result.failed, result.output


def test_the_innermost_cause_of_the_chain_is_reported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _module(site, "vendor_pkg", (
        "try:\n"
        "    try:\n"
        "        raise OSError('libvendor.so: wrong ELF class: ELFCLASS32')\n"
        "    except OSError as e:\n"
        "        raise ImportError('the extension did not load') from e\n"
        "except ImportError as err:\n"
        "    raise RuntimeError('Failed to load the backend extension: vendor.') from err\n"
    ))
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = probe_import(Path(sys.executable), "vendor_pkg", env, tmp_path / "neutral")
    assert result.failed and INNERMOST_MARKER in result.output
    assert result.innermost == "OSError: libvendor.so: wrong ELF class: ELFCLASS32"
    text = decisive_text(result, torch_itself=True)
    assert text.splitlines()[0] == f"{TORCH_ITSELF} {result.innermost}"


def test_demangle_names_a_cxx_symbol_and_leaves_others() -> None:
    assert demangle("_ZN3c1035getPrivateUse1DeviceAllocatorLegacyEv") == (
        "c10::getPrivateUse1DeviceAllocatorLegacy()")
    assert demangle("PyInit__C") is None
