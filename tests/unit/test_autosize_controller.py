"""The autosizer's loop, pure: the input rate's window of high watermarks and the confirmation a change must
pass before the rescale starts."""

from hypothesis import given
from hypothesis import strategies as st

from elasticity.scaling.controller import Confirmation, Wanted, WatermarkWindow
from elasticity.scaling.ds2 import HighWatermarks, input_rate

CONFIRM, RETRY = 20_000, 900_000


def test_a_change_fires_once_it_has_held_for_the_confirmation_window():
    c = Confirmation(CONFIRM, RETRY)
    up = Wanted(generation=3, current=2, factor=6, applies=True)
    assert not c.observe(up, 0)
    assert not c.observe(Wanted(3, 2, 7, True), 19_999)  # the factor may firm up on the way: same direction
    assert c.observe(Wanted(3, 2, 7, True), 20_000)
    assert not c.observe(up, 25_000)  # fired for generation 3: quiet until the rescale comes
    assert not c.observe(Wanted(4, 7, 8, True), 26_000)  # the new generation: a new window starts
    assert c.observe(Wanted(4, 7, 8, True), 46_000)


def test_a_burst_shorter_than_the_window_or_a_change_of_mind_fires_nothing():
    c = Confirmation(CONFIRM, RETRY)
    assert not c.observe(Wanted(1, 4, 8, True), 0)
    assert not c.observe(Wanted(1, 4, 4, True), 10_000)  # back to holding: the window starts again
    assert not c.observe(Wanted(1, 4, 8, True), 15_000)
    assert not c.observe(Wanted(1, 4, 2, True), 30_000)  # the other way round: a new window
    assert not c.observe(Wanted(1, 4, 2, True), 49_999)
    assert c.observe(Wanted(1, 4, 2, True), 50_000)


def test_a_held_change_never_fires_and_a_rescale_that_never_came_fires_again():
    c = Confirmation(CONFIRM, RETRY)
    assert not any(c.observe(Wanted(1, 4, 8, False), t) for t in range(0, 100_000, 5000))  # a manual hold
    assert not c.observe(Wanted(1, 4, 8, True), 100_000) and c.observe(Wanted(1, 4, 8, True), 120_000)
    assert not c.observe(Wanted(1, 4, 8, True), 120_000 + RETRY - 1)
    assert not c.observe(Wanted(1, 4, 8, True), 120_000 + RETRY)  # a new window from here
    assert c.observe(Wanted(1, 4, 8, True), 120_000 + RETRY + CONFIRM)


@given(
    st.integers(0, 60_000),
    st.lists(st.tuples(st.integers(1, 3), st.integers(1, 8), st.integers(1, 8), st.booleans()), min_size=1, max_size=40),
    st.integers(100, 10_000),
)
def test_it_fires_only_on_a_change_that_applies_and_held_for_the_window(confirm, polls, step):
    c = Confirmation(confirm, RETRY)
    history: list[tuple[int, Wanted]] = []
    for i, (g, cur, f, applies) in enumerate(polls):
        now, wanted = i * step, Wanted(g, cur, f, applies)
        history.append((now, wanted))
        if c.observe(wanted, now):
            assert applies and f != cur
            direction = (f > cur) - (f < cur)
            start = now  # the polls just before, back to the first that wanted this change on this generation
            for t, h in reversed(history):
                if not (h.applies and h.generation == g and (h.factor > h.current) - (h.factor < h.current) == direction):
                    break
                start = t
            assert now - start >= confirm


@given(st.lists(st.integers(0, 1000), min_size=2, max_size=50), st.integers(1000, 60_000), st.integers(100, 5000))
def test_the_window_keeps_the_latest_readings_and_the_rate_is_what_arrived_over_them(arrivals, window, step):
    w = WatermarkWindow(window)
    total = 0
    for i, n in enumerate(arrivals):
        total += n
        kept = w.add(HighWatermarks(i * step, total))
    assert len(kept) >= 2 and kept[-1].at_ms == (len(arrivals) - 1) * step
    assert kept[-1].at_ms - kept[1].at_ms < window  # nothing older than the window but the reading it starts from
    rate = input_rate(kept)
    assert rate is not None and rate == (kept[-1].records - kept[0].records) / ((kept[-1].at_ms - kept[0].at_ms) / 1000)


def test_a_recreated_topic_starts_the_window_again():
    w = WatermarkWindow(60_000)
    w.add(HighWatermarks(0, 5000))
    w.add(HighWatermarks(1000, 6000))
    assert w.add(HighWatermarks(2000, 10)) == (HighWatermarks(2000, 10),)
