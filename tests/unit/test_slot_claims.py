"""Slot claims under a local master: every slot runs exactly once a batch, a process keeps its own slot."""

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.batch.container.slot_claims import claim


@settings(max_examples=50, deadline=None)
@given(slots=st.integers(1, 8), data=st.data())
def test_every_slot_is_claimed_exactly_once_whatever_each_task_prefers(tmp_path_factory, slots, data):
    folder = tmp_path_factory.mktemp("claims") / "batch"
    prefs = data.draw(st.lists(st.one_of(st.none(), st.integers(-1, slots)), min_size=slots, max_size=slots))
    order = data.draw(st.permutations(range(slots)))
    got: dict[int, int] = {}
    barrier = threading.Barrier(slots)

    def task(partition: int) -> None:
        barrier.wait(timeout=10)  # all at once, as Spark's tasks of one stage
        got[partition] = claim(folder, partition, slots, prefs[partition])

    threads = [threading.Thread(target=task, args=(p,)) for p in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got.values()) == list(range(slots))


def test_a_task_takes_the_slot_its_process_ran_and_a_retry_takes_its_partitions_claim(tmp_path):
    folder = tmp_path / "batch"
    assert claim(folder, 0, 2, prefer=1) == 1  # its process holds slot 1's stores
    assert claim(folder, 1, 2, prefer=1) == 0  # taken: the one left
    assert claim(folder, 0, 2, prefer=None) == 1  # partition 0's task again (a retry): its own claim
    assert claim(tmp_path / "next", 1, 2, prefer=None) == 1  # no preference: its own slot
