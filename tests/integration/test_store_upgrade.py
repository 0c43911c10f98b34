"""A checkpoint store written before the store had schema versions, opened by this version, on SQLite and
PostgreSQL (a new schema per test): Alembic's baseline brings it to the head revision, every row reads back
as it was written, and the job goes on (its pending batch commits, a new one plans and commits).

The stores are SQL dumps in tests/store_fixtures/, made by `python -m tests.support.pre_alembic_store` with
the store of commit 61e529e, before the store became a package with migrations (its docstring says how):
two jobs' generations, checkpoints (V1 and V2, watermarks, state markers), committed, abandoned and pending
plans (side inputs), batch and rescale metrics (freshness), a lease and transactional ids. Older layouts,
which the store's opening used to bring up with `create_all` and hand-written ALTERs, are that dump with the
tables, columns and index removed that later versions added.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import MetaData, create_engine, inspect, select, text

from elasticity.checkpoint.store import CheckpointStore, Lease
from elasticity.checkpoint.store.store_schema import HEAD_REVISION, VERSION_TABLE, metadata, version
from tests.conftest import empty_database
from tests.support import pre_alembic_store as pre
from tests.support.pre_alembic_store import JOB, ORDERS, PRICES, V1_JOB, checkpoints, model, ranges

NOW = pre.START_MS + 600_000  # ten minutes after the dump's writes: the lease (an hour) still held


def load(url: str) -> None:
    """The dump of the URL's backend into its empty database (a SQLite file, a PostgreSQL schema)."""
    engine = create_engine(url)
    dump = (pre.SQLITE_DUMP if engine.dialect.name == "sqlite" else pre.POSTGRES_DUMP).read_text()
    if engine.dialect.name == "sqlite":
        raw = engine.raw_connection()
        try:
            raw.driver_connection.executescript(dump)
        finally:
            raw.close()
    else:
        with engine.begin() as conn:
            conn.exec_driver_sql(dump)
    engine.dispose()


