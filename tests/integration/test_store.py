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
    SupersededError,
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
        t.task_name: TaskCheckpoint(
            task_name=t.task_name, offsets={s: offset for s in t.system_stream_partitions}, watermarks=marks or {}
        )
        for t in m.tasks()
    }


def first_generation(store, job, m, offset=0, owner="me"):
    store.acquire_lease(job, owner, 10_000)
    gen = store.write_generation(job, 0, 2, model=m, compute=lambda old: cps_at(m, offset), owner=owner, reason="first")
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
        store.write_generation(job_name, 1, 4, model=m4, compute=lambda old: cps_at(m4, 3), owner="rescaler", reason="rescale")
    store.write_generation(
        job_name, 1, 4, model=m4, compute=lambda old: cps_at(m4, 3), owner="rescaler", reason="rescale", abandon_pending=True
    )
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
        store.write_generation(job_name, 1, 2, model=m, compute=lambda old: old, owner="me", reason="x")
    store.acquire_lease(job_name, "me", 10_000)
    with pytest.raises(StaleGenerationError, match="current generation is 1"):
        store.write_generation(job_name, 7, 2, model=m, compute=lambda old: old, owner="me", reason="x")
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


def test_an_attempt_superseded_is_refused_also_after_its_successor_expired(store, store_url, job_name, clock):
    """Two attempts, two stores (two processes): the second takes the lease at the next epoch; the first, paused
    meanwhile, can neither commit, nor renew, nor release the second's lease, also once that lease expired."""
    m = model()
    first_generation(store, job_name, m)
    other = CheckpointStore(store_url, history_size=3, clock=clock)
    try:
        a = store.acquire_lease(job_name, "run#1#aaaaaaaa", 5_000)
        plan = store.plan_batch(job_name, 1, (OffsetRange(SSP0, 0, 1),), owner="run#1#aaaaaaaa")
        clock.now += 6_000
        b = other.acquire_lease(job_name, "run#2#bbbbbbbb", 5_000)
        assert b.epoch == a.epoch + 1
        clock.now += 6_000
        with pytest.raises(SupersededError, match=f"epoch {a.epoch}.*epoch {b.epoch}.*run#2#bbbbbbbb"):
            store.commit_batch(plan, cps_at(m, 1).values(), owner="run#1#aaaaaaaa")
        with pytest.raises(SupersededError):
            store.acquire_lease(job_name, "run#1#aaaaaaaa", 5_000)
        assert not store.release_lease(job_name, "run#1#aaaaaaaa")
        assert other.acquire_lease(job_name, "run#2#bbbbbbbb", 5_000).epoch == b.epoch  # renewed, expired or not
        other.commit_batch(plan, cps_at(m, 1).values(), owner="run#2#bbbbbbbb")
    finally:
        other.close()


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
    store.write_generation(job_name, 0, 1, model=m, compute=lambda old: cps_at(m, 5, marks), owner="me", reason="first")
    for versions in [(1,), (2,)]:
        assert store.checkpoints(job_name, 1, versions)[TaskName("Partition 0")].watermarks == marks


def test_v1_only_job_upgrades_to_v2_and_rolls_back(store, job_name, clock):
    m = model(factor=1, partitions=1)
    store.acquire_lease(job_name, "me", 10_000)
    store.write_generation(
        job_name, 0, 1, model=m, compute=lambda old: cps_at(m, 5), owner="me", reason="first", write_versions=(1,)
    )
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


DAY = 86_400_000


def committed_batches(store, job, m, count, offset=0):
    """`count` batches planned and committed, a day apart on the store's clock; returns their ids."""
    ids = []
    for i in range(count):
        plan = store.plan_batch(job, store.generation(job).number, (OffsetRange(SSP0, offset + i, offset + i + 1),))
        store.commit_batch(plan, cps_at(m, offset + i + 1).values())
        store.record_metrics(job, plan.batch_id, plan.generation, f'{{"batch_id": {plan.batch_id}}}')
        ids.append(plan.batch_id)
        store.clock.now += DAY
    return ids


def test_retention_keeps_the_latest_plan_pending_plans_and_what_data_quality_has_yet_to_validate(store, job_name, clock):
    m = model(factor=1, partitions=1)
    first_generation(store, job_name, m)
    ids = committed_batches(store, job_name, m, 12)
    pending = store.plan_batch(job_name, 1, (OffsetRange(SSP0, 12, 13),))
    week_ago = clock.now - 7 * DAY  # batches 1..5 ended more than a week ago
    assert store.expire_plans(job_name, before_ms=week_ago, through_batch=3) == 3  # validated through 3: only 1..3
    assert store.plan(job_name, 3) is None and store.plan(job_name, 4)[1] == "committed"
    assert store.expire_plans(job_name, before_ms=clock.now + DAY, through_batch=99) == 9  # 4..12: the latest is pending
    assert [p.batch_id for p in store.plans(job_name)] == [pending.batch_id]
    assert store.pending_plan(job_name) == pending
    store.commit_batch(pending, cps_at(m, 13).values())
    assert store.expire_plans(job_name, before_ms=clock.now + DAY, through_batch=99) == 0  # the latest stays
    assert store.plan_batch(job_name, 1, ()).batch_id == pending.batch_id + 1 == ids[-1] + 2  # ids keep growing

    assert store.expire_metrics(job_name, before_ms=week_ago) == 5
    assert [r["batch_id"] for r in store.metrics(job_name)] == ids[5:]
    assert store.expire_metrics(job_name, before_ms=clock.now + DAY) == 6  # the latest batch's stays (the page's)
    assert [r["batch_id"] for r in store.metrics(job_name)] == ids[-1:]


