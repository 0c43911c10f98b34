"""What one data-quality run checks against, read together: the committed batches, the checkpoints that include
exactly them, and (for the `state` check) the stores' values those checkpoints commit. Batches keep committing
while data quality runs; these reads retry until they agree."""

from __future__ import annotations

import logging
import time

from elasticity import faults
from elasticity.api.stream import ApplicationDescriptor
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.batch_plan import BatchStatus
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig
from elasticity.quality import state_check
from elasticity.state.backends.blob_manager import BlobNotFound

log = logging.getLogger(__name__)
PIN_ATTEMPTS = 30


def consistent_state(store: CheckpointStore, coordinator: JobCoordinator, after: int, attempts: int = 20):
    """The committed batches after `after` and the checkpoints that include exactly them: batches keep
    committing while data quality runs, so read until no commit landed in between."""
    for _ in range(attempts):
        committed = store.plans(coordinator.job, BatchStatus.COMMITTED, after=after)
        generation = coordinator.current()
        cps = coordinator.checkpoints(generation) if generation else {}
        if [p.batch_id for p in store.plans(coordinator.job, BatchStatus.COMMITTED, after=after)] == [
            p.batch_id for p in committed
        ]:
            return committed, generation, cps
        time.sleep(0.5)
    raise RuntimeError(f"job {coordinator.job!r}: batches kept committing while data quality read the checkpoints")


def pinned_state(
    config: JobConfig, store: CheckpointStore, coordinator: JobCoordinator, *, app: ApplicationDescriptor, after: int
):
    """The committed batches (after `after`), their checkpoints and (for the `state` check) the stores' values those
    checkpoints commit, read together, before the slow reads. Each commit deletes the blob-store snapshots beyond
    `stores.<store>.blob.retain`, so a snapshot that vanishes while it is restored was superseded by a newer
    commit: read again from the newer checkpoints. Gone twice under the same checkpoints, it is lost."""
    missing = None
    for _ in range(PIN_ATTEMPTS):
        committed, generation, cps = consistent_state(store, coordinator, after)
        if not app.references or generation is None:
            return committed, generation, cps, None
        faults.point("quality.state.pinned")
        try:
            return committed, generation, cps, state_check.committed_state(config, app, generation, cps)
        except BlobNotFound as e:
            pinned = (generation.number, [p.batch_id for p in committed])
            if pinned == missing:
                raise
            missing = pinned
            log.info("superseded while data quality restored it, reading newer checkpoints: %s", e)
    raise RuntimeError(f"job {coordinator.job!r}: snapshots kept being superseded while data quality restored them")
