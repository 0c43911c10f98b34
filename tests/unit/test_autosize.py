from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.autosize import AutosizePolicy, BatchSample, parse_schedule, recommend, scheduled_factor

POLICY = AutosizePolicy(min_factor=1, max_factor=16, cooldown_ms=600_000, target_lag_s=60)
NOW = 10_000_000


def series(factor, lags, records=600, process_s=3.0, step_ms=60_000):
    return [BatchSample(NOW - (len(lags) - i) * step_ms, factor, records, process_s, lag) for i, lag in enumerate(lags)]


def test_scales_up_under_growing_lag():
    r = recommend(series(2, [1_000, 5_000, 12_000, 20_000]), 2, last_change_ms=0, now_ms=NOW, policy=POLICY)
    assert r.factor > 2 and "need factor" in r.reason


def test_holds_in_cool_down():
    r = recommend(series(2, [1_000, 5_000, 20_000]), 2, last_change_ms=NOW - 60_000, now_ms=NOW, policy=POLICY)
    assert r.factor == 2 and "cool-down" in r.reason


def test_scales_down_when_idle():
    r = recommend(series(8, [0, 0, 0, 0], records=50, process_s=2.0), 8, last_change_ms=0, now_ms=NOW, policy=POLICY)
    assert r.factor < 8 and "idle" in r.reason


def test_holds_when_keeping_up():
    r = recommend(series(4, [100, 90, 110, 100], records=2_000, process_s=20.0), 4, last_change_ms=0, now_ms=NOW, policy=POLICY)
    assert r.factor == 4


@given(
    st.integers(1, 16),
    st.lists(st.integers(0, 10**7), min_size=0, max_size=8),
    st.integers(0, 10**6),
    st.floats(0.001, 1000),
    st.integers(1, 8),
    st.integers(8, 64),
)
def test_never_outside_bounds(current, lags, records, process_s, lo, hi):
    policy = AutosizePolicy(min_factor=lo, max_factor=hi, cooldown_ms=0)
    r = recommend(series(current, lags, records, process_s), current, 0, NOW, policy)
    assert lo <= r.factor <= hi


def test_schedule_rules():
    rules = parse_schedule("0 8 * * * -> 8; 0 20 * * * -> 2")
    assert scheduled_factor(rules, datetime(2026, 11, 21, 9, 30)) == 8
    assert scheduled_factor(rules, datetime(2026, 11, 21, 21, 0)) == 2
    assert scheduled_factor(rules, datetime(2026, 11, 21, 3, 0)) == 2  # still last night's rule
    with pytest.raises(ValueError, match="cron expression"):
        parse_schedule("every morning -> 8")
