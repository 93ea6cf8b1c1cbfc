"""Pytest fixtures for the fake GitHub: register with
``pytest_plugins = ["tests.support.github_fixtures"]``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_github import FakeGitHub

UPSTREAM = "pytorch/pytorch"


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A started fake GitHub holding an empty ``pytorch/pytorch``; stopped after the test.
    Point a client at ``fake_github.url`` with ``fake_github.token``."""
    with FakeGitHub(token="ghp_fake_0123456789") as fake:
        fake.add_repo(UPSTREAM)
        yield fake