def execute(url: str, *statements: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


def rows(url: str) -> dict[str, list[dict]]:
    """Every row of the store's tables, by table, in key order (the version table aside)."""
    engine = create_engine(url)
    reflected = MetaData()
    reflected.reflect(engine, only=[t for t in metadata.tables if inspect(engine).has_table(t)])
    with engine.connect() as conn:
        out = {
            name: [dict(r._mapping) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
            for name, t in reflected.tables.items()
        }
    engine.dispose()
    return out


def layout(url: str) -> dict[str, tuple]:
    """Each table's columns (name, type, nullable), primary key and indexes, as the database reports them."""
    engine = create_engine(url)
    i = inspect(engine)
    out = {
        t: (
            {(c["name"], str(c["type"]), c["nullable"]) for c in i.get_columns(t)},
            tuple(i.get_pk_constraint(t)["constrained_columns"]),
            {(ix["name"], tuple(ix["column_names"]), bool(ix["unique"])) for ix in i.get_indexes(t)},
        )
        for t in sorted(i.get_table_names())
    }
    engine.dispose()
    return out


ADDED_DEFAULTS = {"lease_epoch": 0}
"""Columns added with a server default: what existing rows hold (any other added column is NULL in them)."""


def assert_kept(written: dict[str, list[dict]], upgraded: dict[str, list[dict]]) -> None:
    """Each written row's columns as they were, the columns added since at their defaults; the tables added
    since empty."""
    for table, old_rows in written.items():
        assert [{c: r[c] for c in old} for r, old in zip(upgraded[table], old_rows, strict=True)] == old_rows
        for r, old in zip(upgraded[table], old_rows, strict=True):
            assert {c: v for c, v in r.items() if c not in old} == {c: ADDED_DEFAULTS.get(c) for c in r if c not in old}
    assert all(upgraded[t] == [] for t in upgraded.keys() - written.keys())


def stored_version(url: str) -> list[str]:
    engine = create_engine(url)
    with engine.connect() as conn:
        out = list(conn.execute(select(version.c.version_num)).scalars())
    engine.dispose()
    return out


def new_store_layout(store_url: str, tmp_path) -> dict[str, tuple]:
    """The layout of a store this version makes new, on the same backend."""
    with empty_database(store_url, tmp_path, "new") as url:
        CheckpointStore(url).close()
        return layout(url)


def test_a_store_written_before_schema_versions_reads_back_the_same_and_goes_on(empty_store_url, store_url, tmp_path):
    load(empty_store_url)
    written = rows(empty_store_url)
    assert len(written["elasticity_checkpoints"]) == 52 and VERSION_TABLE not in layout(empty_store_url)
    store = CheckpointStore(empty_store_url, history_size=10, clock=lambda: NOW)
    try:
        assert stored_version(empty_store_url) == [HEAD_REVISION]
        assert_kept(written, rows(empty_store_url))  # every row of every table, every column, as it was
        assert layout(empty_store_url) == new_store_layout(store_url, tmp_path)
        assert_reads_back(store, written)
        job_goes_on(store)
    finally:
        store.close()
    reopened = CheckpointStore(empty_store_url, clock=lambda: NOW)  # at the head now: opened as it is
    assert [p.batch_id for p in reopened.plans(JOB, status="committed")] == [1, 3, 4, 5]
    reopened.close()


def assert_reads_back(store: CheckpointStore, written: dict[str, list[dict]]) -> None:
    m2, m4 = model(JOB, ORDERS, 2), model(JOB, ORDERS, 4)
    generations = store.generations(JOB)
    assert [(g.number, g.factor, g.reason, g.origin, g.job_model) for g in generations] == [
        (1, 2, "first start", "start", m2),
        (2, 4, "rescale 2 -> 4", "manual", m4),
    ]
    assert store.generation(JOB) == generations[-1]
    expected = checkpoints(m4, 30, generation=2, batch=3)
    read = store.checkpoints(JOB, 2, (2, 1))
    assert read == expected and any(cp.watermarks for cp in read.values())
    assert {t: (cp.checkpoint_id, cp.state_markers) for t, cp in read.items()} == {
        t: (cp.checkpoint_id, cp.state_markers) for t, cp in expected.items()
    }
    assert store.checkpoints(JOB, 1, (1,)) == checkpoints(m2, 10, generation=1, batch=1)
    task = sorted(expected)[0]
    history = [cp.offsets for cp in store.checkpoint_history(JOB, task, 2)]
    assert history == [checkpoints(m4, n, generation=2, batch=0)[task].offsets for n in (30, 10)]
    assert [(p.batch_id, store.plan(JOB, p.batch_id)[1]) for p in store.plans(JOB)] == [
        (1, "committed"),
        (2, "abandoned"),
        (3, "committed"),
        (4, "planned"),
    ]
    first = store.plans(JOB)[0]
    assert (first.ranges, first.side_inputs) == (ranges(ORDERS, 0, 10), ((PRICES, 7),))
    assert store.pending_plan(JOB).ranges == ranges(ORDERS, 30, 45)
    assert store.batches_with_status(JOB, "abandoned") == [2]
    assert store.metrics(JOB) == [json.loads(pre.metrics(1, 20)), json.loads(pre.metrics(3, 40))]
    assert store.freshness(JOB, since_ms=0) == [(900, 120), (1800, 300)]
    assert [m["job-model-generation-ns"] for m in store.rescale_metrics(JOB)] == [120_000, 250_000]
    (job_row,) = (r for r in written["elasticity_jobs"] if r["job_name"] == JOB)
    assert store.lease(JOB) == Lease(JOB, "worker-1", job_row["lease_expires_ms"])
    assert store.open_transactional_ids(JOB) == [("orders-0-3", "kafka")]
    m1 = model(V1_JOB, pre.CLICKS, 1)
    assert store.checkpoints(V1_JOB, 1, (1,)) == checkpoints(m1, 4, generation=1, batch=1, stateful=False)
    assert store.checkpoints(V1_JOB, 1, (2,)) == {}  # V1 only: no CheckpointV2 rows
    assert store.freshness(V1_JOB, since_ms=0) == [] and len(store.metrics(V1_JOB)) == 1


def job_goes_on(store: CheckpointStore) -> None:
    """The running batch's pending plan commits under its lease, and the next batch plans and commits."""
    m4 = model(JOB, ORDERS, 4)
    store.commit_batch(store.pending_plan(JOB), checkpoints(m4, 45, generation=2, batch=4).values(), owner="worker-1")
    store.record_metrics(JOB, 4, 2, pre.metrics(4, 30), freshness={"oldest": 700, "newest": 90})
    plan = store.plan_batch(JOB, 2, ranges(ORDERS, 45, 50), owner="worker-1")
    assert plan.batch_id == 5
    store.commit_batch(plan, checkpoints(m4, 50, generation=2, batch=5).values(), owner="worker-1")
    assert store.checkpoints(JOB, 2, (2, 1)) == checkpoints(m4, 50, generation=2, batch=5)
    assert store.freshness(JOB, since_ms=0)[-1] == (700, 90)
    store.close_transactional_ids(JOB, ["orders-0-3"])
    assert store.release_lease(JOB, "worker-1") and store.lease(JOB) is None


OLDER_LAYOUTS = {
    # the first store: no metrics, no transactional ids, generations without origin, plans without side inputs
    "first": (
        "DROP TABLE elasticity_batch_metrics",
        "DROP TABLE elasticity_rescale_metrics",
        "DROP TABLE elasticity_transactions",
        "ALTER TABLE elasticity_generations DROP COLUMN origin",
        "ALTER TABLE elasticity_batches DROP COLUMN side_inputs",
    ),
    # the last before freshness: batch metrics without its two columns and its index
    "before_freshness": (
        "DROP INDEX ix_elasticity_batch_metrics_created",
        "ALTER TABLE elasticity_batch_metrics DROP COLUMN freshness_oldest_ms",
        "ALTER TABLE elasticity_batch_metrics DROP COLUMN freshness_newest_ms",
    ),
}


@pytest.mark.parametrize("older", sorted(OLDER_LAYOUTS))
def test_an_older_layout_gains_what_later_versions_added_and_keeps_its_rows(empty_store_url, store_url, tmp_path, older):
    load(empty_store_url)
    execute(empty_store_url, *OLDER_LAYOUTS[older])
    written = rows(empty_store_url)
    store = CheckpointStore(empty_store_url, clock=lambda: NOW)
    try:
        assert stored_version(empty_store_url) == [HEAD_REVISION]
        assert_kept(written, rows(empty_store_url))
        assert layout(empty_store_url) == new_store_layout(store_url, tmp_path)
        if older == "first":
            assert [g.origin for g in store.generations(JOB)] == ["manual", "manual"]  # no origin: a person's
            assert store.plans(JOB)[0].side_inputs == ()
            assert store.metrics(JOB) == [] and store.open_transactional_ids(JOB) == []
        else:
            assert store.freshness(JOB, since_ms=0) == [] and len(store.metrics(JOB)) == 2
        job_goes_on(store)
    finally:
        store.close()
