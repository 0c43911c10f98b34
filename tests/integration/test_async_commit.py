"""Async commit on a real store: uploads overlap the next batch, skipped commits
fold into the next one, long uploads make the next commit wait, and chained
plans replay in order after a crash."""

import time

import pytest

from elasticity import faults
from elasticity.batch.coordinator.async_commit import AsyncCommitter
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.store import BatchStateError, CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition

S = SystemStream("kafka", "orders")
SSP = SystemStreamPartition("kafka", "orders", 0)


@pytest.fixture
def setup(store_url, job_name):
    store = CheckpointStore(store_url)
    model = build_job_model(validate({"job.name": job_name, "task.inputs": str(S)}), {S: 1})
    (task,) = model.tasks()
    store.acquire_lease(job_name, "me", 60_000)
    store.write_generation(
        job_name,
        0,
        1,
        model=model,
        compute=lambda _: {task.task_name: TaskCheckpoint(task_name=task.task_name, offsets={SSP: 0})},
        owner="me",
        reason="first",
    )
    yield store, job_name, task.task_name
    store.close()


def cp(task, offset):
    return [TaskCheckpoint(task_name=task, offsets={SSP: offset})]


def slow_uploads(seconds):
    return faults.hook(lambda point: time.sleep(seconds) if point == "commit.upload" else None)


def test_skipped_commits_fold_into_the_next_upload(setup):
    store, job, task = setup
    done = []
    committer = AsyncCommitter(
        store,
        (1, 2),
        "me",
        max_delay_ms=10_000,
        timeout_ms=10_000,
        on_committed=lambda plan, covers, ns: done.append((plan.batch_id, covers)),
    )
    with slow_uploads(0.4):
        p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
        assert committer.submit(p1, cp(task, 10)) == "uploading"
        p2 = store.plan_batch(job, 1, (OffsetRange(SSP, 10, 20),), owner="me", after=p1.batch_id)
        assert p2.batch_id == p1.batch_id + 1
        assert committer.submit(p2, cp(task, 20)) == "skipped"
        p3 = store.plan_batch(job, 1, (OffsetRange(SSP, 20, 30),), owner="me", after=p2.batch_id)
        assert committer.submit(p3, cp(task, 30)) == "skipped"
        committer.close()
    assert done == [(p1.batch_id, ()), (p3.batch_id, (p2.batch_id,))]
    assert {store.plan(job, p.batch_id)[1] for p in (p1, p2, p3)} == {"committed"}
    assert store.checkpoints(job, 1)[task].offsets[SSP] == 30


def test_an_upload_older_than_max_delay_makes_the_next_commit_wait(setup):
    store, job, task = setup
    committer = AsyncCommitter(store, (2,), "me", max_delay_ms=0, timeout_ms=10_000)
    with slow_uploads(0.3):
        p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
        committer.submit(p1, cp(task, 10))
        p2 = store.plan_batch(job, 1, (OffsetRange(SSP, 10, 20),), owner="me", after=p1.batch_id)
        assert committer.submit(p2, cp(task, 20)) == "waited"
        committer.close()
    assert committer.waits == 1 and store.checkpoints(job, 1, (2,))[task].offsets[SSP] == 20


def test_chained_plans_replay_in_order_after_a_crash(setup):
    store, job, task = setup
    p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
    p2 = store.plan_batch(job, 1, (OffsetRange(SSP, 10, 20),), owner="me", after=p1.batch_id)
    # the process died with both uploads outstanding: a new run replays the earliest first
    assert store.plan_batch(job, 1, (OffsetRange(SSP, 0, 99),), owner="me") == p1
    store.commit_batch(p1, cp(task, 10), owner="me")
    assert store.plan_batch(job, 1, (OffsetRange(SSP, 10, 99),), owner="me") == p2


