"""Tiny stand-ins for torch nightlies: real wheels on a real PEP 503 index (a directory,
read through file:// URLs), each with its own version, git_version and C++ headers.

A backend that compiles against ``torch/include`` sees exactly the headers a night's
wheel ships, so a header that moves or a signature that changes between two wheels
breaks the build the way an upstream change does, with real compiler output.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

_INIT = '''\
"""A stand-in torch for ootci's tests: a version, a git_version and headers, nothing else."""
from torch import version
__version__ = version.__version__
'''


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


# A broken nightly: torch itself fails to import, its own error the cause of the one raised.
BROKEN_INIT = """\
try:
    import torch._C_missing
except ImportError as exc:
    raise RuntimeError("torch failed to initialise") from exc
"""


def build_wheel(
    out_dir: Path, version: str, git_version: str, headers: dict[str, str],
    init: str = _INIT,
) -> Path:
    """``torch-<version>-py3-none-any.whl`` in ``out_dir`` with ``headers`` (paths relative
    to ``torch/include``) and ``init`` as ``torch/__init__.py`` (``BROKEN_INIT``: a torch
    that does not import)."""
    files: dict[str, bytes] = {
        "torch/__init__.py": init.encode(),
        "torch/version.py": (
            f"__version__ = {version!r}\ngit_version = {git_version!r}\ncuda = None\nhip = None\n"
        ).encode(),
    }
    for rel, text in headers.items():
        files[f"torch/include/{rel}"] = text.encode()
    dist_info = f"torch-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
    ).encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: ootci-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [_record_line(name, data) for name, data in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    # The local-version "+" is kept in the file name, as PyTorch's own index does.
    wheel = out_dir / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            # A fixed timestamp: the same inputs give the same bytes (and sha256).
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return wheel


class NightlyIndex:
    """A PEP 503 index in a directory: ``simple/torch/index.html`` linking ``files/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = root / "files"
        self._anchors: list[str] = []

    @property
    def url(self) -> str:
        return (self.root / "simple").as_uri()

    def publish(self, version: str, git_version: str, headers: dict[str, str]) -> Path:
        """Build a wheel and list it on the index (with its sha256, as PyTorch's index does)."""
        wheel = build_wheel(self.files, version, git_version, headers)
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        href = f"../../files/{wheel.name.replace('+', '%2B')}#sha256={sha}"
        self._anchors.append(f'<a href="{href}">{wheel.name}</a>')
        page = self.root / "simple" / "torch" / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<html><body>\n" + "\n".join(self._anchors) + "\n</body></html>\n")
        return wheel
