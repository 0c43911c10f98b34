import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.checkpoint.migration import BucketState, MigrationError, migrate, migrate_ssp, normalise
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from tests.support.examples import examples

S = SystemStream("kafka", "orders")


def states(*offsets):
    return {b: BucketState(o) for b, o in enumerate(offsets)}


def test_split_children_inherit_the_parent_offset():
    new = migrate_ssp(states(10, 20), 2, 4)
    assert {b: s.offset for b, s in new.items()} == {0: 10, 1: 20, 2: 10, 3: 20}
    assert all(not s.watermarks for s in new.values())


def test_merge_starts_at_min_and_keeps_the_faster_siblings_offset_as_watermark():
    new = migrate_ssp(states(10, 20, 30, 40), 4, 2)
    assert new[0] == BucketState(10, (Watermark(4, 2, 30),))
    assert new[1] == BucketState(20, (Watermark(4, 3, 40),))


def test_other_changes_share_keys_by_gcd():
    # 4 -> 6: gcd 2; new bucket 1 shares keys with old buckets 1 and 3
    new = migrate_ssp(states(10, 20, 30, 40), 4, 6)
    assert new[1] == BucketState(20, (Watermark(4, 3, 40),))
    assert new[4] == BucketState(10, (Watermark(4, 2, 30),))


def test_merge_then_split_restores_exact_offsets():
    merged = migrate_ssp(states(10, 20, 30, 40), 4, 2)
    assert {b: s for b, s in migrate_ssp(merged, 2, 4).items()} == states(10, 20, 30, 40)


def test_watermarks_collapse_into_the_offset():
    # all sub-buckets of bucket 0 (factor 2) are covered at factor 4 above the offset: lift to their min
    state = normalise(BucketState(5, (Watermark(4, 0, 12), Watermark(4, 2, 9))), 2, 0)
    assert state == BucketState(9, (Watermark(4, 0, 12),))
    # a watermark of a coarser factor containing the whole bucket lifts it at once
    assert normalise(BucketState(5, (Watermark(2, 1, 30),)), 4, 3) == BucketState(30, ())
    # passed or foreign watermarks go
    assert normalise(BucketState(50, (Watermark(2, 1, 30), Watermark(4, 0, 99))), 4, 3) == BucketState(50, ())


def test_incomplete_old_checkpoints_are_refused():
    with pytest.raises(MigrationError, match="buckets 0..3"):
        migrate_ssp(states(1, 2, 3), 4, 2)


def _done(state: dict[int, BucketState], factor: int, h: int, off: int) -> bool:
    s = state[h % factor]
    return off < s.offset or any(w.covers(h, off) for w in s.watermarks)


FACTORS = st.integers(1, 8)
HASHES = range(840)  # lcm(1..8): every residue class of every factor appears
OFFSETS = range(12)


@settings(max_examples=examples(60), deadline=None)
@given(FACTORS, st.lists(st.tuples(st.lists(st.integers(0, 11), min_size=8, max_size=8), FACTORS), min_size=1, max_size=5))
def test_migration_preserves_exactly_what_was_done(first, steps):
    """Through any sequence of progress and rescales, the done set is carried over
    exactly: nothing done is forgotten (no duplicates), nothing undone is claimed (no loss)."""
    factor, state = first, states(*([0] * first))
    truth: set[tuple[int, int]] = set()
    for advances, new_factor in steps:
        for b in range(factor):  # each bucket makes some progress
            target = max(state[b].offset, advances[b])
            truth |= {(h, o) for h in HASHES if h % factor == b for o in range(target)}
            state[b] = normalise(BucketState(target, state[b].watermarks), factor, b)
        state, factor = migrate_ssp(state, factor, new_factor), new_factor
        for h in HASHES:
            for o in OFFSETS:
                assert _done(state, factor, h, o) == ((h, o) in truth), (h, o, factor)
        for s in state.values():
            assert len(s.watermarks) <= 8 * 5  # bounded by the factors in play
            assert all(w.offset > s.offset for w in s.watermarks)


def _model(factor, partitions=2, **extra):
    config = validate({"job.name": "j", "task.inputs": str(S), "job.elasticity.factor": str(factor), **extra})
    return build_job_model(config, {S: partitions})


def _cps(factor, offsets, partitions=2):
    model = _model(factor, partitions)
    out = []
    for t in model.tasks():
        out.append(
            TaskCheckpoint(
                task_name=t.task_name,
                offsets={s: offsets[(s.partition, max(s.key_bucket, 0))] for s in t.system_stream_partitions},
            )
        )
    return out


def test_migrate_job_split_names_and_plan():
    old = _cps(2, {(0, 0): 5, (0, 1): 7, (1, 0): 3, (1, 1): 3})
    m = migrate(2, old, _model(4), new_factor=4, new_ssp_offsets={})
    assert m.checkpoints[TaskName("Partition_0-3-4")].offsets == {SystemStreamPartition("kafka", "orders", 0, 3): 7}
    assert "Partition_0-1-2\n  -> Partition_0-1-4" in m.describe()
    assert "Partition_0-3-4" in m.describe()


def test_factor_1_turns_elasticity_off_and_names_migrate_back():
    old = _cps(4, {(p, b): 10 + b for p in range(2) for b in range(4)})
    m = migrate(4, old, _model(1), new_factor=1, new_ssp_offsets={})
    cp = m.checkpoints[TaskName("Partition 0")]
    assert cp.offsets == {SystemStreamPartition("kafka", "orders", 0): 10}
    assert cp.watermarks[SystemStreamPartition("kafka", "orders", 0)] == (
        Watermark(4, 1, 11),
        Watermark(4, 2, 12),
        Watermark(4, 3, 13),
    )
    assert "Partition_0-0-4 + Partition_0-1-4 + Partition_0-2-4 + Partition_0-3-4" in m.describe()


def test_new_partitions_start_where_configured_and_old_keep_theirs():
    old = _cps(2, {(p, b): 5 for p in range(2) for b in range(2)})
    m = migrate(2, old, _model(2, partitions=3), new_factor=2, new_ssp_offsets={SystemStreamPartition("kafka", "orders", 2): 77})
    assert m.checkpoints[TaskName("Partition_2-1-2")].offsets == {SystemStreamPartition("kafka", "orders", 2, 1): 77}
    assert m.checkpoints[TaskName("Partition_1-1-2")].offsets == {SystemStreamPartition("kafka", "orders", 1, 1): 5}
    assert m.new_ssps == (SystemStreamPartition("kafka", "orders", 2),)
    with pytest.raises(MigrationError, match="no start offset"):
        migrate(2, old, _model(2, partitions=3), new_factor=2, new_ssp_offsets={})


def test_dropped_inputs_are_reported():
    old = _cps(1, {(p, 0): 5 for p in range(2)})
    other = SystemStream("kafka", "other")
    config = validate({"job.name": "j", "task.inputs": str(other)})
    m = migrate(
        1, old, build_job_model(config, {other: 1}), new_factor=1, new_ssp_offsets={SystemStreamPartition("kafka", "other", 0): 0}
    )
    assert len(m.dropped_ssps) == 2 and "no longer read" in m.describe()
