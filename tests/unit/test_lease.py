"""The batch's lease heartbeat with the real SQL store: no renewal lands after the release,
failed renewals are logged, and a lease another owner took is the batch's to learn."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from sqlalchemy.exc import OperationalError

from elasticity.batch.coordinator.lease import LeaseLostError, held_lease
from elasticity.checkpoint.store import CheckpointStore, Lease

JOB, OWNER = "j", "batch@host:1"
TTL_MS = 300  # a renewal every 0.1 s


class _Renewals:
    """The store as the heartbeat sees it: the first acquire (the batch taking its lease) goes straight
    through; each later one (a renewal) runs `before` first. Everything else is the store's own."""

    def __init__(self, store: CheckpointStore, before) -> None:
        self._store, self._before, self._taken = store, before, False
        self.landed = threading.Event()

    def acquire_lease(self, job: str, owner: str, ttl_ms: int) -> Lease:
        if self._taken:
            self._before()
        self._taken = True
        lease = self._store.acquire_lease(job, owner, ttl_ms)
        self.landed.set()
        return lease

    def __getattr__(self, name: str):
        return getattr(self._store, name)


@pytest.fixture
def store(tmp_path) -> CheckpointStore:
    return CheckpointStore(f"sqlite:///{tmp_path / 'store.db'}")


def test_a_renewal_under_way_lands_before_the_release_not_after(store):
    renewing, go = threading.Event(), threading.Event()

    def held_up() -> None:
        renewing.set()
        assert go.wait(10)

    renewals = _Renewals(store, held_up)
    with held_lease(renewals, JOB, OWNER, TTL_MS):
        assert renewing.wait(5)  # a renewal is under way, held up in the store
        renewals.landed.clear()
        threading.Timer(0.3, go.set).start()  # it lands while the batch is leaving the block
    assert renewals.landed.wait(5)
    assert store.lease(JOB) is None  # released after the renewal landed: the next rescale may take it at once
    store.acquire_lease(JOB, "rescaler", 60_000)


def test_a_failed_renewal_is_logged_and_the_next_one_renews(store, caplog):
    failures = iter([OperationalError("UPDATE jobs", {}, Exception("database is locked"))])

    def flaky() -> None:
        if (e := next(failures, None)) is not None:
            raise e

    renewals = _Renewals(store, flaky)
    with caplog.at_level(logging.WARNING, logger="elasticity"), held_lease(renewals, JOB, OWNER, TTL_MS) as heartbeat:
        taken = heartbeat.lease.expires_ms
        renewals.landed.clear()
        assert renewals.landed.wait(5)  # the renewal after the failed one
        heartbeat.check()  # a failed renewal alone loses nothing: the lease was still ours
        assert heartbeat.lease.expires_ms > taken
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert f"job {JOB!r}: lease renewal by {OWNER!r} failed" in warning.getMessage()
    assert "database is locked" in warning.getMessage()
    assert store.lease(JOB) is None


def test_a_lease_taken_by_another_owner_stops_the_renewals_and_the_batch_learns_it(tmp_path, caplog):
    now = [0]
    store = CheckpointStore(f"sqlite:///{tmp_path / 'store.db'}", clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="elasticity"), held_lease(store, JOB, OWNER, TTL_MS) as heartbeat:
        now[0] = 10 * TTL_MS  # the batch's lease expired unrenewed (say, its process was paused)...
        store.acquire_lease(JOB, "rescaler", 60_000)  # ...and a rescale took it
        deadline = time.monotonic() + 5
        while "lost its lease" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)  # the next renewal finds the rescaler's lease
        with pytest.raises(LeaseLostError, match="lost its lease"):
            heartbeat.check()
    assert f"job {JOB!r}: batch owner {OWNER!r} lost its lease" in caplog.text and "rescaler" in caplog.text
    assert store.lease(JOB).owner == "rescaler"  # the batch's release leaves the rescaler's lease alone


