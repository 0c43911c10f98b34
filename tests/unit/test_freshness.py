"""A batch's freshness: each process slot's lowest and highest record timestamp, the batch's at the driver, their
age at the commit, its StatsD gauges, and the percentiles of the last hour from the store."""

import sqlite3
from collections import Counter

import pyarrow as pa

from elasticity.batch.container.processing import run_slots
from elasticity.batch.container.reader import ROUTED_SCHEMA, ReadCounts
from elasticity.batch.coordinator.outcome import TaskSummary
from elasticity.checkpoint.store import CheckpointStore
from elasticity.metrics.freshness import HOUR_MS, batch_span, percentile, window
from elasticity.metrics.job_metrics import batch_metrics
from elasticity.metrics.summary import BatchSummary
from elasticity.views.jobview import last_hour_freshness
from tests.unit.test_processing import ctx


def routed(task: str, records: list[tuple[int, int]]) -> pa.Table:
    """records: (offset, Kafka timestamp) of one virtual task's bucket 0 on orders-0."""
    cols: dict[str, list] = {f.name: [] for f in ROUTED_SCHEMA}
    for offset, ts in records:
        row = ["kafka", "orders", 0, offset, b"k", b'{"n": %d}' % offset, ts, 0, task]
        for name, v in zip(ROUTED_SCHEMA.names, row, strict=True):
            cols[name].append(v)
    return pa.Table.from_pydict(cols, schema=ROUTED_SCHEMA)


class Reads:
    """Each slot's routed records, as `SlotReads.read` hands them to the process stage (read from memory, not Kafka)."""

    def __init__(self, tables: dict[int, pa.Table]) -> None:
        self.tables = tables

    def read(self, slot: int) -> tuple[pa.Table, ReadCounts]:
        table = self.tables[slot]
        return table, ReadCounts(read=Counter(table.column("task_name").to_pylist()))


def summary_rows(tmp_path, tables: dict[int, pa.Table]) -> list[TaskSummary]:
    slots = pa.RecordBatch.from_pydict({"slot": list(tables)})
    out = list(run_slots(ctx(tmp_path), Reads(tables), iter([slots])))  # type: ignore[arg-type]
    return TaskSummary.of(pa.Table.from_batches(out)) if out else []


def summary(rows: list[TaskSummary], batch_id: int = 1) -> BatchSummary:
    s = BatchSummary(job="fresh", batch_id=batch_id, generation=1, factor=2)
    s.oldest_timestamp_ms, s.newest_timestamp_ms = batch_span((r.oldest_timestamp, r.newest_timestamp) for r in rows)
    return s


def test_a_batchs_freshness_is_its_commit_time_minus_its_oldest_and_newest_records_timestamps(tmp_path):
    rows = summary_rows(
        tmp_path,
        {
            0: pa.concat_tables(
                [routed("Partition_0-0-2", [(0, 10_500), (1, 12_000)]), routed("Partition_0-1-2", [(2, 11_000)])]
            ),
            1: routed("Partition_1-0-2", [(0, 9_000), (1, -1), (2, 13_250)]),  # -1: a record without a timestamp
        },
    )
    assert len(rows) == 3
    # per slot, one aggregate on its first row: nothing per record leaves the worker
    assert sorted((r.oldest_timestamp, r.newest_timestamp) for r in rows if r.oldest_timestamp is not None) == [
        (9_000, 13_250),
        (10_500, 12_000),
    ]
    s = summary(rows)
    assert (s.oldest_timestamp_ms, s.newest_timestamp_ms) == (9_000, 13_250)
    s.commit_at(20_000)
    assert s.committed_ms == 20_000 and s.freshness_ms == {"oldest": 11_000, "newest": 6_750}
    gauges = {m.name: (m.value, m.kind) for m in batch_metrics(s)}
    late = summary(rows)
    late.commit_at(12_000)  # a producer's clock ahead of the driver's: recorded as measured
    assert late.freshness_ms == {"oldest": 3_000, "newest": -1_250}
    assert gauges["fresh.batch-freshness-oldest-ms"] == (11_000, "g")
    assert gauges["fresh.batch-freshness-newest-ms"] == (6_750, "g")


def test_a_batch_without_records_has_no_freshness_and_no_gauge(tmp_path):
    rows = summary_rows(tmp_path, {0: routed("Partition_0-0-2", []), 1: routed("Partition_1-0-2", [(0, -1)])})
    s = summary(rows)
    s.commit_at(20_000)
    assert s.committed_ms == 20_000 and s.freshness_ms is None
    assert not [m for m in batch_metrics(s) if "freshness" in m.name]
    store = CheckpointStore(f"sqlite:///{tmp_path / 'cp.db'}", clock=lambda: 20_000)
    store.record_metrics("fresh", 1, 1, s.to_json(), freshness=s.freshness_ms)
    assert store.metrics("fresh")[0]["freshness_ms"] is None
    assert store.freshness("fresh", since_ms=0) == [] and last_hour_freshness(store, "fresh", 20_000) is None


def test_percentiles_are_nearest_rank():
    values = list(range(100, 0, -1))  # 1..100, unordered
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50, 99, 100)
    assert percentile([7], 99) == 7 and percentile([1, 2], 50) == 1


def test_the_last_hours_percentiles_leave_older_batches_out(tmp_path):
    now = 10 * HOUR_MS
    clock = [0]
    store = CheckpointStore(f"sqlite:///{tmp_path / 'cp.db'}", clock=lambda: clock[0])
    batch = 0
    for at, oldest in [(now - HOUR_MS - 1, 999_999), (now - 2 * HOUR_MS, 888_888)]:  # committed over an hour ago
        batch += 1
        clock[0] = at
        store.record_metrics("fresh", batch, 1, "{}", freshness={"oldest": oldest, "newest": oldest})
    for i in range(1, 101):  # within the hour: oldest i s, newest i ms
        batch += 1
        clock[0] = now - HOUR_MS + 36_000 * i - 1
        store.record_metrics("fresh", batch, 1, "{}", freshness={"oldest": 1000 * i, "newest": i})
    batch += 1
    store.record_metrics("fresh", batch, 1, "{}")  # no timestamped record
    last_hour = last_hour_freshness(store, "fresh", now)
    assert last_hour is not None
    assert (last_hour.batches, last_hour.oldest_p50, last_hour.oldest_p99) == (100, 50_000, 99_000)
    assert (last_hour.newest_p50, last_hour.newest_p99) == (50, 99)
    assert window([]) is None


def test_a_store_of_an_earlier_version_gets_the_freshness_columns(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the batch metrics table as earlier versions made it
        db.execute(
            "CREATE TABLE elasticity_batch_metrics (job_name VARCHAR(255) NOT NULL, batch_id BIGINT NOT NULL, "
            "generation INTEGER NOT NULL, created_ms BIGINT NOT NULL, metrics TEXT NOT NULL, PRIMARY KEY (job_name, batch_id))"
        )
        db.execute("INSERT INTO elasticity_batch_metrics VALUES ('fresh', 1, 1, 5, '{\"batch_id\": 1}')")
    store = CheckpointStore(f"sqlite:///{path}", clock=lambda: 7)
    store.record_metrics("fresh", 2, 1, '{"batch_id": 2}', freshness={"oldest": 40, "newest": 30})
    assert store.freshness("fresh", since_ms=0) == [(40, 30)]
    assert [m["batch_id"] for m in store.metrics("fresh")] == [1, 2]
