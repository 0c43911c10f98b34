"""The process stage without Spark: slices in, sinks and summaries out."""

import dataclasses
import json
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticity.batch.container.process_context import ProcessContext
from elasticity.batch.container.processing import process_slot
from elasticity.batch.container.reader import ROUTED_SCHEMA as ROUTED
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.serializers import RecordSerdeError, deserialize, serialize


def ctx(tmp_path, policy="dlq", batch_id=7):
    return ProcessContext(
        job_name="j",
        batch_id=batch_id,
        app_class="tests.unit.test_processing:double_app",
        job_inputs=(SystemStream("kafka", "orders"),),
        key_serdes={"kafka": "string"},
        msg_serdes={"kafka": "json"},
        output_path=str(tmp_path / "out"),
        audit_path=str(tmp_path / "audit"),
        dead_letter_path=str(tmp_path / "dlq"),
        output_bootstraps={},
        policy=policy,
    )


def double_app(app):
    app.input("kafka.orders").map(lambda m: m.value["n"] * 2).send_to("parquet.doubled")


def rows(*records):
    """records: (task, bucket, offset, value bytes)"""
    cols = {f.name: [] for f in ROUTED}
    for task, bucket, offset, value in records:
        for name, v in zip(ROUTED.names, ["kafka", "orders", 0, offset, b"k%d" % bucket, value, 0, bucket, task], strict=True):
            cols[name].append(v)
    return pa.Table.from_pydict(cols, schema=ROUTED)


def test_slices_run_in_offset_order_with_sinks_audit_and_dead_letters(tmp_path):
    batch = rows(
        ("Partition_0-1-2", 1, 5, b'{"n": 5}'),
        ("Partition_0-0-2", 0, 3, b'{"n": 3}'),
        ("Partition_0-1-2", 1, 1, b'{"n": 1}'),
        ("Partition_0-0-2", 0, 4, b"not json"),
        ("Partition_0-1-2", 1, 2, b'{"x": 1}'),  # the app fails on it: KeyError
    )
    by_task = {r["task_name"]: r for r in process_slot(ctx(tmp_path), 0, batch)}
    assert by_task["Partition_0-1-2"]["processed"] == 2 and by_task["Partition_0-1-2"]["dead_lettered"] == 1
    assert by_task["Partition_0-0-2"]["processed"] == 1 and by_task["Partition_0-0-2"]["dead_lettered"] == 1
    assert all(r["error"] is None and r["stopped"] is None for r in by_task.values())

    out = read_table(str(tmp_path / "out" / "doubled"), OUTPUT_SCHEMA).to_pylist()
    vtask1 = [json.loads(r["value"]) for r in sorted(out, key=lambda r: r["seq"]) if r["task_name"] == "Partition_0-1-2"]
    assert vtask1 == [2, 10]  # offsets 1 then 5: offset order, not arrival order
    audit = read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).to_pylist()
    assert sorted((r["task_name"], r["seq"], r["offset"], r["status"]) for r in audit) == [
        ("Partition_0-0-2", 0, 3, "processed"),
        ("Partition_0-0-2", 1, 4, "dead_letter"),
        ("Partition_0-1-2", 0, 1, "processed"),
        ("Partition_0-1-2", 1, 2, "dead_letter"),
        ("Partition_0-1-2", 2, 5, "processed"),
    ]
    dead = {r["offset"]: r["error"] for r in read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).to_pylist()}
    assert "value is not valid json" in dead[4] and "KeyError" in dead[2]


def test_fail_policy_reports_where_each_task_stopped(tmp_path):
    batch = rows(
        ("Partition_0-1-2", 1, 1, b'{"n": 1}'), ("Partition_0-1-2", 1, 2, b'{"x": 1}'), ("Partition_0-1-2", 1, 3, b'{"n": 3}')
    )
    (row,) = process_slot(ctx(tmp_path, policy="fail"), 0, batch)
    assert row["processed"] == 1 and "stopped at orders-0@2" in row["error"]
    assert json.loads(row["stopped"]) == {ssp_to_key(SystemStreamPartition("kafka", "orders", 0, 1)): 2}
    assert [r["offset"] for r in read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).to_pylist()] == [1]


