"""Checkpoints against the log they point into: a recreated topic always fails, a truncated one fails or is
declared lost by policy, and what a plan skips is exactly what was declared."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.coordinator.log_bounds import FAIL, SKIP_TO_EARLIEST, InputTruncatedError, checked, lost_ranges
from elasticity.batch.coordinator.planning import plan_ranges
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.jobmodel.model import SystemStreamPartition, TaskName

BASE = SystemStreamPartition("kafka", "orders", 0)


def checkpoints(offsets: list[int]) -> dict[TaskName, TaskCheckpoint]:
    """One virtual task per key bucket of partition 0, at the given offsets."""
    factor = len(offsets)
    return {
        (name := TaskName(f"Partition_0-{b}-{factor}")): TaskCheckpoint.of_offsets(name, {BASE.with_key_bucket(b): o})
        for b, o in enumerate(offsets)
    }


def plan(cps: dict[TaskName, TaskCheckpoint], high: int) -> BatchPlan:
    return BatchPlan(job_name="j", batch_id=1, generation=1, ranges=plan_ranges(cps.values(), {BASE: high}, 10**6))


offsets_st = st.lists(st.integers(0, 100), min_size=1, max_size=6)


@given(offsets=offsets_st, low=st.integers(0, 120), extra=st.integers(0, 50))
def test_skip_to_earliest_plans_within_the_log_and_declares_exactly_what_it_skips(offsets, low, extra):
    high = max([low, *offsets]) + extra
    cps = checkpoints(offsets)
    planned = checked(cps, {BASE: low}, {BASE: high}, SKIP_TO_EARLIEST)
    for cp in planned.values():
        assert all(low <= o <= high for o in cp.offsets.values())
    lost = lost_ranges(cps, plan(planned, high))
    assert {(r.task_name.name, r.start, r.end) for r in lost} == {
        (name.name, o, low) for name, cp in cps.items() for o in cp.offsets.values() if o < low
    }


@given(offsets=offsets_st, low=st.integers(0, 120), extra=st.integers(0, 50))
def test_fail_refuses_any_checkpoint_below_the_log_start_and_changes_nothing_else(offsets, low, extra):
    high = max([low, *offsets]) + extra
    cps = checkpoints(offsets)
    if min(offsets) < low:
        with pytest.raises(InputTruncatedError, match=rf"the log starts at {low}: records \d+\.\.{low - 1} were removed"):
            checked(cps, {BASE: low}, {BASE: high}, FAIL)
    else:
        assert checked(cps, {BASE: low}, {BASE: high}, FAIL) == cps
        assert lost_ranges(cps, plan(cps, high)) == ()


@given(offsets=offsets_st, short=st.integers(1, 50), policy=st.sampled_from([FAIL, SKIP_TO_EARLIEST]))
def test_a_log_ending_below_a_checkpoint_always_fails(offsets, short, policy):
    high = max(max(offsets) - short, 0)
    if max(offsets) <= high:
        return
    with pytest.raises(InputTruncatedError, match="past the log's end .* deleted and recreated"):
        checked(checkpoints(offsets), {BASE: 0}, {BASE: high}, policy)


def test_the_error_names_topic_partition_checkpoint_and_log_start():
    with pytest.raises(InputTruncatedError) as e:
        checked(checkpoints([3, 9]), {BASE: 5}, {BASE: 20}, FAIL)
    assert str(e.value).startswith(
        "topic 'orders' partition 0: the checkpoint of Partition_0-0-2 is at offset 3, but the log starts at 5: "
        "records 3..4 were removed (retention or DeleteRecords) before the job processed them"
    )
