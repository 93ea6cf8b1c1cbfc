"""Picking the newest installable torch from a PEP 503 index (a file:// one here; the
HTTP path is covered by the provisioning integration tests)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from packaging.tags import sys_tags

from workers.pipeline.env.resolve import newest_on_index
from workers.pipeline.errors import ProvisionError, SpecError

HERE = next(iter(sys_tags()))  # the most specific tag this interpreter installs
HERE_TAG = f"{HERE.interpreter}-{HERE.abi}-{HERE.platform}"


def make_index(root: Path, anchors: list[str]) -> str:
    project = root / "simple" / "torch"
    project.mkdir(parents=True)
    (project / "index.html").write_text("<html><body>\n" + "\n".join(anchors) + "\n</body></html>")
    return (root / "simple").as_uri()


def anchor(filename: str, *attrs: str, sha: str = "") -> str:
    fragment = f"#sha256={sha}" if sha else ""
    extra = "".join(f" {a}" for a in attrs)
    return f'<a href="../../files/{filename.replace("+", "%2B")}{fragment}"{extra}>{filename}</a>'


def test_newest_compatible_non_yanked_wheel_wins(tmp_path: Path) -> None:
    sha = hashlib.sha256(b"x").hexdigest()
    url = make_index(
        tmp_path,
        [
            anchor("torch-2.14.0.dev20261120+cpu-py3-none-any.whl"),
            anchor(f"torch-2.14.0.dev20261124+cpu-{HERE_TAG}.whl", sha=sha),
            # Newer, but yanked / for another platform / not a wheel: all skipped.
            anchor("torch-2.14.0.dev20261125+cpu-py3-none-any.whl", 'data-yanked=""'),
            anchor("torch-2.15.0.dev20261126+cpu-cp27-cp27mu-linux_armv7l.whl"),
            anchor("torch-2.16.0.tar.gz"),
            anchor("torchvision-9.0.0-py3-none-any.whl"),
        ],
    )
    artifact = newest_on_index(url)
    assert artifact.version == "2.14.0.dev20261124+cpu"
    assert artifact.sha256 == sha
    assert artifact.url.startswith((tmp_path / "files").as_uri())
    assert "%2B" in artifact.url  # the href as given, resolved against the page


def test_prerelease_beats_older_release(tmp_path: Path) -> None:
    url = make_index(
        tmp_path,
        [
            anchor("torch-2.13.0-py3-none-any.whl"),
            anchor("torch-2.14.0.dev20261124-py3-none-any.whl"),
        ],
    )
    assert newest_on_index(url).version == "2.14.0.dev20261124"


def test_nothing_installable_is_an_infra_error(tmp_path: Path) -> None:
    url = make_index(tmp_path, [anchor("torch-2.15.0-cp27-cp27mu-linux_armv7l.whl")])
    with pytest.raises(ProvisionError, match="no torch wheel for this Python"):
        newest_on_index(url)


def test_index_without_the_project_is_a_spec_error(tmp_path: Path) -> None:
    (tmp_path / "simple").mkdir()
    with pytest.raises(SpecError, match="no such project page"):
        newest_on_index((tmp_path / "simple").as_uri())


def test_plain_directory_of_wheels_works_as_an_index(tmp_path: Path) -> None:
    project = tmp_path / "simple" / "torch"
    project.mkdir(parents=True)
    (project / "torch-2.14.0.dev1-py3-none-any.whl").write_bytes(b"")
    (project / "torch-2.14.0.dev2-py3-none-any.whl").write_bytes(b"")
    artifact = newest_on_index((tmp_path / "simple").as_uri())
    assert artifact.version == "2.14.0.dev2"
    assert artifact.url == (project / "torch-2.14.0.dev2-py3-none-any.whl").as_uri()
