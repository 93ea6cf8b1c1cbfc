"""make check-deploy: green on the repository's deploy/ and docker/, red on a copy where one
manifest, the compose file or a Dockerfile is broken."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

CHECKER = REPO_ROOT / "scripts" / "check_deploy.py"


def run_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECKER), str(root)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    for part in ("deploy", "docker"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_the_repositorys_deployment_files_are_valid() -> None:
    done = run_check(REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deploy/ and docker/ are valid" in done.stdout


def test_a_misspelled_field_in_a_manifest_turns_it_red(copy: Path) -> None:
    edit(copy / "deploy/base/api.yaml", "containerPort: 8000", "containerPorts: 8000")
    done = run_check(copy)
    assert done.returncode == 1
    assert "kubernetes-validate --strict" in done.stdout and "ootci-api" in done.stdout


def test_a_wrong_type_in_the_overlay_turns_it_red(copy: Path) -> None:
    edit(copy / "deploy/overlays/ingress/ingress.yaml", "pathType: Prefix", "pathType: [Prefix]")
    done = run_check(copy)
    assert done.returncode == 1 and "overlays/ingress" in done.stdout


def test_a_reference_to_a_missing_config_map_turns_it_red(copy: Path) -> None:
    edit(copy / "deploy/base/worker.yaml", "configMapRef: {name: ootci-config}",
         "configMapRef: {name: ootci-konfig}")
    done = run_check(copy)
    assert done.returncode == 1 and "'ootci-konfig'" in done.stdout


def test_a_key_given_twice_turns_it_red(copy: Path) -> None:
    edit(copy / "deploy/base/beat.yaml", "  replicas: 1\n", "  replicas: 1\n  replicas: 2\n")
    done = run_check(copy)
    assert done.returncode == 1 and "'replicas' appears twice" in done.stdout


def test_a_broken_compose_file_turns_it_red(copy: Path) -> None:
    edit(copy / "docker/compose.yaml", 'ports: ["8000:8000"]', "portz: [\"8000:8000\"]")
    done = run_check(copy)
    assert done.returncode == 1 and "compose-spec schema" in done.stdout


def test_a_dockerfile_the_linter_rejects_turns_it_red(copy: Path) -> None:
    edit(copy / "docker/Dockerfile.api", "WORKDIR /app", "RUN cd /app")
    done = run_check(copy)
    assert done.returncode == 1 and "DL3003" in done.stdout


def test_an_image_that_never_compiles_ootcis_sources_turns_it_red(copy: Path) -> None:
    edit(copy / "docker/Dockerfile.worker", " \\\n && python -m compileall -q service workers", "")
    result = run_check(copy)
    assert result.returncode == 1
    assert "Dockerfile.worker: sets PYTHONDONTWRITEBYTECODE=1 but never compiles service, workers" \
        in result.stdout
    assert "Dockerfile.api" not in result.stdout
