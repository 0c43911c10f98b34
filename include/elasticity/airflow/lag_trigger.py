"""JobLagTrigger: event-driven micro-batches. It runs in Airflow's triggerer as the watcher of the job's
`elastic_lag__<job>` asset (an AssetWatcher) and yields an event, so an asset change and a DAG run, when
records wait for the job.

Every `airflow.microbatch.lag.poll.ms` it reads the job's lag as the operator's probe does (the current
generation's checkpoints against the brokers' high watermarks: metadata only, no record is fetched, nothing is
consumed: the engine reads offset ranges by its own checkpoints) and the job's lease, on a consumer and a store
kept open across polls, in a thread so the triggerer's event loop never blocks. LagWatch decides: once per
burst, never while a run holds the lease. A poll that fails is logged and the next one tried: the trigger never
ends, and a triggerer restart loses nothing, as the next poll sees the same lag.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from elasticity.batch.coordinator.lag import LagProbe, LagThresholds, LagWatch

log = logging.getLogger(__name__)


def open_probe(config_path: str) -> LagProbe:
    """The job's probe, its broker and store resolved as every task of the job resolves them (the connections
    its config names, else the config and the embedded defaults), without touching the triggerer's environment
    (it runs the watchers of every job). Blocking: call it in a thread."""
    from elasticity.airflow.hooks import connected
    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.config import load_config
    from elasticity.kafka.consumer import HeldKafkaInputs

    config = connected(load_config(config_path))
    store = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size)
    return LagProbe(config, store, HeldKafkaInputs(config))


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


class JobLagTrigger(BaseEventTrigger):
    """Fires when records wait for `job` (see the module's doc); the thresholds are the job config's
    `airflow.microbatch.lag.*`, read when the DAG is parsed."""

    def __init__(
        self,
        *,
        job: str,
        config_path: str,
        poll_ms: int = 2000,
        records: int = 1,
        max_wait_ms: int = 60_000,
        cooldown_ms: int = 60_000,
        **_earlier: Any,  # connection ids a trigger serialized by an earlier version holds: the config names them now
    ) -> None:
        super().__init__()
        self.job = job
        self.config_path = config_path
        self.poll_ms = poll_ms
        self.records = records
        self.max_wait_ms = max_wait_ms
        self.cooldown_ms = cooldown_ms

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job": self.job,
                "config_path": self.config_path,
                "poll_ms": self.poll_ms,
                "records": self.records,
                "max_wait_ms": self.max_wait_ms,
                "cooldown_ms": self.cooldown_ms,
            },
        )

    def watch(self) -> LagWatch:
        return LagWatch(LagThresholds(records=self.records, max_wait_ms=self.max_wait_ms, cooldown_ms=self.cooldown_ms))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watch, probe = self.watch(), None
        failing, opened = False, 0.0
        try:
            while True:
                try:
                    changed = _mtime(self.config_path)
                    if probe is not None and changed != opened:  # an edited config (inputs, store) is read again
                        await asyncio.to_thread(probe.close)
                        probe = None
                    if probe is None:
                        opened = changed
                        probe = await asyncio.to_thread(open_probe, self.config_path)
                    seen = await asyncio.to_thread(probe.observe)
                    if failing:
                        self.log.info("job %r: lag readable again", self.job)
                        failing = False
                except Exception as e:  # a broker or store down, a config being edited: the next poll tries again
                    if not failing:
                        self.log.warning("job %r: cannot read the lag (tried every %d ms): %s", self.job, self.poll_ms, e)
                        failing = True
                    if probe is not None:
                        await asyncio.to_thread(probe.close)
                        probe = None
                else:
                    if watch.observe(seen, int(time.time() * 1000)):
                        self.log.info("job %r: %d records wait: starting a run", self.job, seen.lag)
                        yield TriggerEvent({"job": self.job, "lag": seen.lag, "must_run": seen.must_run})
                await asyncio.sleep(self.poll_ms / 1000)
        finally:
            if probe is not None:
                await asyncio.to_thread(probe.close)
