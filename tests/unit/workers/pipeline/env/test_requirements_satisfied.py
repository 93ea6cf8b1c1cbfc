"""When the test step may leave pip unstarted: ``already_satisfied`` over real dist-info
directories on a real path, answering False whenever pip would have something to do."""

from __future__ import annotations

from pathlib import Path

from workers.pipeline.env.requirements import already_satisfied


def _dist(site: Path, name: str, version: str, *requires: str) -> Path:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    return site


def test_installed_requirements_and_what_they_need_are_satisfied(tmp_path: Path) -> None:
    site = _dist(tmp_path / "site", "expecttest", "0.3.0", "packaging>=20",
                 "colorama; sys_platform == 'win32'", "pytest; extra == 'dev'")
    _dist(site, "packaging", "24.0")
    assert already_satisfied(["expecttest", "ExpectTest>=0.2,<1"], [str(site)], "2.13.0")


def test_what_pip_would_install_or_change_is_not_satisfied(tmp_path: Path) -> None:
    site = _dist(tmp_path / "site", "expecttest", "0.3.0", "packaging>=20")
    path = [str(site)]
    assert not already_satisfied(["expecttest"], path, "2.13.0")  # its dependency is missing
    _dist(site, "packaging", "19.0")
    assert not already_satisfied(["expecttest"], path, "2.13.0")  # at a version it refuses
    assert not already_satisfied(["expecttest>=1"], path, "2.13.0")
    assert not already_satisfied(["absent-thing"], path, "2.13.0")


def test_the_first_distribution_on_the_path_is_the_one_that_counts(tmp_path: Path) -> None:
    old = _dist(tmp_path / "run-env", "numpy", "1.0")
    new = _dist(tmp_path / "base-env", "numpy", "2.1")
    assert not already_satisfied(["numpy>=2"], [str(old), str(new)], "2.13.0")
    assert already_satisfied(["numpy>=2"], [str(new), str(old)], "2.13.0")


def test_torch_must_be_the_env_s_own_version(tmp_path: Path) -> None:
    site = _dist(tmp_path / "site", "torch", "2.12.0")
    assert not already_satisfied(["torch"], [str(site)], "2.13.0")  # the constraint
    assert already_satisfied(["torch"], [str(site)], "2.12.0")


def test_what_it_cannot_decide_goes_to_pip(tmp_path: Path) -> None:
    site = _dist(tmp_path / "site", "expecttest", "0.3.0")
    path = [str(site)]
    for requirement in ["expecttest[dev]", "expecttest; python_version > '3'",
                        "expecttest @ file:///wheels/expecttest-0.3.0-py3-none-any.whl",
                        "/wheels/expecttest-0.3.0-py3-none-any.whl", "not a requirement!"]:
        assert not already_satisfied([requirement], path, "2.13.0"), requirement
