"""A replay's pure parts: where each partition starts from ListOffsets' answers, the generation's checkpoints
and record, the refusals, the rows `--outputs replace` removes, the versions data quality counts; and the
replay through the coordinator with the real SQL store and the in-memory stream."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.api.descriptors import StoreDescriptor
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.coordinator.replayer import plan_replay, replay
from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA
from elasticity.batch.sinks.replay_outputs import replayed_mask
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.replay import (
    OutputMode,
    PartitionStart,
    Replay,
    ReplayError,
    ReplayFrom,
    choose_starts,
    replay_checkpoints,
)
from elasticity.checkpoint.store import CheckpointStore, LeaseHeldError
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.config import validate
from elasticity.jobmodel.model import ContainerModel, JobModel, SystemStream, SystemStreamPartition, TaskModel, TaskName
from elasticity.quality.replay_versions import Versions
from elasticity.state.replay_state import refusals
from elasticity.state.store_config import StorageConfig
from tests.support.memory import MemoryInputs, ReferenceRunner

ORDERS = SystemStream("kafka", "orders")
P0, P1, P2 = (SystemStreamPartition("kafka", "orders", p) for p in range(3))
T = 1_764_000_000_000


def test_each_partition_starts_at_listoffsets_answer_and_without_a_record_after_the_time_at_its_end():
    starts = choose_starts(
        ReplayFrom(timestamp_ms=T),
        {P0: 40, P1: None, P2: -1},  # librdkafka answers -1 (OFFSET_END) when no record is at or after the time
        log_starts={P0: 0, P1: 10, P2: 5},
        log_ends={P0: 100, P1: 70, P2: 5},
    )
    assert {s: (p.offset, p.found) for s, p in starts.items()} == {P0: (40, True), P1: (70, False), P2: (5, False)}
    assert "no record at or after the time, starts at its end 70" in starts[P1].describe()
    assert [s for s, p in starts.items() if p.retention_gap] == [P2]  # emptied by retention: what it held is unknown


def test_an_answer_outside_the_log_is_brought_inside_and_the_log_start_after_retention_is_a_gap():
    starts = choose_starts(ReplayFrom(timestamp_ms=T), {P0: 3, P1: 500}, log_starts={P0: 20, P1: 0}, log_ends={P0: 90, P1: 60})
    assert (starts[P0].offset, starts[P1].offset) == (20, 60)
    assert starts[P0].retention_gap and not starts[P1].retention_gap
    assert "retention removed the records before it" in starts[P0].describe()


def test_from_the_earliest_every_partition_starts_at_its_log_start():
    starts = choose_starts(ReplayFrom(timestamp_ms=None), {}, log_starts={P0: 0, P1: 7}, log_ends={P0: 9, P1: 7})
    assert {s: (p.offset, p.found, p.retention_gap) for s, p in starts.items()} == {P0: (0, True, False), P1: (7, False, True)}


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("earliest", None),
        ("EARLIEST", None),
        (str(T), T),
        ("2025-11-24T16:00:00Z", T),
        ("2025-11-24T17:00:00+01:00", T),
        ("2025-11-24T16:00:00", T),  # UTC when it names no offset
    ],
)
def test_replay_times_parse(text, ms):
    assert ReplayFrom.parse(text).timestamp_ms == ms


def test_a_time_that_is_none_fails_naming_the_forms():
    with pytest.raises(ReplayError, match="expected 'earliest', epoch milliseconds or an ISO 8601 time"):
        ReplayFrom.parse("yesterday")


def _model(factor: int) -> JobModel:
    tasks = [
        TaskModel(
            TaskName(f"Partition_{p}-{b}-{factor}"), frozenset({SystemStreamPartition("kafka", "orders", p, b)}), p * factor + b
        )
        for p in range(2)
        for b in range(factor)
    ]
    return JobModel.of({}, [ContainerModel("0", tuple(tasks))])


def _starts(**offsets: int) -> dict[SystemStreamPartition, PartitionStart]:
    out = {}
    for name, o in offsets.items():
        ssp = {"p0": P0, "p1": P1}[name]
        out[ssp] = PartitionStart(ssp=ssp, offset=o, log_start=0, log_end=1000, found=True)
    return out


def test_the_generation_starts_every_bucket_at_the_time_but_never_past_its_own_checkpoint():
    model = _model(2)
    b = {t.task_name: next(iter(t.system_stream_partitions)) for t in model.tasks()}
    names = sorted(b)
    old = {
        names[0]: TaskCheckpoint(
            task_name=names[0], offsets={b[names[0]]: 90}, watermarks={b[names[0]]: (Watermark(4, 0, 120),)}
        ),
        names[1]: TaskCheckpoint(task_name=names[1], offsets={b[names[1]]: 30}, watermarks={b[names[1]]: (Watermark(4, 1, 80),)}),
        names[2]: TaskCheckpoint(task_name=names[2], offsets={b[names[2]]: 50}),
        names[3]: TaskCheckpoint(task_name=names[3], offsets={b[names[3]]: 10}, watermarks={b[names[3]]: (Watermark(4, 3, 12),)}),
    }
    new = replay_checkpoints(model, old, _starts(p0=40, p1=20))
    assert new[names[0]].offsets == {b[names[0]]: 40} and not new[names[0]].watermarks  # ahead: back to the time
    assert new[names[1]].offsets == {b[names[1]]: 30}  # behind the time: goes on from its checkpoint ...
    assert new[names[1]].watermarks == {b[names[1]]: (Watermark(4, 1, 40),)}  # ... what it did past the time again
    assert new[names[2]].offsets == {b[names[2]]: 20}
    assert new[names[3]].watermarks == {b[names[3]]: (Watermark(4, 3, 12),)}  # below the time: as it was
    assert all(cp.checkpoint_id is None and not cp.state_markers for cp in new.values())


@given(st.lists(st.integers(0, 200), min_size=4, max_size=4), st.integers(0, 200), st.integers(0, 200))
def test_a_replay_never_starts_a_bucket_past_its_checkpoint_nor_past_the_time(offsets, at0, at1):
    model = _model(2)
    names = sorted(t.task_name for t in model.tasks())
    ssp = {t.task_name: next(iter(t.system_stream_partitions)) for t in model.tasks()}
    old = {n: TaskCheckpoint(task_name=n, offsets={ssp[n]: o}) for n, o in zip(names, offsets, strict=True)}
    new = replay_checkpoints(model, old, _starts(p0=at0, p1=at1))
    for n in names:
        at = at0 if ssp[n].partition == 0 else at1
        assert new[n].offsets[ssp[n]] == min(old[n].offsets[ssp[n]], at)


def test_the_replay_record_round_trips_and_names_the_replayed_range():
    model = _model(1)
    old = {
        t.task_name: TaskCheckpoint(task_name=t.task_name, offsets={s: 70 for s in t.system_stream_partitions})
        for t in model.tasks()
    }
    starts = _starts(p0=40, p1=80)
    new = replay_checkpoints(model, old, starts)
    r = Replay(
        requested=ReplayFrom(timestamp_ms=T),
        reason="a bug fixed in the enrichment",
        outputs=OutputMode.REPLACE,
        factor=1,
        starts={s: p.offset for s, p in starts.items()},
        start_checkpoints=new,
        previous_checkpoints=old,
    )
    back = Replay.from_json(r.to_json())
    assert back == r
    assert back.replayed() == {P0: (40, 70), P1: (80, 80)}
    assert "replay from 2025-11-24T16:00:00.000+00:00" in back.describe()


def _storage(**props: str) -> StorageConfig:
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "task.checkpoint.read.versions": "2,1", **props})
    return StorageConfig.of(config, [StoreDescriptor("counts", "string", "json")])


def test_refusals_name_the_store_and_why():
    counts = [StoreDescriptor("counts", "string", "json")]
    gap = {P0: PartitionStart(ssp=P0, offset=30, log_start=30, log_end=90, found=True)}
    fine = {P0: PartitionStart(ssp=P0, offset=40, log_start=30, log_end=90, found=True)}
    assert refusals(_storage(), counts, starts=fine, side_inputs={}) == []
    assert refusals(_storage(), [], starts=gap, side_inputs={"rates": ["kafka.rates"]}) == []  # stateless: nothing to rebuild
    (retention,) = refusals(_storage(), counts, starts=gap, side_inputs={})
    assert (
        "stores 'counts': the input's retention no longer holds the earliest offsets needed (orders-0 starts at 30" in retention
    )
    (side,) = refusals(_storage(), counts, starts=fine, side_inputs={"rates": ["kafka.rates"]})
    assert "joins table 'rates', fed by side input kafka.rates" in side and "state came from a side input" in side
    (local,) = refusals(_storage(**{"task.transactional.state.checkpoint.enabled": "false"}), counts, starts=fine, side_inputs={})
    assert "task.transactional.state.checkpoint.enabled=false" in local


def test_replace_removes_the_older_versions_rows_of_the_replayed_range_only():
    rows = [
        # (source partition, source offset, generation): kept?
        (0, 39, 3, True),  # before the replay's start
        (0, 40, 3, False),  # replayed
        (0, 75, None, False),  # replayed, a file of before the generation column
        (0, 41, 4, True),  # the replay's own
        (1, 10, 3, False),
        (None, None, 3, True),  # no provenance
    ]
    table = pa.Table.from_pylist(
        [
            {
                "key": b"k",
                "value": b"{}",
                "task_name": "t",
                "batch_id": 1,
                "seq": i,
                "source_partition": p,
                "source_offset": o,
                "source_system": "kafka" if p is not None else None,
                "source_stream": "orders" if p is not None else None,
                "generation": g,
            }
            for i, (p, o, g, _) in enumerate(rows)
        ],
        schema=OUTPUT_SCHEMA,
    )
    r = Replay(
        requested=ReplayFrom(timestamp_ms=T),
        reason="",
        outputs=OutputMode.REPLACE,
        factor=1,
        starts={P0: 40, P1: 0},
        start_checkpoints={},
        previous_checkpoints={},
    )
    assert [not m for m in replayed_mask(table, r, 4).to_pylist()] == [k for *_, k in rows]


def _plan(batch: int, generation: int) -> BatchPlan:
    return BatchPlan(job_name="j", batch_id=batch, generation=generation, ranges=())


def test_versions_split_the_batches_at_each_replay():
    r = Replay(
        requested=ReplayFrom(timestamp_ms=None),
        reason="",
        outputs=OutputMode.NEW_VERSION,
        factor=1,
        starts={},
        start_checkpoints={},
        previous_checkpoints={},
    )
    v = Versions({3: r, 5: r})
    assert [v.of_generation(g) for g in range(1, 7)] == [0, 0, 3, 3, 5, 5]
    plans = [_plan(10, 2), _plan(11, 2), _plan(12, 3), _plan(13, 4), _plan(14, 6)]
    assert v.first_segment(plans) == (plans[:2], 3)
    assert v.first_segment(plans[2:]) == (plans[2:4], 5)
    assert v.first_segment(plans[4:]) == (plans[4:], None)
    assert v.first_segment([]) == ([], None)


class TimedInputs(MemoryInputs):
    """The in-memory stream with ListOffsets by time: record n of a partition has timestamp T + n."""

    def offsets_for_time(
        self, ssps: Iterable[SystemStreamPartition], timestamp_ms: int
    ) -> dict[SystemStreamPartition, int | None]:
        out: dict[SystemStreamPartition, int | None] = {}
        for s in ssps:
            n = len(self.topics[s.system_stream][s.partition])
            out[s] = timestamp_ms - T if timestamp_ms - T < n else None
        return out


def _runner() -> ReferenceRunner:
    inputs = TimedInputs()
    inputs.create(ORDERS, 2)
    config = validate(
        {
            "job.name": "j",
            "task.inputs": "kafka.orders",
            "job.elasticity.factor": "2",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
        }
    )
    return ReferenceRunner(JobCoordinator(config, CheckpointStore("sqlite://"), inputs), inputs)


def test_a_replay_writes_a_fenced_generation_of_origin_replay_and_the_batches_after_reprocess_from_the_time():
    runner = _runner()
    for i in range(60):
        runner.inputs.produce(ORDERS, b"key-%d" % (i % 7), b"v")
    runner.drain()
    runner.assert_everything_processed_once()
    coordinator, store = runner.coordinator, runner.coordinator.store
    before = coordinator.current()
    lengths = {p: len(runner.inputs.topics[ORDERS][p]) for p in (0, 1)}

    dry = plan_replay(coordinator, ReplayFrom(timestamp_ms=T + 10), OutputMode.NEW_VERSION)
    assert {s.partition: p.offset for s, p in dry.starts.items()} == {p: min(10, n) for p, n in lengths.items()}
    assert coordinator.current() == before  # a dry run writes nothing

    store.acquire_lease("j", "a-batch", 60_000)  # a batch running: the replay waits, here it fails at once
    with pytest.raises(LeaseHeldError):
        replay(coordinator, ReplayFrom(timestamp_ms=T + 10), owner="replayer")
    store.release_lease("j", "a-batch")

    done = replay(coordinator, ReplayFrom(timestamp_ms=T + 10), reason="fix", owner="replayer")
    new = coordinator.current()
    assert new.number == before.number + 1 and new.origin == "replay" and new.factor == before.factor
    assert new.job_model == before.job_model and "replay from" in new.reason and "(fix)" in new.reason
    record = Replay.from_json(new.replay)
    assert record.requested.timestamp_ms == T + 10 and record.starts == {s: p.offset for s, p in done.starts.items()}
    for cp in coordinator.checkpoints(new).values():
        assert set(cp.offsets.values()) <= {min(10, n) for n in lengths.values()}

    n = len(runner.log)
    runner.drain()
    again = runner.log[n:]
    assert sorted((p.ssp.partition, p.offset) for p in again) == sorted(
        (p, o) for p, length in lengths.items() for o in range(min(10, length), length)
    )
    with pytest.raises(ReplayError, match="has no generation yet"):
        plan_replay(
            JobCoordinator(coordinator.config, CheckpointStore("sqlite://"), runner.inputs),
            ReplayFrom(timestamp_ms=None),
            OutputMode.NEW_VERSION,
        )


@pytest.mark.parametrize("backup", ["blobstore", ""])
def test_cleared_stores_restore_empty_on_a_host_that_held_them(tmp_path, backup):
    """A store with entries, committed; after clear_state its task restores (same host, live folder there) empty:
    from the empty snapshot, or with no backup from the new checkpoint id alone."""
    from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
    from elasticity.config import BLOB_STORE_FACTORY
    from elasticity.jobmodel.keybucket import key_hash
    from elasticity.state import ContainerStorageManager
    from elasticity.state.replay_state import clear_state

    counts = StoreDescriptor("counts", "string", "json")
    props = {"blob.store.uri": str(tmp_path / "blobs"), "job.state.dir": str(tmp_path / "state")}
    if backup:
        props["stores.counts.backup.factories"] = backup
    storage = _storage(**props)
    model = _model(2)
    tasks = list(model.tasks())

    def manager() -> ContainerStorageManager:
        return ContainerStorageManager(storage, [counts], tasks, len(tasks))

    csm = manager()
    try:
        csm.restore({t.task_name: None for t in tasks})
        for t in tasks:
            bucket = next(iter(t.system_stream_partitions)).key_bucket
            key = next(f"user-{i}" for i in range(100) if key_hash(f"user-{i}".encode()) % 2 == bucket)
            csm.store(t.task_name, "counts").put(key, 7)
        cp_id = CheckpointId.create()
        markers = csm.upload(csm.snapshot(cp_id))
    finally:
        csm.close()
    cleared = clear_state(storage, [counts], model, factor=2, from_generation=1)
    assert set(cleared.checkpoint_ids) == {t.task_name for t in tasks} and cleared.checkpoint_id != cp_id
    assert all(BLOB_STORE_FACTORY in cleared.markers[t.task_name] for t in tasks) if backup else not cleared.markers
    assert "cleared (a replay rebuilds it)" in cleared.describe()
    csm = manager()
    try:
        csm.restore({t.task_name: CheckpointV2(cp_id, {}, markers.get(t.task_name, {})) for t in tasks})
        assert all(dict(csm.store(t.task_name, "counts").all()) for t in tasks)  # the committed state, as it was
    finally:
        csm.close()
    csm = manager()
    try:
        csm.restore({t.task_name: CheckpointV2(cleared.checkpoint_id, {}, cleared.markers.get(t.task_name, {})) for t in tasks})
        assert all(dict(csm.store(t.task_name, "counts").all()) == {} for t in tasks)
    finally:
        csm.close()
