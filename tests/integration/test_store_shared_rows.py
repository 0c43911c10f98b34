"""What one process writes and another reads back, in the store on SQLite and PostgreSQL: the data-quality edge
(replaced whole, whole or not there), the run index (pages newest first, retention as the report's), task
attempts' failures and engines' health (expired like metrics)."""

import threading

import pandas as pd
import pytest

from elasticity.checkpoint.store import CheckpointStore, QualityEdge, QualityRun
from elasticity.quality import cursor
from elasticity.quality.checks import Done

DAY = 86_400_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000 * DAY

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(store_url, clock):
    s = CheckpointStore(store_url, clock=clock)
    yield s
    s.close()


def run(n: int, success: bool = True, report: str | None = None) -> QualityRun:
    return QualityRun(
        seq=0,
        run=f"run{n:04d}",
        report=report or f"s3://state/j/reports/runs/run{n:04d}",
        window='"batches"',
        success=success,
        checks="[]",
        finished_ms=n,
    )


def test_the_edge_is_replaced_whole_and_read_by_another_opener(store, job_name):
    assert store.quality_edge(job_name) is None and store.validated_batch(job_name) == 0
    blob = bytes(range(256)) * 4_000  # a Parquet table of ~1 MB, bytes as they are
    store.save_quality_edge(job_name, QualityEdge(last_batch=7, edge='{"factor": 2}', positions=blob))
    store.save_quality_edge(job_name, QualityEdge(last_batch=9, edge='{"factor": 4}', positions=b"p", kafka_positions=b"k"))
    other = CheckpointStore(store.url)
    try:
        edge = other.quality_edge(job_name)
        assert edge is not None and (edge.last_batch, edge.edge, edge.positions, edge.state, edge.kafka_positions) == (
            9,
            '{"factor": 4}',
            b"p",
            None,
            b"k",
        )
        assert other.validated_batch(job_name) == 9 and other.validated_batch(job_name + "-other") == 0
    finally:
        other.close()


def test_readers_see_one_edge_or_the_other_never_a_mix(store, job_name):
    """Each save replaces the row in one transaction: a reader racing the writer sees the batch and its tables
    of the same save."""
    stop, seen, torn = threading.Event(), set(), []

    def read():
        while not stop.is_set():
            e = store.quality_edge(job_name)
            if e is not None:
                seen.add(e.last_batch)
                if e.positions != str(e.last_batch).encode() or e.edge != str(e.last_batch):
                    torn.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 40):
            store.save_quality_edge(job_name, QualityEdge(last_batch=n, edge=str(n), positions=str(n).encode()))
    finally:
        stop.set()
        reader.join()
    assert torn == [] and len(seen) > 1


def test_the_cursor_round_trips_through_the_store(store, job_name):
    """What quality/cursor.py keeps: the factor, checkpoints and Kafka edges, each key's position and the
    expected stores, read back by another opener as they were saved."""
    from elasticity.api.descriptors import StoreDescriptor

    stores = {"totals": StoreDescriptor("totals")}
    positions = pd.DataFrame([["kafka", "orders", 0, b"k1", 5, "Partition 0", 1]], columns=cursor.POSITION_COLUMNS).astype(
        {"partition": "int64", "offset": "int64", "generation": "int64"}
    )
    edge = cursor.Cursor(
        last_batch=12,
        done=Done(3, {}),
        positions=positions,
        state={"totals": {"user-1": {"n": 2}, "user-2": {"n": 5}}},
        kafka_positions=None,
        kafka_edges={"out": {0: 10, 1: 4}},
    )
    cursor.save(store, job_name, edge, stores)
    back = cursor.load(CheckpointStore(store.url), job_name, stores)
    assert back is not None and back.last_batch == 12 and back.done.factor == 3 and back.kafka_edges == {"out": {0: 10, 1: 4}}
    assert back.state == {"totals": {"user-1": {"n": 2}, "user-2": {"n": 5}}} and back.kafka_positions is None
    pd.testing.assert_frame_equal(back.positions, positions)
    assert cursor.validated_batch(store, job_name) == 12