def test_a_run_waits_for_another_owners_lease_up_to_its_bound_and_a_superseded_one_never_waits(store, caplog):
    from elasticity.batch.coordinator.lease import take_lease
    from elasticity.checkpoint.store import LeaseHeldError, SupersededError

    store.acquire_lease(JOB, "rescale@host:1", 60_000)
    threading.Timer(0.5, store.release_lease, (JOB, "rescale@host:1")).start()
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="elasticity"):
        assert take_lease(store, JOB, OWNER, TTL_MS, wait_s=10).owner == OWNER
    assert 0.4 < time.monotonic() - started < 5
    said = [r.getMessage() for r in caplog.records]
    assert sum("waits for it, up to 10 s (job.lease.wait.ms)" in m for m in said) == 1 and "'rescale@host:1'" in said[0]
    store.release_lease(JOB, OWNER)

    store.acquire_lease(JOB, "rescale@host:1", 60_000)
    started = time.monotonic()
    with pytest.raises(LeaseHeldError):
        take_lease(store, JOB, OWNER, TTL_MS, wait_s=0.3)
    assert 0.25 < time.monotonic() - started < 3  # bounded

    store.release_lease(JOB, "rescale@host:1")
    store.acquire_lease(JOB, "run#1#0a0b0c0d", TTL_MS)  # an attempt whose lease expires while it is paused
    time.sleep(TTL_MS / 1000 + 0.1)
    CheckpointStore(store.url).acquire_lease(JOB, "run#2#1a2b3c4d", 60_000)  # its retry took over
    started = time.monotonic()
    with pytest.raises(SupersededError):
        take_lease(store, JOB, "run#1#0a0b0c0d", TTL_MS, wait_s=10)
    assert time.monotonic() - started < 1


def test_a_rescale_renews_its_lease_through_a_state_move_longer_than_the_lease(tmp_path):
    """With a 1 s lease and a move that takes 2.5 s, no other owner may take the lease meanwhile, and the new
    generation is written."""
    from elasticity import faults
    from elasticity.batch.coordinator.job_coordinator import JobCoordinator
    from elasticity.checkpoint.store import LeaseHeldError
    from elasticity.config import validate
    from elasticity.jobmodel.model import SystemStream
    from tests.support.memory import MemoryInputs

    inputs = MemoryInputs()
    inputs.create(SystemStream("kafka", "orders"), 2)
    config = validate({"job.name": "j", "task.inputs": "kafka.orders", "job.elasticity.factor": "2", "job.lease.ttl.ms": "1000"})
    store = CheckpointStore(f"sqlite:///{tmp_path / 'store.db'}")
    coordinator = JobCoordinator(config, store, inputs)
    coordinator.initialize("first")
    refused = []

    def slow_move(point: str) -> None:
        if point == "rescale.lease_acquired":
            time.sleep(2.5)  # 2.5 TTLs
            try:
                store.acquire_lease("j", "intruder", 1000)
            except LeaseHeldError as e:
                refused.append(e)

    with faults.hook(slow_move):
        plan = coordinator.rescale(4, "rescaler")
    assert refused and plan.factor == 4 and store.generation("j").factor == 4
    assert store.lease("j") is None  # released after


def test_a_later_try_of_a_run_takes_the_lease_over_at_once_and_fences_the_earlier_one(store):
    """Airflow starts try 2 only once try 1 ended or was declared lost: its lease is a dead attempt's (or a
    zombie's), so try 2 takes it over without waiting out its TTL; try 1 is fenced from then on. Another run,
    or an earlier try, still finds the lease held."""
    from elasticity.checkpoint.store import LeaseHeldError, SupersededError
    from elasticity.checkpoint.store.attempt_token import attempt_owner

    first = attempt_owner("manual__run", 1)
    held = store.acquire_lease(JOB, first, 600_000)
    with pytest.raises(LeaseHeldError):
        store.acquire_lease(JOB, attempt_owner("scheduled__other", 2), 600_000)
    second = attempt_owner("manual__run", 2)
    taken = store.acquire_lease(JOB, second, 600_000)
    assert taken.epoch == held.epoch + 1
    with pytest.raises(SupersededError):
        store.acquire_lease(JOB, first, 600_000)  # its renewal
    with pytest.raises(LeaseHeldError):
        store.acquire_lease(JOB, attempt_owner("manual__run", 1), 600_000)  # an earlier try never takes it back
    with pytest.raises(LeaseHeldError):
        store.acquire_lease(JOB, "manual__run", 600_000)  # no attempt token: no takeover