def test_a_sink_file_that_cannot_be_read_fails_the_read_naming_it(tmp_path):
    process_slot(ctx(tmp_path), 0, rows(("Partition_0-0-2", 0, 1, b'{"n": 1}'), ("Partition_0-1-2", 1, 2, b'{"n": 2}')))
    root = tmp_path / "out" / "doubled"
    damaged = root / "batch-000000000007-slot-0.parquet"
    damaged.write_bytes(damaged.read_bytes()[:20])  # not a row fewer: the reader (data quality, the tests) must know
    for batches in (None, [7]):
        with pytest.raises(pa.ArrowInvalid, match="batch-000000000007-slot-0.parquet"):
            read_table(str(root), OUTPUT_SCHEMA, batches)


def test_a_retried_batch_overwrites_its_own_files(tmp_path):
    batch = rows(("Partition_0-0-2", 0, 1, b'{"n": 1}'))
    process_slot(ctx(tmp_path), 0, batch)
    process_slot(ctx(tmp_path), 0, batch)
    assert read_table(str(tmp_path / "out" / "doubled"), OUTPUT_SCHEMA).num_rows == 1


def test_a_slot_writes_one_file_per_sink_read_as_one_dataset_by_pyarrow_and_pandas(tmp_path):
    import pandas as pd
    import pyarrow.parquet as pq

    many = [(f"Partition_0-{b}-64", b, b, b'{"n": %d}' % b) for b in range(0, 64, 4)] + [("Partition_0-4-64", 4, 99, b"bad")]
    for batch_id in (7, 8):
        process_slot(ctx(tmp_path, batch_id=batch_id), 3, rows(*many))
    for sink, n in (("out/doubled", 16), ("audit", 17), ("dlq", 1)):
        root = tmp_path / sink
        assert sorted(f.relative_to(root).as_posix() for f in root.rglob("*.parquet")) == [
            "batch-000000000007-slot-3.parquet",
            "batch-000000000008-slot-3.parquet",
        ]  # not a file per virtual task (16 of them)
        for read in (pq.read_table(root).to_pylist(), pd.read_parquet(root).to_dict("records")):
            assert len(read) == 2 * n and {r["batch_id"] for r in read} == {7, 8}
            assert len({r["task_name"] for r in read}) == min(n, 16)  # the virtual task, a column


def test_folders_earlier_versions_wrote_are_read_and_deleted_as_before(tmp_path):
    """Hive folders (`batch_id=<n>/`): of a file per (batch, slot), `batch_id` from the folder only, and earlier of a
    file per virtual task, `batch_id` in the file as well."""
    import pyarrow.parquet as pq

    from elasticity.batch.sinks.outputs import delete_batches

    process_slot(ctx(tmp_path, batch_id=7), 0, rows(("Partition_0-0-2", 0, 1, b'{"n": 1}')))
    new = read_table(str(tmp_path / "audit"), AUDIT_SCHEMA)
    old = tmp_path / "audit" / "batch_id=3"  # a file per virtual task, batch_id a column as well as the folder
    old.mkdir()
    pq.write_table(new.set_column(6, "batch_id", pa.array([3], pa.int64())), old / "Partition_0-0-2-0a1b2c3d.parquet")
    older = tmp_path / "audit" / "batch_id=5"  # a file per (batch, slot)
    older.mkdir()
    pq.write_table(new.drop_columns(["batch_id"]), older / "slot-0.parquet")
    assert sorted(r["batch_id"] for r in read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).to_pylist()) == [3, 5, 7]
    assert [r["batch_id"] for r in read_table(str(tmp_path / "audit"), AUDIT_SCHEMA, [3, 7]).to_pylist()] == [3, 7]
    delete_batches(str(tmp_path / "audit"), [3, 5, 7])
    assert not list((tmp_path / "audit").iterdir())
    assert read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).num_rows == 0


def test_a_retry_on_fewer_slots_leaves_only_its_own_files(tmp_path):
    """A retried batch may be placed on other slots (the process count changed): the engine empties the batch's
    files first, so no file of the first attempt stays beside the retry's."""
    from elasticity.batch.sinks.outputs import delete_batches

    first = [rows(("Partition_0-0-2", 0, 1, b'{"n": 1}')), rows(("Partition_0-1-2", 1, 2, b'{"n": 2}'))]
    for slot, part in enumerate(first):
        process_slot(ctx(tmp_path), slot, part)
    for root in ("audit", "out/doubled"):
        delete_batches(str(tmp_path / root), [7])
    process_slot(ctx(tmp_path), 0, pa.concat_tables(first))
    assert [f.name for f in (tmp_path / "audit").iterdir()] == ["batch-000000000007-slot-0.parquet"]
    assert sorted(r["value"] for r in read_table(str(tmp_path / "out" / "doubled"), OUTPUT_SCHEMA).to_pylist()) == [b"2", b"4"]


