"""The job's lease while batches run, kept alive like a Samza container's heartbeat to its coordinator.

The lease is taken, renewed on a thread every third of `job.lease.ttl.ms` (a batch may run longer than
the TTL), and released. The thread is stopped and joined before the release: a renewal still under way
would otherwise land after it and hold the lease for a whole TTL, blocking the next rescale. A renewal
that fails is logged and tried again; one that finds another owner holding the lease (it expired
unrenewed and was taken) ends the renewals, and the batch learns it from `check()`. Commits are fenced
by the store in any case (by the lease's owner and the generation): a lost lease costs work, not data.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from tenacity import RetryCallState, Retrying, retry_if_exception_type, retry_if_not_exception_type

from elasticity.checkpoint.store import CheckpointStore, Lease, LeaseHeldError, StoreError, SupersededError

log = logging.getLogger(__name__)


class LeaseLostError(LeaseHeldError):
    """Another owner took the job's lease while this batch ran: what it commits would be fenced."""


class LeaseHeartbeat:
    """Renews `lease` every third of `ttl_ms` until the block ends; the renewal thread is joined on exit."""

    def __init__(self, store: CheckpointStore, lease: Lease, ttl_ms: int) -> None:
        self._store = store
        self._lease = lease  # as the last renewal that landed left it
        self._ttl_ms = ttl_ms
        self._lost: LeaseHeldError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-heartbeat-{lease.job_name}", daemon=True)

    @property
    def lease(self) -> Lease:
        """The lease as last renewed (its expiry moves with each renewal)."""
        return self._lease

    def _run(self) -> None:
        while not self._stop.wait(self._ttl_ms / 3000) and self._lost is None:
            self._renew()

    def _renew(self) -> None:
        """One renewal. Another owner holding the lease ends them (renewing after its release would take the
        lease back behind a rescale); any other failure is logged and retried a third of a TTL later."""
        job, owner = self._lease.job_name, self._lease.owner
        try:
            self._lease = self._store.acquire_lease(job, owner, self._ttl_ms)
        except LeaseHeldError as e:
            self._lost = e
            log.warning("job %r: batch owner %r lost its lease, renewals stop and its commit will be fenced: %s", job, owner, e)
        except Exception as e:
            left_s = (self._lease.expires_ms - self._store.clock()) / 1000
            log.warning(
                "job %r: lease renewal by %r failed, retried in %.1f s (the lease expires in %.1f s): %s",
                job,
                owner,
                self._ttl_ms / 3000,
                left_s,
                e,
                exc_info=True,
            )

    def check(self) -> None:
        """Raises LeaseLostError once another owner holds the lease: a batch must not start work it cannot commit."""
        if self._lost is not None:
            raise LeaseLostError(f"job {self._lease.job_name!r}: batch owner {self._lease.owner!r} lost its lease: {self._lost}")

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stops the renewals and waits for one under way, so that none lands after the lease is released."""
        self._stop.set()
        self._thread.join()


def take_lease(store: CheckpointStore, job: str, owner: str, ttl_ms: int, *, wait_s: float = 0.0) -> Lease:
    """The job's lease; while another owner holds it (a rescale, another run's attempt until its lease expires;
    a later try of the same run takes it over at once),
    tried again for up to `wait_s`, said once in the log. A superseded owner never waits: it may not run."""
    deadline = time.monotonic() + wait_s

    def waiting(state: RetryCallState) -> None:
        if state.attempt_number == 1:
            assert state.outcome is not None
            log.info(
                "job %r: %s; %r waits for it, up to %.0f s (job.lease.wait.ms)", job, state.outcome.exception(), owner, wait_s
            )

    taking = Retrying(
        retry=retry_if_exception_type(LeaseHeldError) & retry_if_not_exception_type(SupersededError),
        stop=lambda _: time.monotonic() >= deadline,
        wait=lambda _: min(1.0, ttl_ms / 3000, max(0.0, deadline - time.monotonic())),
        before_sleep=waiting,
        reraise=True,
    )
    lease = taking(store.acquire_lease, job, owner, ttl_ms)
    if taking.statistics["attempt_number"] > 1:
        log.info("job %r: %r took the lease", job, owner)
    return lease


@contextmanager
def held_lease(store: CheckpointStore, job: str, owner: str, ttl_ms: int, *, wait_s: float = 0.0) -> Iterator[LeaseHeartbeat]:
    """The job's lease for the block: taken (`take_lease`), renewed while the block runs, and released only
    after the heartbeat has stopped. A release the store cannot take (it went away) is logged, not raised: the
    lease expires on its own, and the block's own error, if any, is the one to see."""
    heartbeat = LeaseHeartbeat(store, take_lease(store, job, owner, ttl_ms, wait_s=wait_s), ttl_ms)
    try:
        with heartbeat:
            yield heartbeat
    finally:
        try:
            store.release_lease(job, owner)
        except StoreError as e:
            log.warning("job %r: the lease of %r was not released (it expires in %.0f s): %s", job, owner, ttl_ms / 1000, e)
