"""``ootci run``'s embedded outbox drain: skipped without starting a GitHub client when
nothing is due, and still sending what a run queued."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import sessionmaker

from service.cli.runs import report_to_github
from service.config import Settings
from service.models import OutboxMessage, OutboxState
from tests.support.fake_github import FakeGitHub
from tests.support.paths import REPO_ROOT
from tests.support.upstream_rows import CASE, breakage_with_range

pytest_plugins = ["tests.support.github_fixtures"]


def test_what_a_run_queued_is_still_drained(engine: Engine, fake_github: FakeGitHub,
                                            tmp_path: Path) -> None:
    sessions = sessionmaker(engine)
    with sessions() as session:
        breakage_with_range(session, *fake_github.load_compare_case(CASE))
    settings = Settings(home=tmp_path / "home", github_api_url=fake_github.url)
    report_to_github(engine, settings)
    with sessions() as session:
        states = set(session.scalars(select(OutboxMessage.state)))
    assert OutboxState.PENDING not in states and states


def test_nothing_due_starts_no_github_client(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from service.cli.runs import report_to_github
        from service.config import Settings
        from service.db import make_engine
        from service.migrate import upgrade
        settings = Settings(home=Path({str(tmp_path / 'home')!r}), database_url="")
        engine = make_engine(settings.resolved_database_url)
        upgrade(engine)
        report_to_github(engine, settings)
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("github", "service.github")))))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert json.loads(proc.stdout.splitlines()[-1]) == []