def test_metrics_and_generations_read_a_page_at_a_time(store, job_name):
    m = model(factor=1, partitions=1)
    first_generation(store, job_name, m)
    committed_batches(store, job_name, m, 7)
    assert [r["batch_id"] for r in store.metrics(job_name, limit=3)] == [5, 6, 7]
    assert [r["batch_id"] for r in store.metrics(job_name, limit=3, before=5)] == [2, 3, 4]
    assert [r["batch_id"] for r in store.metrics(job_name, limit=3, before=2)] == [1]
    assert [g.number for g in store.generations(job_name, limit=5)] == [1]


def test_closed_transactional_ids_expire_open_ones_stay(store, job_name, clock):
    store.open_transactional_id(job_name, "t-closed-old", "kafka")
    store.open_transactional_id(job_name, "t-open-old", "kafka")
    store.close_transactional_ids(job_name, ["t-closed-old"])
    clock.now += 2 * 3_600_000
    store.open_transactional_id(job_name, "t-closed-new", "kafka")
    store.close_transactional_ids(job_name, ["t-closed-new"])
    assert store.expire_transactional_ids(job_name, before_ms=clock.now - 3_600_000) == 1
    assert store.open_transactional_ids(job_name) == [("t-open-old", "kafka")]
    assert store.expire_transactional_ids(job_name, before_ms=clock.now + 1) == 1  # now the newer closed one too


def rescale_to(store, job, factor, offset):
    m = model(factor=factor)
    expected = store.generation(job).number
    store.acquire_lease(job, "rescaler", 10_000)
    store.write_generation(
        job, expected, factor, model=m, compute=lambda old: cps_at(m, offset), owner="rescaler", reason=f"to {factor}"
    )
    store.release_lease(job, "rescaler")
    return m


def test_old_generations_lose_their_checkpoints_and_later_their_rows_never_the_first_current_or_previous(store, job_name, clock):
    first_generation(store, job_name, model(2), offset=1)
    for n, factor in enumerate((4, 8, 2, 4), start=2):
        clock.now += DAY
        m = rescale_to(store, job_name, factor, offset=n)
        store.record_rescale_metrics(job_name, n, "{}")
    assert store.generation(job_name).number == 5
    assert store.expire_checkpoints(job_name) > 0  # of generations 1..3
    assert [bool(store.checkpoints(job_name, g)) for g in range(1, 6)] == [False, False, False, True, True]
    assert store.checkpoints(job_name, 5) == cps_at(m, 5)
    assert store.expire_checkpoints(job_name) == 0
    clock.now += DAY
    assert store.expire_generations(job_name, before_ms=clock.now - 3 * DAY - 1) == 1  # generation 2 (3 is too young)
    assert [g.number for g in store.generations(job_name)] == [1, 3, 4, 5]
    assert store.expire_generations(job_name, before_ms=clock.now) == 1  # 3; never 1 (identity), 4 (previous), 5
    assert [g.number for g in store.generations(job_name)] == [1, 4, 5]
    assert store.expire_metrics(job_name, before_ms=clock.now) == 3  # rescale metrics of 2..4, not the latest
    assert [g for g in store.rescale_metrics(job_name)] == [{}]


def test_retention_deletes_in_chunks(store, job_name, clock, monkeypatch):
    from elasticity.checkpoint.store import checkpoint_store

    monkeypatch.setattr(checkpoint_store, "DELETE_CHUNK", 4)
    m = model(factor=1, partitions=1)
    first_generation(store, job_name, m)
    committed_batches(store, job_name, m, 11)
    assert store.expire_plans(job_name, before_ms=clock.now, through_batch=99) == 10
    assert store.expire_metrics(job_name, before_ms=clock.now) == 10
    assert [p.batch_id for p in store.plans(job_name)] == [11]


def test_a_sqlite_store_makes_its_folder(tmp_path):
    """The default store, `$ELASTICITY_HOME/checkpoints.db`, in a new project whose home nothing has made yet."""
    store = CheckpointStore(f"sqlite:///{tmp_path / 'new' / 'home' / 'checkpoints.db'}", history_size=3)
    assert store.generation("job") is None
    assert (tmp_path / "new" / "home" / "checkpoints.db").is_file()


def test_openers_racing_on_a_new_store_all_open_it(empty_store_url):
    """The triggers of several jobs (or a run and the job page) opening a new store at once: each one opens it,
    none is told the store is unreachable because another created a table between its check and its create."""
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_it() -> None:
        try:
            start.wait()
            CheckpointStore(empty_store_url).close()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert CheckpointStore(empty_store_url).generation("job") is None


def test_a_corrupt_row_is_named_by_its_keys(store, job_name):
    """A row that does not decode (edited by hand, cut short) is a CorruptRowError naming the row, never a bare
    JSONDecodeError."""
    from sqlalchemy import update

    from elasticity.checkpoint.store import CorruptRowError
    from elasticity.checkpoint.store.store_schema import checkpoints, generations

    m = model()
    first_generation(store, job_name, m)
    task = sorted(t.task_name.name for t in m.tasks())[0]
    with store.engine.begin() as conn:
        conn.execute(
            update(checkpoints).where(checkpoints.c.job_name == job_name, checkpoints.c.task_name == task).values(payload='{"cut')
        )
    with pytest.raises(
        CorruptRowError, match=rf"checkpoint row \d+ \(job '{job_name}', task '{task}', version \d\) does not decode"
    ):
        store.checkpoints(job_name, 1, (1, 2))
    with store.engine.begin() as conn:
        conn.execute(update(generations).where(generations.c.job_name == job_name).values(job_model="[]"))
    with pytest.raises(CorruptRowError, match=rf"generation row 1 of job '{job_name}' \(its job model\) does not decode"):
        store.generation(job_name)
