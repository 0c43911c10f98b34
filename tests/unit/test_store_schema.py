"""The checkpoint store's schema and its Alembic revisions (on SQLite files): the revisions build exactly the
tables a new store is made with, the schema module names the scripts' head, an up-to-date store opens
without Alembic, and a store a newer version upgraded is refused. A store written before versions, and its
older layouts, are opened in tests/integration/test_store_upgrade.py (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from elasticity.batch.sinks.outputs import AuditStatus
from elasticity.checkpoint.batch_plan import BatchStatus
from elasticity.checkpoint.store import CheckpointStore, StoreError, make_engine
from elasticity.checkpoint.store.schema_upgrade import alembic_config
from elasticity.checkpoint.store.store_schema import HEAD_REVISION, VERSION_TABLE, metadata
from elasticity.checkpoint.store.transactional_ids import TransactionalIdState
from tests.conftest import REPO


def sqlite_schema(path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
    finally:
        conn.close()


def migrate(url: str, revision: str = HEAD_REVISION, *, down: bool = False) -> None:
    """Alembic's command on the store, as `schema_upgrade` runs it (its connection handed to env.py)."""
    engine = make_engine(url)
    with engine.connect() as conn:
        (command.downgrade if down else command.upgrade)(alembic_config(conn), revision)
        conn.commit()
    engine.dispose()


def test_the_schema_module_names_the_scripts_head():
    assert ScriptDirectory.from_config(alembic_config()).get_heads() == [HEAD_REVISION]


def reflected(url: str) -> dict[str, object]:
    """Each table's columns (name, type, nullability, default), primary key and indexes, as the database has them."""
    engine = make_engine(url)
    inspector = inspect(engine)
    tables: dict[str, object] = {}
    for name in inspector.get_table_names():
        columns = [(c["name"], str(c["type"]), c["nullable"], c["default"]) for c in inspector.get_columns(name)]
        indexes = sorted((i["name"], tuple(i["column_names"])) for i in inspector.get_indexes(name))
        tables[name] = (sorted(columns), inspector.get_pk_constraint(name)["constrained_columns"], indexes)
    engine.dispose()
    return tables


def test_the_revisions_build_the_tables_a_new_store_is_made_with(tmp_path):
    """A new store is made from `store_schema` and stamped, without Alembic (half a second to import); the
    revisions from nothing must build the same tables: each column's type, nullability and default, each key
    and index (SQLite keeps an added column's text as ALTER wrote it, so the SQL itself may differ)."""
    migrated_url, new_url = f"sqlite:///{tmp_path / 'migrated.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    migrate(migrated_url)
    CheckpointStore(new_url).close()
    new = sqlite_schema(tmp_path / "new.db")
    assert set(new) == {*metadata.tables, *(i.name for t in metadata.tables.values() for i in t.indexes), VERSION_TABLE}
    assert set(sqlite_schema(tmp_path / "migrated.db")) == set(new)
    assert reflected(migrated_url) == reflected(new_url)
    engine = make_engine(migrated_url)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), metadata) == []
        assert conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalars().all() == [HEAD_REVISION]
    engine.dispose()


def test_a_store_taken_back_to_no_version_is_brought_up_again_with_its_rows(tmp_path):
    """Alembic's downgrade to base leaves the store as the code before versions reads it: tables and rows kept."""
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    store = CheckpointStore(url)
    store.acquire_lease("job", "me", 60_000)
    store.close()
    migrate(url, "base", down=True)
    assert sqlite3.connect(tmp_path / "checkpoints.db").execute(f"SELECT count(*) FROM {VERSION_TABLE}").fetchone() == (0,)
    store = CheckpointStore(url)
    assert store.lease("job").owner == "me"
    store.close()
    assert sqlite3.connect(tmp_path / "checkpoints.db").execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall() == [
        (HEAD_REVISION,)
    ]


def test_a_store_at_0003_gains_the_decision_column_and_keeps_its_generations(tmp_path):
    """Revision 0004 adds the autosizer's decision to the generations: rows written before read back with none,
    and a new generation keeps its decision."""
    from elasticity.jobmodel.model import JobModel

    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    model = JobModel(config=(), containers=())
    store = CheckpointStore(url)
    store.acquire_lease("job", "me", 600_000)
    store.write_generation("job", 0, 2, model=model, compute=lambda _: {}, owner="me", reason="first", origin="start")
    store.close()
    migrate(url, "0003", down=True)
    conn = sqlite3.connect(tmp_path / "checkpoints.db")
    assert "decision" not in {r[1] for r in conn.execute("PRAGMA table_info(elasticity_generations)")}
    conn.close()
    store = CheckpointStore(url)
    try:
        old = store.generation("job")
        assert (old.number, old.factor, old.reason, old.origin, old.decision) == (1, 2, "first", "start", None)
        new = store.write_generation(
            "job", 1, 4, model=model, compute=lambda _: {}, owner="me", reason="up", origin="autosize", decision='{"factor":4}'
        )
        assert store.generation("job") == new and new.decision == '{"factor":4}'
    finally:
        store.close()


def test_a_rescale_asks_for_the_lease_and_the_request_lapses(tmp_path):
    """A rescale waiting for the lease notes it on the job's row; a run of batches sees it for a while."""
    now = [1_000_000]
    store = CheckpointStore(f"sqlite:///{tmp_path / 'checkpoints.db'}", clock=lambda: now[0])
    try:
        store.acquire_lease("job", "run", 600_000)  # the job's row
        assert not store.lease_wanted("job", 15_000)
        store.want_lease("job")
        now[0] += 14_999
        assert store.lease_wanted("job", 15_000) and not store.lease_wanted("other", 15_000)
        now[0] += 1
        assert not store.lease_wanted("job", 15_000)
    finally:
        store.close()


def test_a_store_a_newer_version_upgraded_is_refused_and_left_as_it_is(tmp_path):
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    CheckpointStore(url).close()
    conn = sqlite3.connect(tmp_path / "checkpoints.db")
    with conn:
        conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = 'f00d'")
    before = sqlite_schema(tmp_path / "checkpoints.db")
    with pytest.raises(
        StoreError,
        match=f"has schema revision 'f00d', which this version of elasticity does not know \\(its newest is '{HEAD_REVISION}'\\)",
    ):
        CheckpointStore(url)
    assert sqlite_schema(tmp_path / "checkpoints.db") == before
    assert conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall() == [("f00d",)]
    conn.close()


def test_opening_a_store_imports_no_alembic_unless_it_has_to_upgrade(tmp_path):
    """Alembic takes half a second to import: a new store and an up-to-date one open without it."""
    code = (
        "import sys\n"
        "from elasticity.checkpoint.store import CheckpointStore\n"
        "CheckpointStore(sys.argv[1]).close()\n"
        "print('alembic' in sys.modules)\n"
    )
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    for _ in ("new", "up to date"):
        out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, check=True, cwd=REPO)
        assert out.stdout.strip() == "False"


def test_the_status_enums_store_the_text_rows_and_files_already_hold():
    """Statuses are enums in the code and the same text in the store and the audit files: no row is rewritten."""
    assert [s.value for s in BatchStatus] == ["planned", "committed", "abandoned"]
    assert [s.value for s in TransactionalIdState] == ["open", "closed"]
    assert [s.value for s in AuditStatus] == ["processed", "dead_letter"]
    assert json.dumps({"status": BatchStatus.PLANNED}) == '{"status": "planned"}'
