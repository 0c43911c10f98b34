from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.scaling.autosize import AutosizePolicy, BatchSample, Recommendation, recommend
from elasticity.scaling.schedule import parse_schedule, scheduled_factor

POLICY = AutosizePolicy(min_factor=1, max_factor=16, cooldown_ms=600_000, target_lag_s=60)
NOW = 10_000_000


def series(factor, lags, records=600, process_s=3.0, step_ms=60_000):
    return [
        BatchSample(at_ms=NOW - (len(lags) - i) * step_ms, factor=factor, records=records, process_s=process_s, lag=lag)
        for i, lag in enumerate(lags)
    ]


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
    r = recommend(series(current, lags, records, process_s), current, 0, now_ms=NOW, policy=policy)
    assert lo <= r.factor <= hi


def test_schedule_rules():
    rules = parse_schedule("0 8 * * * -> 8; 0 20 * * * -> 2")
    assert scheduled_factor(rules, datetime(2026, 11, 21, 9, 30)) == 8
    assert scheduled_factor(rules, datetime(2026, 11, 21, 21, 0)) == 2
    assert scheduled_factor(rules, datetime(2026, 11, 21, 3, 0)) == 2  # still last night's rule
    with pytest.raises(ValueError, match="cron expression"):
        parse_schedule("every morning -> 8")


# exact values: the formula's parts, each pinned (need = (input rate + lag / target) * headroom / per-factor throughput)


def test_headroom_is_applied_exactly():
    # 3 batches at factor 2, 600 records in 3 s each: 100 records/s per factor; input (1200 + 24000) / 120 s = 210/s;
    # need = (210 + 24000 / 60) * headroom / 100
    r = recommend(series(2, [0, 0, 24_000]), 2, last_change_ms=0, now_ms=NOW, policy=POLICY)
    assert r == Recommendation(8, "lag 0 -> 24000: need factor 7.6")  # 6.1 * 1.25 = 7.625
    no_headroom = AutosizePolicy(min_factor=1, max_factor=16, cooldown_ms=600_000, target_lag_s=60, headroom=1.0)
    assert recommend(series(2, [0, 0, 24_000]), 2, 0, now_ms=NOW, policy=no_headroom) == Recommendation(
        7, "lag 0 -> 24000: need factor 6.1"
    )


@pytest.mark.parametrize(
    "process_s,expected",
    [
        (28.2, Recommendation(5, "idle: need factor 4.7 of 8")),  # below 0.6 x 8 = 4.8: down to ceil(need)
        (29.4, Recommendation(8, "need factor 4.9: holding")),
    ],
)
def test_scale_down_only_below_the_hysteresis_band(process_s, expected):
    # no lag; need = input 10/s * 1.25 / (600 / process_s / 8) = process_s / 6
    assert recommend(series(8, [0, 0, 0], records=600, process_s=process_s), 8, 0, now_ms=NOW, policy=POLICY) == expected


def test_a_need_exactly_on_the_band_edge_holds():
    half = AutosizePolicy(min_factor=1, max_factor=16, cooldown_ms=0, target_lag_s=60, scale_down_below=0.5)
    # need = 10/s * 1.25 / (1800 / 72 s / 8) = 4.0 = 0.5 x 8 exactly: not below the band
    assert recommend(series(8, [0, 0, 0], records=600, process_s=24.0), 8, 0, now_ms=NOW, policy=half) == Recommendation(
        8, "need factor 4.0: holding"
    )
    assert recommend(series(8, [0, 0, 0], records=600, process_s=23.0), 8, 0, now_ms=NOW, policy=half) == Recommendation(
        4, "idle: need factor 3.8 of 8"
    )


def test_only_the_latest_six_samples_at_the_current_factor_count():
    def at(minute, factor, lag, records=600, process_s=3.0):
        return BatchSample(at_ms=NOW - (20 - minute) * 60_000, factor=factor, records=records, process_s=process_s, lag=lag)

    older = [at(0, 2, 0, records=1, process_s=100.0), at(1, 2, 90_000)]  # would change the rate and the lag trend
    other_factor = [at(2, 4, 10**7, records=10**6, process_s=0.01)]  # another factor's batches say nothing about this one
    latest = [at(3 + i, 2, lag) for i, lag in enumerate([0, 0, 0, 0, 0, 30_000])]
    # 6 batches over 300 s: input (3000 + 30000) / 300 = 110/s; need = (110 + 500) * 1.25 / 100 = 7.6 (5 batches: 7.9)
    expected = Recommendation(8, "lag 0 -> 30000: need factor 7.6")
    assert recommend(latest, 2, 0, now_ms=NOW, policy=POLICY) == expected
    assert recommend(older + latest[:3] + other_factor + latest[3:], 2, 0, now_ms=NOW, policy=POLICY) == expected


def test_the_cooldown_ends_exactly_cooldown_ms_after_the_last_change():
    lags = [0, 0, 24_000]
    just_inside = recommend(series(2, lags), 2, last_change_ms=NOW - 599_999, now_ms=NOW, policy=POLICY)
    assert just_inside == Recommendation(2, "cool-down: last change 600s ago")
    assert recommend(series(2, lags), 2, last_change_ms=NOW - 600_000, now_ms=NOW, policy=POLICY).factor == 8


@pytest.mark.parametrize("text", ["0 8 * * * -> 0", "0 8 * * * -> -2", "0 8 * * * -> 2; 0 20 * * * -> 0", "0 8 * * * ->"])
def test_a_schedule_to_factor_0_or_below_is_rejected(text):
    with pytest.raises(ValueError, match="expected '<cron expression> -> <factor>'"):
        parse_schedule(text)