def test_nothing_commits_behind_a_failed_upload(setup):
    store, job, task = setup

    def lost(cps, timeout_s):
        if cps[0].offsets[SSP] == 10:
            time.sleep(0.3)
            raise RuntimeError("batch 1's upload was lost")

    committer = AsyncCommitter(store, (2,), "me", max_delay_ms=10_000, timeout_ms=10_000, await_state=lost)
    p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
    assert committer.submit(p1, cp(task, 10)) == "uploading"
    p2 = store.plan_batch(job, 1, (OffsetRange(SSP, 10, 20),), owner="me", after=p1.batch_id)
    assert committer.submit(p2, cp(task, 20)) == "skipped"
    p3 = store.plan_batch(job, 1, (OffsetRange(SSP, 20, 30),), owner="me", after=p2.batch_id)
    assert committer.submit(p3, cp(task, 30)) == "skipped"
    with pytest.raises(RuntimeError, match="lost"):
        committer.flush()  # the run's last commit hears of the failure
    committer.close()  # as the run ends: the batches deferred behind it stay pending
    with pytest.raises(RuntimeError, match="lost"):
        committer.submit(p3, cp(task, 30))
    assert [p.batch_id for p in store.plans(job, "planned")] == [p1.batch_id, p2.batch_id, p3.batch_id]
    assert store.pending_plan(job) == p1  # the next run replays batch 1 first


def test_a_batch_cannot_commit_before_an_earlier_pending_one(setup):
    store, job, task = setup
    p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
    p2 = store.plan_batch(job, 1, (OffsetRange(SSP, 10, 20),), owner="me", after=p1.batch_id)
    with pytest.raises(BatchStateError, match=f"before batch {p1.batch_id}"):
        store.commit_batch(p2, cp(task, 20), owner="me")
    assert store.checkpoints(job, 1)[task].offsets[SSP] == 0 and store.pending_plan(job) == p1
    store.commit_batch(p2, cp(task, 20), owner="me", covers=(p1.batch_id,))  # folded: both at once
    assert {store.plan(job, p.batch_id)[1] for p in (p1, p2)} == {"committed"}


def test_upload_errors_surface_at_the_next_commit(setup):
    store, job, task = setup
    committer = AsyncCommitter(store, (2,), "me", max_delay_ms=0, timeout_ms=10_000)
    p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
    with faults.raise_at("commit.plan_marked"):
        committer.submit(p1, cp(task, 10))
        with pytest.raises(faults.InjectedFault):
            committer.flush()
    assert store.pending_plan(job) == p1  # nothing half-written; the batch replays


def test_an_upload_commits_once_the_next_plan_is_written_or_after_the_gates_wait(setup):
    """The next batch's plan goes first: the commit, on the upload thread, waits for the gate the engine
    sets once that plan is written; with no gate set it goes after GATE_S all the same."""
    import threading

    from elasticity.batch.coordinator import async_commit

    store, job, task = setup
    done: list[float] = []
    gate = threading.Event()
    committer = AsyncCommitter(
        store, (1, 2), "me", max_delay_ms=10_000, timeout_ms=10_000, on_committed=lambda *a: done.append(time.monotonic())
    )
    p1 = store.plan_batch(job, 1, (OffsetRange(SSP, 0, 10),), owner="me")
    committer.submit(p1, cp(task, 10), gate)
    time.sleep(0.3)
    assert not done and store.checkpoints(job, 1)[task].offsets[SSP] == 0  # waiting for the next plan
    store.plan_batch(job, 1, (OffsetRange(SSP, 10, 20),), owner="me", after=p1.batch_id)
    opened = time.monotonic()
    gate.set()
    committer.flush()
    assert done and done[0] >= opened and store.checkpoints(job, 1)[task].offsets[SSP] == 10

    (p2,) = [p for p in [store.pending_plan(job)] if p is not None]
    start = time.monotonic()
    committer.submit(p2, cp(task, 20), threading.Event())
    committer.close()  # nobody sets the gate: the commit goes after GATE_S
    assert async_commit.GATE_S <= time.monotonic() - start < async_commit.GATE_S + 5
    assert store.checkpoints(job, 1)[task].offsets[SSP] == 20
