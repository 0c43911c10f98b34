"""The lag watcher's decision (LagWatch), fed observations as the trigger's polls would make them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.coordinator.lag import LagObservation, LagReport, LagThresholds, LagWatch

POS = (1, 100)


def seen(lag: int, *, leased: bool = False, must_run: bool = False, position: tuple[int | None, int] = POS) -> LagObservation:
    return LagObservation(lag, must_run, leased, position)


def fires(watch: LagWatch, polls: list[tuple[int, LagObservation]]) -> list[int]:
    return [t for t, s in polls if watch.observe(s, t)]


def test_fires_at_the_records_threshold_and_not_below():
    watch = LagWatch(LagThresholds(records=5, max_wait_ms=60_000))
    assert fires(watch, [(0, seen(0)), (2000, seen(3)), (4000, seen(4)), (6000, seen(5))]) == [6000]


def test_one_record_fires_at_once_by_default():
    assert fires(LagWatch(LagThresholds()), [(0, seen(0)), (2000, seen(1))]) == [2000]


def test_fewer_records_fire_once_they_have_waited_max_wait():
    watch = LagWatch(LagThresholds(records=100, max_wait_ms=10_000))
    polls = [(t, seen(2)) for t in range(0, 14_000, 2000)]
    assert fires(watch, polls) == [10_000]  # first seen at 0


def test_the_wait_restarts_when_the_lag_drops_to_zero():
    watch = LagWatch(LagThresholds(records=100, max_wait_ms=10_000))
    polls = [(0, seen(2)), (6000, seen(0)), (8000, seen(1)), (16_000, seen(1)), (18_000, seen(1))]
    assert fires(watch, polls) == [18_000]


def test_never_fires_while_a_run_holds_the_lease():
    watch = LagWatch(LagThresholds())
    assert fires(watch, [(t, seen(500, leased=True)) for t in range(0, 300_000, 2000)]) == []


def test_one_burst_gives_one_event_until_a_run_is_seen():
    watch = LagWatch(LagThresholds(cooldown_ms=60_000))
    burst = [(t, seen(10 + t // 1000)) for t in range(0, 20_000, 2000)]  # more records arrive: still one event
    assert fires(watch, burst) == [0]
    # the run takes the lease, commits, releases it: what waits after it starts the next run
    assert fires(watch, [(22_000, seen(0, leased=True)), (24_000, seen(3, position=(1, 130)))]) == [24_000]


def test_a_run_seen_only_by_its_commit_rearms_the_watcher():
    """A run that starts and ends between two polls is seen by the committed position it moved."""
    watch = LagWatch(LagThresholds(cooldown_ms=60_000))
    assert fires(watch, [(0, seen(10)), (2000, seen(10)), (4000, seen(2, position=(1, 110)))]) == [0, 4000]


def test_a_run_that_never_came_is_asked_for_again_after_the_cooldown():
    watch = LagWatch(LagThresholds(cooldown_ms=30_000))
    assert fires(watch, [(t, seen(7)) for t in range(0, 70_000, 2000)]) == [0, 30_000, 60_000]


def test_a_first_run_a_replay_or_new_partitions_fire_whatever_the_lag():
    watch = LagWatch(LagThresholds(records=1000))
    assert fires(watch, [(0, seen(0, must_run=True))]) == [0]


def test_an_observation_from_a_lag_report():
    first = LagObservation.of(LagReport(job="j", generation=None, factor=None), leased=False)
    assert first.must_run and first.lag == 0
    report = LagReport(job="j", generation=3, factor=4, per_ssp={"kafka.t.0": 5, "kafka.t.1": 2}, committed=40)
    assert LagObservation.of(report, leased=False) == LagObservation(7, False, False, (3, 40))
    replay = LagReport(job="j", generation=3, factor=4, pending_batch=9)
    assert LagObservation.of(replay, leased=False).must_run


observations = st.builds(
    LagObservation,
    st.integers(0, 20),
    st.booleans(),
    st.booleans(),
    st.tuples(st.just(1), st.integers(0, 3)),
)


@given(
    st.integers(1, 10),
    st.integers(0, 20_000),
    st.integers(0, 20_000),
    st.lists(st.tuples(st.integers(1, 5000), observations), max_size=60),
)
def test_events_only_when_records_wait_and_once_per_run_or_cooldown(records, max_wait, cooldown, steps):
    watch = LagWatch(LagThresholds(records=records, max_wait_ms=max_wait, cooldown_ms=cooldown))
    now, last_fire, last_position, run_seen = 0, None, None, False
    for dt, s in steps:
        now += dt
        fired = watch.observe(s, now)
        if s.leased:
            run_seen = True
        if last_fire is not None and s.position != last_position:
            run_seen = True
        if fired:
            assert not s.leased and (s.lag > 0 or s.must_run)
            assert s.must_run or s.lag >= records or max_wait <= now  # the wait is at most the time so far
            assert last_fire is None or run_seen or now - last_fire >= cooldown
            last_fire, last_position, run_seen = now, s.position, False


@given(st.integers(1, 10), st.integers(0, 20_000), st.lists(st.integers(0, 30), min_size=1, max_size=30))
def test_armed_and_over_the_threshold_always_fires(records, cooldown, lags):
    """Whatever came before, once no run was asked for within the cooldown, a lag at the threshold fires."""
    watch = LagWatch(LagThresholds(records=records, cooldown_ms=cooldown))
    now = 0
    for lag in lags:
        now += 1000
        watch.observe(seen(lag), now)
    assert watch.observe(seen(records), now + cooldown + 1)
