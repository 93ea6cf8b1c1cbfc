"""POST /api/backends refuses a subdir that leaves the repository, before git is asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app
from service.config import Settings
from tests.support.helpers import RecordingDispatcher

TOKEN = "api-token-for-tests"


@pytest.mark.parametrize("subdir", ["..", "vendor/../../etc", ".git/hooks", "a\\..\\b"])
def test_a_subdir_out_of_the_tree_is_422_and_nothing_is_registered(
    engine: Engine, tmp_path: Path, subdir: str
) -> None:
    settings = Settings(home=tmp_path, api_token=TOKEN)
    with TestClient(create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)) as c:
        answer = c.post("/api/backends", headers={"Authorization": f"Bearer {TOKEN}"},
                        json={"name": "acme", "git": "https://github.com/acme/a.git",
                              "subdir": subdir})
        assert answer.status_code == 422, answer.text
        assert "inside the repository" in answer.text
        assert c.get("/api/backends").json() == []
