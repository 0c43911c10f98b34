"""The commit record carried in a Kafka transaction: what it writes back is exactly what was committed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.checkpoint.commit_record import PART_TASKS, CommitRecord, complete_records, last_record, to_parts
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint, Watermark
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import SerdeError


@st.composite
def checkpoints(draw, factor: int = 4):
    partition, bucket = draw(st.integers(0, 7)), draw(st.integers(0, factor - 1))
    ssp = SystemStreamPartition("kafka", draw(st.sampled_from(["orders", "clicks.v2"])), partition, bucket)
    marks = draw(st.lists(st.builds(Watermark, st.just(factor * 2), st.integers(0, factor * 2 - 1), st.integers(1, 10**6))))
    stateful = draw(st.booleans())
    return TaskCheckpoint(
        task_name=TaskName(f"Partition_{partition}-{bucket}-{factor}"),
        offsets={ssp: draw(st.integers(0, 2**40))},
        watermarks={ssp: tuple(marks)} if marks else {},
        checkpoint_id=CheckpointId(draw(st.integers(1, 2**41)), draw(st.integers(0, 10**9))) if stateful else None,
        state_markers={"org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory": {"totals": "blob-1"}}
        if stateful
        else {},
    )


def _same(a: TaskCheckpoint, b: TaskCheckpoint) -> bool:
    return (a, a.watermarks, a.checkpoint_id, dict(a.state_markers)) == (b, b.watermarks, b.checkpoint_id, dict(b.state_markers))


@given(st.lists(checkpoints(), max_size=30), st.lists(st.integers(1, 10**6), min_size=1, max_size=4, unique=True))
def test_a_record_reads_back_as_it_was_written(cps, batch_ids):
    record = CommitRecord(
        job_name="job", generation=3, batch_ids=tuple(sorted(batch_ids)), commit_id="c-1", checkpoints=tuple(cps)
    )
    back = last_record(to_parts(record), "job")
    assert back is not None and (back.generation, back.batch_ids, back.commit_id) == (3, record.batch_ids, "c-1")
    assert len(back.checkpoints) == len(cps) and all(_same(a, b) for a, b in zip(back.checkpoints, cps, strict=True))


def test_a_large_record_is_cut_into_parts_and_only_a_whole_one_counts():
    cps = tuple(
        TaskCheckpoint(task_name=TaskName(f"Partition_{i}-0-2"), offsets={SystemStreamPartition("kafka", "t", i, 0): i})
        for i in range(1200)
    )
    parts = to_parts(CommitRecord(job_name="job", generation=1, batch_ids=(7,), commit_id="c-7", checkpoints=cps))
    assert len(parts) == -(-1200 // PART_TASKS) and all(len(p) < 1_000_000 for p in parts)
    older = to_parts(CommitRecord(job_name="job", generation=1, batch_ids=(6,), commit_id="c-6", checkpoints=cps[:3]))
    assert last_record(older + parts, "job").batch_ids == (7,)
    assert last_record(older + parts[:-1], "job").batch_ids == (6,)  # the newest lacks a part: the older is the last whole
    assert last_record(parts, "other-job") is None
    assert last_record([], "job") is None


def test_a_value_that_is_no_commit_record_is_an_error_naming_it():
    with pytest.raises(SerdeError, match="not a commit record of job 'job'"):
        last_record([b"hello"], "job")
    with pytest.raises(SerdeError, match="not a commit record"):
        last_record([json.dumps({"job": "job"}).encode()], "job")


def test_the_outputs_each_batch_sent_read_back_with_every_whole_record():
    """What data quality compares a Kafka output with: per batch and output, how many records the commit sent."""
    cps = tuple(
        TaskCheckpoint(task_name=TaskName(f"Partition_{i}-0-2"), offsets={SystemStreamPartition("kafka", "t", i, 0): i})
        for i in range(600)
    )
    first = to_parts(
        CommitRecord(
            job_name="job", generation=1, batch_ids=(4, 5), commit_id="c-5", checkpoints=cps[:2], outputs={4: {"out": 3}, 5: {}}
        )
    )
    second = to_parts(
        CommitRecord(
            job_name="job", generation=1, batch_ids=(6,), commit_id="c-6", checkpoints=cps, outputs={6: {"out": 2, "other": 1}}
        )
    )
    records = complete_records(first + second, "job")
    assert [(r.batch_ids, r.outputs) for r in records] == [((4, 5), {4: {"out": 3}, 5: {}}), ((6,), {6: {"out": 2, "other": 1}})]
    assert [r.batch_ids for r in complete_records(first + second[:1], "job")] == [(4, 5)]  # a part missing: not whole
    old = json.loads(first[0])
    del old["outputs"]  # a record written before the counts were
    assert complete_records([json.dumps(old).encode()], "job")[0].outputs == {}
