"""Headers and hygiene at the HTTP edge and in what ootci prints (issue #14 item 8)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.api.app import create_app, uvicorn_config
from service.api.headers import STRICT_CSP
from service.config import Settings
from service.dispatch import CeleryDispatcher
from tests.support.helpers import RecordingDispatcher
from tests.support.live_server import free_port, uvicorn_in_thread
from tests.support.paths import REPO_ROOT

PASSWORD = "s3cret-pw-do-not-print"


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(home=tmp_path, api_token="t"), dispatcher=RecordingDispatcher(),
                     engine=engine)
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/", 200), ("GET", "/api/runs", 200), ("GET", "/api/runs/99", 404),
     ("POST", "/api/runs", 401), ("GET", "/static/ootci.css", 200)],
)
def test_every_answer_carries_the_security_headers(
    client: TestClient, method: str, path: str, status: int
) -> None:
    resp = client.request(method, path)
    assert resp.status_code == status
    assert resp.headers["content-security-policy"] == STRICT_CSP
    assert "script-src 'self';" in STRICT_CSP and "frame-ancestors 'none'" in STRICT_CSP
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "same-origin"
    assert resp.headers["x-frame-options"] == "DENY"


def test_templates_have_no_inline_scripts_styles_or_handlers() -> None:
    """The strict policy would block them: every script and style is a static file."""
    offenders = []
    for template in sorted((REPO_ROOT / "dashboards" / "templates").glob("*.html")):
        text = template.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)[^>]*>", r"<style\b", r"\sstyle=",
                        r"\son[a-z]+=", r"javascript:"):
            offenders += [f"{template.name}: {m.group()}" for m in re.finditer(pattern, text)]
    assert offenders == []


def test_a_host_the_operator_does_not_serve_is_refused(engine: Engine, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, trusted_hosts=["ootci.example.org", "127.0.0.1"])
    app = create_app(settings, dispatcher=RecordingDispatcher(), engine=engine)
    with TestClient(app, base_url="http://evil.example") as c:
        assert c.get("/").status_code == 400
    with TestClient(app, base_url="https://ootci.example.org") as c:
        page = c.get("/")
        assert page.status_code == 200 and "evil.example" not in page.text


def _live(app_settings: Settings, engine: Engine) -> contextlib.AbstractContextManager[str]:
    app = create_app(app_settings, dispatcher=RecordingDispatcher(), engine=engine)
    config = uvicorn_config(app_settings, app, "127.0.0.1", free_port())
    config.log_level = "warning"
    return uvicorn_in_thread(config)


@pytest.mark.parametrize("proxies", [[], ["127.0.0.1"]], ids=["no-proxy", "local-proxy"])
def test_forwarded_headers_are_believed_only_from_configured_proxies(
    engine: Engine, tmp_path: Path, proxies: list[str]
) -> None:
    settings = Settings(home=tmp_path, forwarded_allow_ips=proxies)
    with _live(settings, engine) as url:
        page = httpx.get(url + "/", headers={"X-Forwarded-Proto": "https"}, timeout=10)
    assert page.status_code == 200
    links_https = "https://127.0.0.1" in page.text
    assert links_https == bool(proxies)


def test_healthz_never_shows_a_password(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    settings = Settings(
        home=tmp_path,
        database_url=f"postgresql+psycopg://ootci:{PASSWORD}@127.0.0.1:{port}/ootci",
        broker_url=f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
    )
    app = create_app(settings, dispatcher=CeleryDispatcher(settings.broker_url))
    with TestClient(app) as c:
        resp = c.get("/healthz")
    assert resp.status_code == 503
    assert PASSWORD not in resp.text


def test_ootci_migrate_hides_the_database_password(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    with_password = fresh_postgres_url.replace("://postgres@", f"://postgres:{PASSWORD}@")
    assert PASSWORD in with_password
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(tmp_path), "OOTCI_DATABASE_URL": with_password,
                    "COLUMNS": "300"})
    proc = subprocess.run([sys.executable, "-m", "service.cli", "migrate"], cwd=REPO_ROOT,
                          env=environ, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout + proc.stderr
    assert "database at head" in printed
    assert PASSWORD not in printed and "postgres:***@" in printed