def test_the_run_index_pages_newest_first_and_expires_as_the_reports_retention(store, job_name):
    for n in range(1, 21):
        store.record_quality_run(job_name, run(n, success=n not in {3, 5, 9, 14}))
    seq = store.record_quality_run(job_name, run(20))  # a retry of the last run: its row replaced
    assert seq == 21 and [r.seq for r in store.quality_runs(job_name, limit=3)] == [21, 19, 18]
    assert [r.run for r in store.quality_runs(job_name, limit=2, before=18)] == ["run0017", "run0016"]
    assert store.quality_run(job_name, "run0017").seq == 17 and store.quality_run(job_name, "run00_7") is None
    uri = "s3://state/j/reports/runs/with_query?endpoint_override=127.0.0.1:1&scheme=http"  # the server's options
    seq = store.record_quality_run(job_name, run(30, report=uri))
    assert store.quality_run(job_name, "with_query").report == uri and store.quality_run(job_name, "with") is None
    store.remove_quality_runs(job_name, [seq])
    gone = store.expired_quality_runs(job_name, keep=5, keep_failed=2)
    assert [r.run for r in gone] == [f"run{n:04d}" for n in range(1, 16) if n not in {9, 14}]
    assert store.remove_quality_runs(job_name, [r.seq for r in gone]) == 13
    assert [r.run for r in store.quality_runs(job_name, limit=100)] == [f"run{n:04d}" for n in (20, 19, 18, 17, 16, 14, 9)]
    assert store.expired_quality_runs(job_name, keep=5, keep_failed=2) == []
    assert store.expired_quality_runs(job_name + "-none", keep=5, keep_failed=2) == []


def test_failures_and_engine_health_are_read_back_and_expire_like_metrics(store, job_name, clock):
    address = f"sc://{job_name}:15002"  # engines are no job's: an address of the test's own
    store.record_failure(job_name, run_id="r1", attempt=1, task="run_batches", error="driver gone")
    clock.now += 1
    store.record_failure(job_name, run_id="r1", attempt=2, task="run_batches", error="still gone")
    store.record_failure(job_name, run_id="r1", attempt=2, task="run_batches", error="again")  # replaced
    other = CheckpointStore(store.url, clock=clock)
    try:
        failure = other.last_failure(job_name, "r1", "run_batches")
        assert failure is not None and (failure.attempt, failure.error) == (2, "again")
        assert other.last_failure(job_name, "r2") is None and other.last_failure(job_name, "r1", "quality") is None

        first = other.engine_probed(address, reachable=False)
        clock.now += DAY
        assert store.engine_probed(address, reachable=False).since_ms == first.since_ms  # still down: since the first probe
        clock.now += DAY
        up = store.engine_probed(address, reachable=True)
        assert up.since_ms == clock.now and up.reachable
    finally:
        other.close()

    clock.now += 10 * DAY
    assert store.expire_failures(job_name, before_ms=clock.now - 7 * DAY) == 2
    assert store.last_failure(job_name, "r1") is None
    assert store.expire_engine_health(before_ms=clock.now - 7 * DAY) >= 1
    assert store.engine_probed(address, reachable=True).since_ms == clock.now  # a fresh row


def test_a_run_seq_race_between_two_writers_keeps_both(store, job_name):
    errors = []

    def write(k: int) -> None:
        try:
            for n in range(10):
                store.record_quality_run(job_name, run(100 * k + n, report=f"/r/{k}/runs/x{n}"))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=write, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(store.quality_runs(job_name, limit=100)) == 20
    assert {r.seq for r in store.quality_runs(job_name, limit=100)} == set(range(1, 21))


def test_task_names_are_not_needed_for_an_empty_edge(store, job_name):
    """An edge saved before any checkpoint (a first window without batches) loads back empty."""
    edge = cursor.start()
    cursor.save(store, job_name, edge, {})
    back = cursor.load(store, job_name, {})
    assert back is not None and back.last_batch == 0 and back.done.checkpoints == {} and len(back.positions) == 0
