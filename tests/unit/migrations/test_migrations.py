from __future__ import annotations

from sqlalchemy import inspect

from service.db import make_engine
from service.migrate import downgrade, upgrade
from service.models import Base


def test_upgrade_downgrade_upgrade_matches_models(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    upgrade(engine)
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade(engine)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_models_and_migrations_agree(empty_db_url: str) -> None:
    """A model change without a migration fails here (autogenerate finds a diff)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = make_engine(empty_db_url)
    upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    # Column changes come as lists of ("modify_*", ...) tuples. UTCDateTime is a
    # TypeDecorator over DateTime(timezone=True): its type "change" is not a real difference.
    flat = [op for d in diff for op in (d if isinstance(d, list) else [d])]
    real = [op for op in flat if op[0] != "modify_type"]
    assert real == []


def test_0014_makes_passed_runs_compatible_and_never_shows_a_rule_category_as_triage(
    empty_db_url: str,
) -> None:
    from sqlalchemy import text

    engine = make_engine(empty_db_url)
    upgrade(engine, "0013")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO backends (id, name, source, recipe, created_at) "
            "VALUES (1, 'b', '/src/b', '{}', CURRENT_TIMESTAMP)"))
        for run_id, state, verdict, reason in ((1, "passed", None, None),
                                               (2, "passed", "flake", "1 failure (1 flake)"),
                                               (3, "failed", "upstream", "new")):
            conn.execute(text(
                "INSERT INTO runs (id, backend_id, torch_spec, state, trigger, trigger_info, "
                "created_at, attempts, verdict, verdict_reason) VALUES (:id, 1, 'nightly', "
                ":state, 'cli', '{}', CURRENT_TIMESTAMP, 1, :verdict, :reason)"),
                {"id": run_id, "state": state, "verdict": verdict, "reason": reason})
        conn.execute(text(
            "INSERT INTO failures (id, run_id, step_name, stage, line, captures, category, "
            "finding) VALUES (1, 3, 'build', 'build', 'x', '{}', 'backend', '{}')"))
    upgrade(engine)
    with engine.connect() as conn:
        runs = conn.execute(text(
            "SELECT id, verdict, verdict_reason FROM runs ORDER BY id")).all()
        failure = conn.execute(text(
            "SELECT triage, triage_reason, category, needs_isolation FROM failures")).one()
    engine.dispose()
    assert [tuple(r) for r in runs] == [
        (1, "compatible", "passed"), (2, "compatible", "passed; 1 failure (1 flake)"),
        (3, "upstream", "new")]
    assert tuple(failure) == ("unknown", "not triaged when stored; the rule suggests backend",
                              "backend", False)


def test_0015_rekeys_node_ids_and_adds_no_consequences_to_stored_failures(empty_db_url: str) -> None:
    import json

    from sqlalchemy import text

    engine = make_engine(empty_db_url)
    upgrade(engine, "0015-1")  # the revision before it, whichever that is
    old = ".ootci/cache/sources/pyonly/nogit-0123abcd/tests/test_x.py::test_y[a/b]"
    git = "/w/cache/sources/vendor/0123456789abcdef01234567-89abcdef/tests/test_z.py::test_z"
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO backends (id, name, source, recipe, created_at) "
            "VALUES (1, 'b', '/src/b', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(text(
            "INSERT INTO runs (id, backend_id, torch_spec, state, trigger, trigger_info, "
            "created_at, attempts) VALUES (1, 1, 'nightly', 'failed', 'cli', '{}', "
            "CURRENT_TIMESTAMP, 1)"))
        for i, nodeid in enumerate((old, git, "tests/sources/x/test_keep.py::test_keep"), 1):
            conn.execute(text(
                "INSERT INTO test_results (id, run_id, nodeid, suite, outcome) "
                "VALUES (:id, 1, :nodeid, 's', 'failed')"), {"id": i, "nodeid": nodeid})
            conn.execute(text(
                "INSERT INTO failures (id, run_id, step_name, stage, nodeid, line, captures, "
                "finding) VALUES (:id, 1, 'test', 'test', :nodeid, 'x', '{}', '{}')"),
                {"id": i, "nodeid": nodeid})
    upgrade(engine)
    with engine.connect() as conn:
        results = conn.execute(text("SELECT nodeid FROM test_results ORDER BY id")).scalars().all()
        failures = conn.execute(text("SELECT nodeid FROM failures ORDER BY id")).scalars().all()
        folded = conn.execute(text("SELECT consequences FROM failures")).scalars().all()
    engine.dispose()
    expected = ["tests/test_x.py::test_y[a/b]", "tests/test_z.py::test_z",
                "tests/sources/x/test_keep.py::test_keep"]
    assert results == failures == expected
    # Stored failures folded nothing (SQLite hands the JSON back as text).
    assert [json.loads(c) if isinstance(c, str) else c for c in folded] == [[], [], []]
