"""The lease's fencing rules on the real SQL store (SQLite), with a fake clock: every attempt takes the lease
under a token of its own, each take moves the epoch on, a renewal keeps it, and an attempt another one took the
lease from writes nothing any more, also once that one's lease expired or was released."""

from __future__ import annotations

import pickle
import tempfile
import uuid
from dataclasses import dataclass, field
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.store import (
    BatchStateError,
    CheckpointStore,
    LeaseHeldError,
    StaleGenerationError,
    SupersededError,
)
from elasticity.checkpoint.store.attempt_token import AttemptToken, attempt_owner
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from tests.support.examples import examples

S = SystemStream("kafka", "orders")
SSP = SystemStreamPartition("kafka", "orders", 0)
TTL = 1_000
ATTEMPTS = 3


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


MODEL = build_job_model(validate({"job.name": "j", "task.inputs": str(S)}), {S: 1})


def cps(offset: int) -> list[TaskCheckpoint]:
    return [TaskCheckpoint(task_name=t.task_name, offsets={s: offset for s in t.system_stream_partitions}) for t in MODEL.tasks()]


@cache
def _stores() -> tuple[Clock, list[CheckpointStore]]:
    """One SQLite file, one store per attempt (each as its own process would open it), one clock for all."""
    clock = Clock()
    url = f"sqlite:///{tempfile.mkdtemp()}/store.db"
    return clock, [CheckpointStore(url, clock=clock) for _ in range(ATTEMPTS + 1)]


def first_generation(store: CheckpointStore, job: str) -> None:
    owner = attempt_owner("setup")
    store.acquire_lease(job, owner, TTL)
    store.write_generation(job, 0, 1, model=MODEL, compute=lambda _: {c.task_name: c for c in cps(0)}, owner=owner, reason="x")
    assert store.release_lease(job, owner)


def test_an_attempt_token_names_its_run_and_try_and_is_its_own():
    a, b = attempt_owner("scheduled__2024-01-01T00:00:00#x", 2), attempt_owner("scheduled__2024-01-01T00:00:00#x", 2)
    assert a != b
    token = AttemptToken.parse(a)
    assert (token.run, token.try_number, len(token.nonce)) == ("scheduled__2024-01-01T00:00:00#x", 2, 8)
    assert AttemptToken.parse(attempt_owner("batch@h:1")).try_number is None
    with pytest.raises(ValueError):
        AttemptToken.parse("run_id")


def test_a_take_moves_the_epoch_a_renewal_keeps_it():
    clock, (s1, s2, *_) = _stores()
    job = uuid.uuid4().hex
    a, b = attempt_owner("run", 1), attempt_owner("run", 2)
    first = s1.acquire_lease(job, a, TTL)
    assert s1.acquire_lease(job, a, TTL).epoch == first.epoch  # renewed
    clock.now += TTL + 1
    assert s1.acquire_lease(job, a, TTL).epoch == first.epoch  # expired, nobody took it: still a's to renew
    clock.now += TTL + 1
    taken = s2.acquire_lease(job, b, TTL)
    assert taken.epoch == first.epoch + 1
    with pytest.raises(SupersededError) as e:
        s1.acquire_lease(job, a, TTL)
    assert (e.value.owner, e.value.epoch, e.value.superseded_by, e.value.current_epoch) == (a, first.epoch, b, taken.epoch)
    assert str(first.epoch) in str(e.value) and b in str(e.value)
    assert isinstance(pickle.loads(pickle.dumps(e.value)), SupersededError)


def test_a_superseded_attempt_is_refused_after_its_successor_expired_or_released():
    clock, (s1, s2, s3, _) = _stores()
    job = uuid.uuid4().hex
    first_generation(s3, job)
    a, b = attempt_owner("run", 1), attempt_owner("run", 2)
    s1.acquire_lease(job, a, TTL)
    plan = s1.plan_batch(job, 1, (OffsetRange(SSP, 0, 5),), owner=a)
    clock.now += TTL + 1  # a paused: its lease expires
    s2.acquire_lease(job, b, TTL)
    clock.now += TTL + 1  # b dies too: its lease expires, nobody holds the job now
    assert s1.lease(job) is None
    with pytest.raises(SupersededError, match="superseded"):
        s1.commit_batch(plan, cps(5), owner=a)
    with pytest.raises(SupersededError):
        s1.check_lease(job, a)
    assert not s1.release_lease(job, a)  # a's exit leaves b's lease alone
    assert s2.lease(job) is None and s2.release_lease(job, b)
    with pytest.raises(SupersededError):  # released: still superseded
        s1.plan_batch(job, 1, (OffsetRange(SSP, 0, 5),), owner=a)
    assert s3.pending_plan(job) == plan


