"""0018 strips credentials stored in git URLs before registration refused them."""

from __future__ import annotations

from sqlalchemy import text

from service.db import make_engine
from service.migrate import upgrade


def test_0018_strips_tokens_and_keeps_ssh_user_names(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    upgrade(engine, "0015")
    sources = {
        1: "https://user:ghp_SECRET@github.com/acme/a.git",
        2: "https://ghp_SECRET2@github.com/acme/b.git",
        3: "ssh://git@github.com/acme/c.git",
        4: "git@github.com:acme/d.git",
        5: "/srv/backends/e",
    }
    with engine.begin() as conn:
        for i, source in sources.items():
            conn.execute(text(
                "INSERT INTO backends (id, name, source, recipe, created_at) "
                "VALUES (:id, :name, :source, '{}', CURRENT_TIMESTAMP)"),
                {"id": i, "name": f"b{i}", "source": source})
            conn.execute(text(
                "INSERT INTO backend_changes (id, backend_id, changed_by, change, source_before, "
                "source_after, changed_at) VALUES (:id, :id, 't', 'registered', :source, :source, "
                "CURRENT_TIMESTAMP)"), {"id": i, "source": source})
    upgrade(engine)
    with engine.connect() as conn:
        stored = dict(conn.execute(text("SELECT id, source FROM backends")).all())
        changes = conn.execute(text("SELECT source_before, source_after FROM backend_changes")).all()
    engine.dispose()
    assert stored == {
        1: "https://github.com/acme/a.git", 2: "https://github.com/acme/b.git",
        3: "ssh://git@github.com/acme/c.git", 4: "git@github.com:acme/d.git",
        5: "/srv/backends/e",
    }
    assert not any("SECRET" in (value or "") for row in changes for value in row)
