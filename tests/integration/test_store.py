"""The checkpoint store on SQLite and PostgreSQL: generations, fenced commits,
write-ahead plans, leases, history, read versions."""

import pytest

from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.store import (
    BatchStateError,
    CheckpointStore,
    LeaseHeldError,
    PendingBatchError,
    StaleGenerationError,
)
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName

S = SystemStream("kafka", "orders")
SSP0 = SystemStreamPartition("kafka", "orders", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(store_url, clock):
    s = CheckpointStore(store_url, history_size=3, clock=clock)
    yield s
    s.close()


def model(factor=2, partitions=2):
    config = validate({"job.name": "j", "task.inputs": str(S), "job.elasticity.factor": str(factor)})
    return build_job_model(config, {S: partitions})


def cps_at(m, offset, marks=None):
    return {
        t.task_name: TaskCheckpoint(t.task_name, {s: offset for s in t.system_stream_partitions}, marks or {}) for t in m.tasks()
    }


def first_generation(store, job, m, offset=0, owner="me"):
    store.acquire_lease(job, owner, 10_000)
    gen = store.write_generation(job, 0, 2, m, lambda old: cps_at(m, offset), owner, "first")
    store.release_lease(job, owner)
    return gen


def test_first_generation_and_read_back(store, job_name):
    m = model()
    gen = first_generation(store, job_name, m, offset=5)
    assert gen.number == 1 and store.generation(job_name).job_model == m
    read = store.checkpoints(job_name, 1, (2, 1))
    assert set(read) == {t.task_name for t in m.tasks()}
    assert all(set(cp.offsets.values()) == {5} for cp in read.values())


def test_plan_is_written_ahead_and_replayed_until_committed(store, job_name):
    m = model()
    first_generation(store, job_name, m)
    ranges = (OffsetRange(SSP0, 0, 10),)
    plan = store.plan_batch(job_name, 1, ranges)
    retry = store.plan_batch(job_name, 1, (OffsetRange(SSP0, 0, 99),))  # a retry with other ranges gets the same plan
    assert retry == plan and retry.ranges == ranges
    store.commit_batch(plan, cps_at(m, 10).values())
    with pytest.raises(BatchStateError, match="already committed"):
        store.commit_batch(plan, cps_at(m, 20).values())
    assert store.plan_batch(job_name, 1, ranges).batch_id == plan.batch_id + 1
    assert set(next(iter(store.checkpoints(job_name, 1).values())).offsets.values()) == {10}


def test_a_writer_of_an_older_generation_is_fenced_and_changes_nothing(store, job_name):
    m2 = model(2)
    first_generation(store, job_name, m2, offset=3)
    stale_plan = store.plan_batch(job_name, 1, (OffsetRange(SSP0, 3, 10),))
    chained = store.plan_batch(job_name, 1, (OffsetRange(SSP0, 10, 12),), after=stale_plan.batch_id)  # async commit's
    store.acquire_lease(job_name, "rescaler", 10_000)
    m4 = model(4)
    with pytest.raises(PendingBatchError, match=f"batch {stale_plan.batch_id}"):
        store.write_generation(job_name, 1, 4, m4, lambda old: cps_at(m4, 3), "rescaler", "rescale")
    store.write_generation(job_name, 1, 4, m4, lambda old: cps_at(m4, 3), "rescaler", "rescale", abandon_pending=True)
    store.release_lease(job_name, "rescaler")
    before = store.checkpoints(job_name, 2)
    with pytest.raises(StaleGenerationError, match="generation 1, but the current generation is 2"):
        store.commit_batch(stale_plan, cps_at(m2, 10).values())
    with pytest.raises(StaleGenerationError):
        store.plan_batch(job_name, 1, ())
    assert store.checkpoints(job_name, 2) == before
    assert store.checkpoints(job_name, 1) == cps_at(m2, 3)  # the old generation is kept, unchanged
    # every pending plan of the old generation: one left planned would be replayed, and fenced, at every run
    assert [store.plan(job_name, p.batch_id)[1] for p in (stale_plan, chained)] == ["abandoned", "abandoned"]
    assert store.pending_plan(job_name) is None


def test_rescale_needs_the_lease_and_the_expected_generation(store, job_name):
    m = model()
    first_generation(store, job_name, m)
    with pytest.raises(LeaseHeldError):  # nobody holds it: writing a generation requires holding it
        store.write_generation(job_name, 1, 2, m, lambda old: old, "me", "x")
    store.acquire_lease(job_name, "me", 10_000)
    with pytest.raises(StaleGenerationError, match="current generation is 1"):
        store.write_generation(job_name, 7, 2, m, lambda old: old, "me", "x")
    assert store.generation(job_name).number == 1


def test_lease_excludes_others_until_released_or_expired(store, job_name, clock):
    store.acquire_lease(job_name, "a", 5_000)
    assert store.acquire_lease(job_name, "a", 5_000).owner == "a"  # renew
    with pytest.raises(LeaseHeldError, match="leased by 'a'"):
        store.acquire_lease(job_name, "b", 5_000)
    clock.now += 6_000
    assert store.lease(job_name) is None
    assert store.acquire_lease(job_name, "b", 5_000).owner == "b"  # expired: b takes it
    assert not store.release_lease(job_name, "a")
    assert store.release_lease(job_name, "b")
    assert store.acquire_lease(job_name, "c", 5_000).owner == "c"


def test_a_batch_is_fenced_while_another_owner_holds_the_lease(store, job_name):
    m = model()
    first_generation(store, job_name, m)
    plan = store.plan_batch(job_name, 1, (), owner="batch")
    store.acquire_lease(job_name, "rescaler", 10_000)
    with pytest.raises(LeaseHeldError, match="rescaler"):
        store.commit_batch(plan, cps_at(m, 1).values(), owner="batch")


def test_history_keeps_the_last_n_per_task_and_version(store, job_name):
    m = model(factor=1, partitions=1)
    first_generation(store, job_name, m)
    for i in range(1, 6):
        plan = store.plan_batch(job_name, 1, ())
        store.commit_batch(plan, cps_at(m, i * 10).values(), write_versions=(1, 2))
    task = TaskName("Partition 0")
    for version in (1, 2):
        history = store.checkpoint_history(job_name, task, version)
        assert [cp.offsets[SSP0] for cp in history] == [50, 40, 30]


def test_watermarks_survive_the_store(store, job_name):
    m = model(factor=1, partitions=1)
    marks = {SSP0: (Watermark(4, 1, 99),)}
    store.acquire_lease(job_name, "me", 10_000)
    store.write_generation(job_name, 0, 1, m, lambda old: cps_at(m, 5, marks), "me", "first")
    for versions in [(1,), (2,)]:
        assert store.checkpoints(job_name, 1, versions)[TaskName("Partition 0")].watermarks == marks


def test_v1_only_job_upgrades_to_v2_and_rolls_back(store, job_name, clock):
    m = model(factor=1, partitions=1)
    store.acquire_lease(job_name, "me", 10_000)
    store.write_generation(job_name, 0, 1, m, lambda old: cps_at(m, 5), "me", "first", write_versions=(1,))
    store.release_lease(job_name, "me")
    task = TaskName("Partition 0")
    # upgrade: read 2,1 while only V1 exists -> keeps its place
    assert store.checkpoints(job_name, 1, (2, 1))[task].offsets[SSP0] == 5
    plan = store.plan_batch(job_name, 1, ())
    store.commit_batch(plan, cps_at(m, 9).values(), write_versions=(1, 2))
    assert store.checkpoints(job_name, 1, (2, 1))[task].offsets[SSP0] == 9
    # rollback to V1-only reading: dual write kept V1 current
    assert store.checkpoints(job_name, 1, (1,))[task].offsets[SSP0] == 9
    # V2 reader after a long V1-only stretch: the newer V1 wins past the live max age
    clock.now += 700_000
    plan = store.plan_batch(job_name, 1, ())
    store.commit_batch(plan, cps_at(m, 12).values(), write_versions=(1,))
    assert store.checkpoints(job_name, 1, (2, 1), live_max_age_ms=600_000)[task].offsets[SSP0] == 12
    assert store.checkpoints(job_name, 1, (2, 1), live_max_age_ms=800_000)[task].offsets[SSP0] == 9