def test_a_writer_without_a_lease_of_its_store_is_fenced_by_its_name_and_never_past_another_owner():
    clock, (s1, s2, *_) = _stores()
    job = uuid.uuid4().hex
    first_generation(s1, job)
    plan = s1.plan_batch(job, 1, (OffsetRange(SSP, 0, 5),), owner="tool")  # nobody holds the lease
    s2.acquire_lease(job, "other", TTL)
    clock.now += TTL + 1  # its lease expired, but it is still the last owner's
    with pytest.raises(LeaseHeldError):
        s1.commit_batch(plan, cps(5), owner="tool")
    s1.commit_batch(plan, cps(5), owner=None)  # a writer without an owner: while nobody holds an unexpired lease


@dataclass
class Model:
    """What the attempts did, as the lease's rules say it must have gone."""

    taker: int | None = None  # the attempt that took the lease last (a renewal takes nothing)
    took: dict[int, int] = field(default_factory=dict)  # attempt -> how many takes had happened when it took it
    takes: int = 0
    released: set[int] = field(default_factory=set)
    expires: dict[int, int] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)  # batch -> the attempt that committed it

    def superseded(self, i: int) -> bool:
        return i in self.took and self.took[i] != self.takes


OPS = st.lists(
    st.tuples(st.sampled_from(["acquire", "release", "plan", "commit", "tick"]), st.integers(0, ATTEMPTS - 1)),
    max_size=30,
)


@settings(max_examples=examples(60), deadline=None)
@given(OPS)
def test_no_interleaving_lets_a_superseded_attempt_write_or_two_attempts_commit_a_batch(ops):
    clock, stores = _stores()
    job = uuid.uuid4().hex
    first_generation(stores[ATTEMPTS], job)
    owners = [attempt_owner("run", i) for i in range(ATTEMPTS)]
    m = Model()
    offset = 0
    for op, i in ops:
        store, owner = stores[i], owners[i]
        if op == "tick":
            clock.now += (i + 1) * TTL // 2
            continue
        if op == "acquire":
            held = store.holds_lease(job, owner)
            try:
                lease = store.acquire_lease(job, owner, TTL)
            except LeaseHeldError as e:
                if held:
                    assert isinstance(e, SupersededError) and m.superseded(i)
                continue
            if held:
                assert not m.superseded(i)  # a superseded attempt never renews
            else:
                others = [j for j in m.expires if j != i and j not in m.released and not m.superseded(j)]
                # nobody else held an unexpired lease but an earlier try of the run (attempt j is try j), which a
                # later try takes it over from at once
                assert all(m.expires[j] < clock.now or j < i for j in others)
                m.takes += 1
                m.took[i], m.taker = m.takes, i
                m.released.discard(i)
            m.expires[i] = lease.expires_ms
        elif op == "release":
            if store.release_lease(job, owner):
                assert m.taker == i and i not in m.released
                m.released.add(i)
        else:
            if i not in m.took:
                continue  # an owner that never took the lease: fenced by its name alone (the checkpoint tool's way)
            try:
                plan = store.plan_batch(job, 1, (OffsetRange(SSP, offset, offset + 1),), owner=owner)
                if op == "commit":
                    store.commit_batch(plan, cps(plan.ranges[0].end), owner=owner)
                    assert plan.batch_id not in m.committed
                    m.committed[plan.batch_id] = i
                    offset = plan.ranges[0].end
            except (LeaseHeldError, StaleGenerationError, BatchStateError):
                continue
            # a fenced write went through: the writer is the last to take the lease, and has not let it go
            assert m.taker == i and i not in m.released and not m.superseded(i)
    for i in range(ATTEMPTS):
        if stores[i].holds_lease(job, owners[i]):
            stores[i].release_lease(job, owners[i])
