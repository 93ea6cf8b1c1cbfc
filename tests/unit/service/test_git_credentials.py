"""Credentials for a backend's git host come from OOTCI_GIT_CREDENTIALS, reach git only
through its environment, and never ride in a registered URL: registration refuses one,
and what was stored before is served without it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.commands.backends import add_backend
from service.config import Settings
from service.db import session_scope
from service.sources import SourceUnreachable, check_source, credentials_problem, without_userinfo
from tests.support.cli import ootci
from tests.support.git_http import GitServer, serve_git
from tests.support.git_repos import make_remote
from tests.support.helpers import RecordingDispatcher
from tests.support.pyonly import write_pyonly_backend
from workers.pipeline.errors import GitError
from workers.pipeline.steps.source_tree import Source, run_tree

GIT_TOKEN = "ghp_worker-token-for-tests"
API_TOKEN = "api-token-for-tests"


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://user:s3cret@github.com/acme/a.git", True),
        ("https://s3cret@github.com/acme/a.git", True),
        ("http://u:p@10.0.0.1/a.git", True),
        ("ssh://git:pw@host/a.git", True),
        ("ssh://git@github.com/acme/a.git", False),
        ("git@github.com:acme/a.git", False),
        ("https://github.com/acme/a.git", False),
    ],
)
def test_which_urls_carry_credentials(url: str, refused: bool) -> None:
    problem = credentials_problem(url)
    assert (problem is not None) == refused
    if problem is not None:
        assert "OOTCI_GIT_CREDENTIALS" in problem and "s3cret" not in problem and ":p@" not in problem
        assert "@" not in without_userinfo(url).split("//", 1)[1].split("/", 1)[0]
    else:
        assert without_userinfo(url) == url


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[GitServer, Path]]:
    """A private repository behind a token, and a git on PATH that records its argv."""
    remote = make_remote(tmp_path / "repo")
    write_pyonly_backend(remote.work / "vendor")
    remote.push("first")
    home = tmp_path / "git-home"
    home.mkdir()
    argv_log = tmp_path / "git-argv.log"
    shim = tmp_path / "bin"
    shim.mkdir()
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    (shim / "git").write_text(f'#!/bin/sh\necho "$@" >> {argv_log}\nexec {real_git} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    with serve_git(remote.bare.parent, tmp_path / "certs", GIT_TOKEN) as server:
        (home / ".gitconfig").write_text(f"[http]\n\tsslCAInfo = {server.ca_file}\n")
        yield server, argv_log


def test_the_worker_fetches_a_private_repository_with_the_hosts_token(
    served: tuple[GitServer, Path], tmp_path: Path
) -> None:
    server, argv_log = served
    url = server.url("remote.git")
    source = Source("acme", url, "main", "vendor")
    with pytest.raises(GitError), run_tree(tmp_path / "c1", source):
        pass
    assert server.authorizations and not any(server.authorizations)  # asked, sent nothing
    host = f"localhost:{server.port}"
    with run_tree(tmp_path / "c2", source, credentials={host: GIT_TOKEN}) as tree:
        assert (tree.path / "ootci.toml").is_file()
    assert any(a.startswith("Basic ") for a in server.authorizations)
    assert GIT_TOKEN not in argv_log.read_text() and "fetch" in argv_log.read_text()
    # Another host's token is not sent here.
    with pytest.raises(GitError), run_tree(tmp_path / "c3", source,
                                           credentials={"github.com": GIT_TOKEN}):
        pass


def test_registration_checks_with_the_token_and_stores_none(
    served: tuple[GitServer, Path], engine: Engine, tmp_path: Path
) -> None:
    server, argv_log = served
    host = f"localhost:{server.port}"
    url = server.url("remote.git")
    with pytest.raises(SourceUnreachable):
        check_source(url, "main")
    assert len(check_source(url, "main", {host: GIT_TOKEN}) or "") == 40
    assert GIT_TOKEN not in argv_log.read_text()
    settings = Settings(home=tmp_path / "home", api_token=API_TOKEN,
                        git_credentials={host: GIT_TOKEN})
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        made = c.post("/api/backends", json={"name": "acme", "git": url, "ref": "main"},
                      headers={"Authorization": f"Bearer {API_TOKEN}"})
        assert made.status_code == 201, made.text
        listed = c.get("/api/backends").text
    assert GIT_TOKEN not in made.text and GIT_TOKEN not in listed


def test_the_api_refuses_a_url_with_credentials_without_echoing_them(
    engine: Engine, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path / "home", api_token=API_TOKEN)
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        answer = c.post("/api/backends",
                        json={"name": "acme", "git": "https://bob:s3cret-tok@github.com/acme/a.git"},
                        headers={"Authorization": f"Bearer {API_TOKEN}"})
        assert answer.status_code == 422 and "OOTCI_GIT_CREDENTIALS" in answer.text
        assert "s3cret-tok" not in answer.text
        assert c.get("/api/backends").json() == []


def test_a_url_stored_with_credentials_before_is_served_without_them(
    engine: Engine, tmp_path: Path
) -> None:
    with session_scope(engine) as s:
        add_backend(s, "old", "https://bob:s3cret-tok@github.com/acme/a.git",
                    changed_by="before-0018")
    settings = Settings(home=tmp_path / "home")
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        for path in ("/api/backends", "/api/backends/old"):
            body = c.get(path).text
            assert "s3cret-tok" not in body and "https://github.com/acme/a.git" in body, body


def test_the_cli_refuses_in_one_line_with_exit_2_and_stores_nothing(tmp_path: Path) -> None:
    done = ootci(tmp_path, "backend", "add", "acme", "--git",
                 "https://bob:s3cret-tok@github.com/acme/a.git")
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert "OOTCI_GIT_CREDENTIALS" in lines[0] and "s3cret-tok" not in lines[0]
    listed = ootci(tmp_path, "backend", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_the_credentials_file_is_read_and_wins(tmp_path: Path) -> None:
    secrets = tmp_path / "git-credentials.json"
    secrets.write_text(json.dumps({"GitHub.com": "from-file"}))
    settings = Settings(git_credentials={"github.com": "from-env", "gitlab.com": "gl"},
                        git_credentials_file=secrets)
    assert settings.git_tokens() == {"github.com": "from-file", "gitlab.com": "gl"}
    assert "from-env" not in repr(settings)