def test_serdes():
    assert deserialize("json", b'{"a": 1}', "value") == {"a": 1}
    assert deserialize("string", None, "key") is None
    assert serialize("json", {"b": 1, "a": 2}) == b'{"a":2,"b":1}'
    with pytest.raises(RecordSerdeError, match="key is not valid string"):
        deserialize("string", b"\xff", "key")


_threads: dict[str, int] = {}
_meeting: list = []  # a threading.Barrier the slices wait at, when a test wants them side by side


def meeting_app(app):
    def meet(m):
        _threads[m.key] = threading.get_ident()
        for barrier in _meeting:
            barrier.wait(timeout=10)  # only slices running at the same time get past it
        return m.value

    app.input("kafka.orders").map(meet).send_to("parquet.met")


def _pool_ctx(tmp_path, size):
    return dataclasses.replace(ctx(tmp_path), app_class="tests.unit.test_processing:meeting_app", thread_pool_size=size)


def test_thread_pool_size_0_runs_the_virtual_tasks_one_after_another(tmp_path):
    _threads.clear()
    _meeting.clear()
    batch = rows(("Partition_0-0-2", 0, 0, b"1"), ("Partition_0-1-2", 1, 1, b"2"))
    assert [r["processed"] for r in process_slot(_pool_ctx(tmp_path, 0), 0, batch)] == [1, 1]
    assert set(_threads.values()) == {threading.get_ident()}  # the caller's own thread, no pool


@pytest.mark.parametrize("size", [2, 64])
def test_thread_pool_runs_virtual_tasks_side_by_side(tmp_path, size):
    from elasticity.process_registry import PROCESS

    # what earlier passes of this app taught the process (PassHistory) may send this one to a single thread:
    # a short pass on a loaded machine reads as busy
    PROCESS.close()
    _threads.clear()
    _meeting[:] = [threading.Barrier(2)]
    try:
        batch = rows(("Partition_0-0-2", 0, 0, b"1"), ("Partition_0-1-2", 1, 1, b"2"))
        summary = process_slot(_pool_ctx(tmp_path, size), 0, batch)
    finally:
        _meeting.clear()
    assert [(r["processed"], r["dead_lettered"]) for r in summary] == [(1, 0), (1, 0)]  # both met at the barrier
    assert len(set(_threads.values())) == 2


def _task_view(root, schema, drop=()):
    """A sink's rows by virtual task, in the task's order, without the columns a run does not decide alone."""
    out: dict[str, list] = {}
    for r in read_table(str(root), schema).to_pylist():
        out.setdefault(r["task_name"], []).append({k: v for k, v in r.items() if k not in drop})
    return {t: sorted(rs, key=lambda r: (r.get("seq", 0), r.get("offset", r.get("source_offset")))) for t, rs in out.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(
        st.tuples(st.integers(0, 7), st.sampled_from([b'{"n": 1}', b'{"n": 2}', b'{"n": 3}', b"not json", b'{"x": 1}'])),
        min_size=1,
        max_size=60,
    ),
    policy=st.sampled_from(["dlq", "fail"]),
    pool=st.sampled_from([0, 1, 2, 3, 64]),
)
def test_virtual_tasks_run_together_leave_what_each_would_alone(tmp_path_factory, records, policy, pool):
    """A slot runs its slices in units of several virtual tasks (one pass of the operator graph per unit); each
    task's summary, outputs, audit rows and dead letters are those it leaves run on its own, whatever the pool."""
    name = lambda t: f"Partition_0-{t}-8"  # noqa: E731
    batch = [(name(t), t, offset, value) for offset, (t, value) in enumerate(records)]
    together = tmp_path_factory.mktemp("together")
    summary = {
        r["task_name"]: r
        for r in process_slot(dataclasses.replace(ctx(together, policy), thread_pool_size=pool), 0, rows(*batch))
    }
    alone = tmp_path_factory.mktemp("alone")
    expected = {}
    for t in sorted({t for t, _ in records}):
        mine = [r for r in batch if r[0] == name(t)]
        (expected[name(t)],) = process_slot(ctx(alone, policy, batch_id=t), 0, rows(*mine))
    drop = ("process_ns",)
    assert {t: {k: v for k, v in r.items() if k not in drop} for t, r in summary.items()} == {
        t: {k: v for k, v in r.items() if k not in drop} for t, r in expected.items()
    }
    assert _task_view(together / "out" / "doubled", OUTPUT_SCHEMA, ("batch_id",)) == _task_view(
        alone / "out" / "doubled", OUTPUT_SCHEMA, ("batch_id",)
    )
    assert _task_view(together / "audit", AUDIT_SCHEMA, ("batch_id",)) == _task_view(alone / "audit", AUDIT_SCHEMA, ("batch_id",))
    if any(r["dead_lettered"] for r in expected.values()):
        assert _task_view(together / "dlq", DEAD_LETTER_SCHEMA, ("batch_id",)) == _task_view(
            alone / "dlq", DEAD_LETTER_SCHEMA, ("batch_id",)
        )
    # the slot's files list the tasks in order, each task's rows in its own order
    audit = read_table(str(together / "audit"), AUDIT_SCHEMA).to_pylist()
    assert [(r["task_name"], r["seq"]) for r in audit] == sorted((r["task_name"], r["seq"]) for r in audit)


