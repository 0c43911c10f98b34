"""The process stage without Spark: slices in, sinks and summaries out."""

import dataclasses
import json
import threading

import pyarrow as pa
import pytest

from elasticity.batch.processing import ProcessContext, process_slot
from elasticity.batch.reader import ROUTED_SCHEMA as ROUTED
from elasticity.batch.sinks import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table, task_file
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
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
    damaged = root / "batch_id=7" / task_file(TaskName("Partition_0-1-2"))
    damaged.write_bytes(damaged.read_bytes()[:20])  # not a row fewer: the reader (data quality, the tests) must know
    for batches in (None, [7]):
        with pytest.raises(pa.ArrowInvalid, match=task_file(TaskName("Partition_0-1-2"))):
            read_table(str(root), OUTPUT_SCHEMA, batches)


def test_a_retried_batch_overwrites_its_own_files(tmp_path):
    batch = rows(("Partition_0-0-2", 0, 1, b'{"n": 1}'))
    process_slot(ctx(tmp_path), 0, batch)
    process_slot(ctx(tmp_path), 0, batch)
    assert read_table(str(tmp_path / "out" / "doubled"), OUTPUT_SCHEMA).num_rows == 1
    assert task_file(TaskName("a/b")) != task_file(TaskName("a_b"))


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
    _threads.clear()
    _meeting[:] = [threading.Barrier(2)]
    try:
        batch = rows(("Partition_0-0-2", 0, 0, b"1"), ("Partition_0-1-2", 1, 1, b"2"))
        summary = process_slot(_pool_ctx(tmp_path, size), 0, batch)
    finally:
        _meeting.clear()
    assert [(r["processed"], r["dead_lettered"]) for r in summary] == [(1, 0), (1, 0)]  # both met at the barrier
    assert len(set(_threads.values())) == 2
