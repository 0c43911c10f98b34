"""The batch rules: plan_ranges (the cap, turns, progress) and advance (finished and stopped tasks)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.coordinator.planning import advance, plan_ranges
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.jobmodel.model import SystemStreamPartition, TaskName


def ssp(p: int, bucket: int = -1) -> SystemStreamPartition:
    return SystemStreamPartition("kafka", "orders", p, bucket)


def cps(starts: dict[int, int]) -> list[TaskCheckpoint]:
    return [TaskCheckpoint(task_name=TaskName(f"Partition {p}"), offsets={ssp(p): o}) for p, o in starts.items()]


def sizes(ranges) -> dict[int, int]:
    return {r.ssp.partition: r.size for r in ranges}


def test_under_the_cap_everything_up_to_the_high_watermark():
    ranges = plan_ranges(cps({0: 5, 1: 0}), {ssp(0): 15, ssp(1): 3}, 100)
    assert ranges == (OffsetRange(ssp(0), 5, 15), OffsetRange(ssp(1), 0, 3))


def test_over_the_cap_one_each_then_shared_by_lag():
    # lags 901, 91, 1, 0: one record each to the three lagging, the other 97 shared by lag beyond that first
    # record (88.18 and 8.82): rounded down, 0 is left one short, and the largest remainder (1's) takes it
    ranges = plan_ranges(cps({0: 0, 1: 0, 2: 0, 3: 7}), {ssp(0): 901, ssp(1): 91, ssp(2): 1, ssp(3): 7}, 100)
    assert sizes(ranges) == {0: 1 + 900 * 97 // 990, 1: 1 + 90 * 97 // 990 + 1, 2: 1, 3: 0}
    assert sizes(ranges) == {0: 89, 1: 10, 2: 1, 3: 0}
    assert ranges[3] == OffsetRange(ssp(3), 7, 7)  # caught up: an empty range, never a negative one


def test_the_start_is_the_slowest_virtual_task():
    tasks = [
        TaskCheckpoint(task_name=TaskName("Partition_0-0-2"), offsets={ssp(0, 0): 40}),
        TaskCheckpoint(task_name=TaskName("Partition_0-1-2"), offsets={ssp(0, 1): 25}),
    ]
    assert plan_ranges(tasks, {ssp(0): 50}, 10) == (OffsetRange(ssp(0), 25, 35),)


def test_a_high_watermark_below_the_checkpoint_gives_an_empty_range():
    assert plan_ranges(cps({0: 9}), {ssp(0): 4}, 10) == (OffsetRange(ssp(0), 9, 9),)


def test_a_missing_high_watermark_raises():
    with pytest.raises(ValueError, match="no high watermark"):
        plan_ranges(cps({0: 0, 1: 0}), {ssp(0): 10}, 10)


@pytest.mark.parametrize("cap", [0, -5])
def test_a_cap_below_1_is_rejected(cap):
    with pytest.raises(ValueError, match="expected an integer >= 1"):
        plan_ranges(cps({0: 0}), {ssp(0): 10}, cap)


def test_a_cap_smaller_than_the_lagging_partitions_takes_turns():
    """batch.max.records=1 on 3 lagging partitions: one record per batch, each partition in turn."""
    starts, high = {0: 0, 1: 0, 2: 0}, {ssp(p): 10 for p in range(3)}
    order = []
    for _ in range(6):
        ranges = plan_ranges(cps(starts), high, 1)
        (moved,) = [r for r in ranges if r.size]
        assert moved.size == 1
        order.append(moved.ssp.partition)
        starts[moved.ssp.partition] = moved.end
    assert order == [0, 1, 2, 0, 1, 2]


@given(
    lags=st.lists(st.integers(0, 60), min_size=1, max_size=8),
    cap=st.integers(1, 50),
)
def test_any_cap_drains_every_partition(lags, cap):
    """Every batch stays within the cap and moves while there is lag; while the set of lagging
    partitions stays the same, each of them advances within ceil(n/cap) batches."""
    starts = dict.fromkeys(range(len(lags)), 0)
    high = {ssp(p): lag for p, lag in enumerate(lags)}
    waited: dict[int, int] = {}
    lagging_before: set[int] = set()
    for _ in range(sum(lags) + 1):
        ranges = plan_ranges(cps(starts), high, cap)
        total = sum(r.size for r in ranges)
        assert all(r.size >= 0 for r in ranges) and total <= cap
        assert all(r.end <= high[r.ssp] for r in ranges)
        lagging = {p for p, o in starts.items() if o < high[ssp(p)]}
        assert total == min(cap, sum(high[ssp(p)] - o for p, o in starts.items()))  # the whole cap, when there is that much
        if not lagging:
            assert total == 0
            return
        assert total > 0
        if lagging != lagging_before:
            waited, lagging_before = dict.fromkeys(lagging, 0), lagging
        for r in ranges:
            p = r.ssp.partition
            if p in lagging:
                waited[p] = 0 if r.size else waited[p] + 1
                assert waited[p] < -(-len(lagging) // cap), f"partition {p} waited {waited[p]} batches"
            starts[p] = r.end
    raise AssertionError("did not drain")


def test_advance_moves_finished_tasks_to_the_range_end_and_drops_passed_watermarks():
    cp = TaskCheckpoint(
        task_name=TaskName("Partition_0-1-2"),
        offsets={ssp(0, 1): 10},
        watermarks={ssp(0, 1): (Watermark(4, 1, 15), Watermark(4, 3, 30))},
    )
    after = advance(cp, [OffsetRange(ssp(0), 8, 20)])
    assert after.offsets == {ssp(0, 1): 20}
    assert after.watermarks == {ssp(0, 1): (Watermark(4, 3, 30),)}


def test_advance_keeps_a_task_ahead_of_the_range():
    cp = TaskCheckpoint(task_name=TaskName("Partition_0-1-2"), offsets={ssp(0, 1): 25})
    assert advance(cp, [OffsetRange(ssp(0), 8, 20)]).offsets == {ssp(0, 1): 25}


def test_advance_of_a_stopped_task_stops_at_its_first_unprocessed_record():
    cp = TaskCheckpoint(
        task_name=TaskName("Partition_0-0-2"),
        offsets={ssp(0, 0): 10, ssp(1, 0): 4},
        watermarks={ssp(0, 0): (Watermark(4, 0, 12), Watermark(4, 2, 30))},
    )
    ranges = [OffsetRange(ssp(0), 10, 40), OffsetRange(ssp(1), 4, 9)]
    after = advance(cp, ranges, stopped={ssp(0, 0): 17})
    assert after.offsets == {ssp(0, 0): 17, ssp(1, 0): 9}  # stopped on partition 0 only; partition 1 finished
    assert after.watermarks == {ssp(0, 0): (Watermark(4, 2, 30),)}  # 12 is passed, 30 is not


def test_advance_never_moves_a_stopped_task_backwards():
    cp = TaskCheckpoint(task_name=TaskName("Partition 0"), offsets={ssp(0): 10})
    assert advance(cp, [OffsetRange(ssp(0), 5, 20)], stopped={ssp(0): 7}).offsets == {ssp(0): 10}
