"""A vendor's nightly on one machine, for the upstream loop's end-to-end tests: a local
nightly index, a backend that includes one torch header, real `ootci run` processes and the
fake GitHub. Each night publishes a wheel with the given header and runs the backend on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evals.paths import CULPRIT_CASES
from tests.support.cli import ootci_json as ootci
from tests.support.fake_github import FakeGitHub
from tests.support.fake_torch import NightlyIndex
from tests.support.header_backend import write_header_backend

# The culprit corpus case whose hidden PR makes Allocator::allocate const (#120969).
CASE = CULPRIT_CASES / "allocate-const.json"
HEADER = "c10/core/Allocator.h"


@dataclass
class NightlyLoop:
    env: dict[str, str]
    index: NightlyIndex
    backend: Path
    base: str  # the compare case's shas: a green night's git_version, and a red one's
    head: str

    def night(self, day: int, git_version: str, header: str) -> dict[str, Any]:
        self.index.publish(f"2.14.0.dev202611{day:02d}+cpu", git_version, {HEADER: header})
        code, runs, err = ootci(self.env, "run", "--torch", "nightly", "--backend",
                                str(self.backend), "--json")
        assert runs is not None, err
        (run,) = runs
        assert run["torch_build"]["git_version"] == git_version
        return {"code": code, **run}


def database_url(kind: str, tmp: Path, request: pytest.FixtureRequest) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("fresh_postgres_url"))
    return f"sqlite:///{tmp / 'ootci.db'}"


def nightly_loop(tmp: Path, fake_github: FakeGitHub, database: str,
                 **settings: str) -> NightlyLoop:
    base, head = fake_github.load_compare_case(CASE)
    index = NightlyIndex(tmp / "index")
    env = {
        "OOTCI_HOME": str(tmp / "home"),
        "OOTCI_DATABASE_URL": database,
        "OOTCI_NIGHTLY_INDEX_URL": index.url,
        "OOTCI_GITHUB_API_URL": fake_github.url,
        "OOTCI_GITHUB_TOKEN": fake_github.token,
        # The score-only loop, as before verification (tests/integration/test_culprit_verify.py).
        "OOTCI_LABEL_UNVERIFIED": "true",
        "OOTCI_CULPRIT_VERIFY_TOP": "0",
        "OOTCI_PUBLIC_URL": "https://ootci.example",
        **settings,
    }
    return NightlyLoop(env, index, write_header_backend(tmp / "vendor"), base, head)