def test_the_drivers_summary_row_has_the_summary_schemas_columns_in_order():
    from elasticity.batch.container.processing import SUMMARY_SCHEMA
    from elasticity.batch.coordinator.outcome import TaskSummary

    assert list(TaskSummary._fields) == SUMMARY_SCHEMA.names


def busy_app(app):
    def burn(m):
        _threads[m.key] = threading.get_ident()
        end = time.thread_time() + 0.002
        while time.thread_time() < end:  # computes: the GIL runs one thread at a time
            pass
        return m.value

    app.input("kafka.orders").map(burn).send_to("parquet.burnt")


def test_a_slot_runs_its_units_on_its_own_thread_when_its_app_computes_and_on_the_pool_when_it_waits(tmp_path):
    """The pass history decides (its rules are tested below, without timing): one thread for an app whose passes
    kept the pool busy, the pool otherwise; and a pass is observed, here on the pool, as computing."""
    from elasticity.batch.container.container_process import container_process
    from elasticity.batch.container.scheduling import PassHistory
    from elasticity.process_registry import PROCESS

    PROCESS.close()
    process = container_process()  # a new Python worker's: no history learnt yet
    app_class = "tests.unit.test_processing:busy_app"
    context = dataclasses.replace(ctx(tmp_path), app_class=app_class, thread_pool_size=64)
    batch = rows(*((f"Partition_0-{t}-8", t, t, b"1") for t in range(8)))
    process.histories[app_class] = PassHistory(single=True)
    _threads.clear()
    assert sum(r["processed"] for r in process_slot(context, 0, batch)) == 8
    assert set(_threads.values()) == {threading.get_ident()}  # the slot's own thread
    process.histories[app_class] = PassHistory(single=False, pool_passes=5)
    _threads.clear()
    process_slot(context, 0, batch)
    assert threading.get_ident() not in set(_threads.values())  # the pool's threads
    assert process.histories[app_class].pool_passes == 4  # the pass was observed


def test_an_app_that_waits_keeps_the_pool():
    from elasticity.batch.container.scheduling import PassHistory

    h = PassHistory()
    h.observe(single=False, cpu_ns=10, wall_ns=100)  # 10 % busy: waiting, side by side
    assert not h.single
    h.observe(single=False, cpu_ns=95, wall_ns=100)  # the pool kept busy: try one thread
    assert h.single
    h.observe(single=True, cpu_ns=30, wall_ns=100)  # one thread waited 70 % of the time: back to the pool
    assert not h.single and h.pool_passes == 8
    for _ in range(8):
        h.observe(single=False, cpu_ns=95, wall_ns=100)
    assert not h.single  # backing off
    h.observe(single=False, cpu_ns=95, wall_ns=100)
    assert h.single
    h.observe(single=True, cpu_ns=30, wall_ns=100)
    assert h.pool_passes == 16  # twice as long before the next try
    h.observe(single=False, cpu_ns=95, wall_ns=100)
    assert h.pool_passes == 15
