"""JobAutosizeTrigger: the autosizer's loop, event-driven. It runs in Airflow's triggerer as the watcher of the
job's `elastic_autosize__<job>` asset (an AssetWatcher) beside the job's lag watch, for a job with
`job.elasticity.autosize=true`.

Every `job.elasticity.autosize.poll.ms` it reads the job's exact lag and the inputs' high watermarks (the lag
probe's reading: broker metadata and the store, no record fetched; also while a run holds the lease, which a
loaded job's runs do most of the time) and decides with the DS2 controller (`scaling/decision.py`). A change
that holds for `job.elasticity.autosize.confirm.ms` (`scaling/controller.py`) is yielded as an event whose
payload is the decision, its generation and its record: the asset event starts elastic_autosize__<job>, which
applies it through the ordinary rescale path (origin `autosize`, only while that generation is current).
Every read runs in a thread, so the triggerer's event loop never blocks; a poll that fails is logged and the
next one tried, and a restarted triggerer only forgets the readings the next polls take again.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from elasticity.batch.coordinator.lag import lag_report
from elasticity.scaling.controller import Confirmation, Wanted, WatermarkWindow
from elasticity.scaling.decision import Observed, ScaleDecision, decide
from elasticity.scaling.ds2 import HighWatermarks

RETRY_MS = 15 * 60_000  # a fired decision whose rescale never came (the lease waited out, a failed run) fires again
WINDOW_POLLS = 4  # the input rate spans at least this many polls


class AutosizeProbe:
    """The job's config, store and brokers, kept open across polls (blocking: call it in a thread)."""

    def __init__(self, config_path: str) -> None:
        from elasticity.airflow.hooks import connected
        from elasticity.checkpoint.store import CheckpointStore
        from elasticity.config import load_config
        from elasticity.kafka.consumer import HeldKafkaInputs

        self.config = connected(load_config(config_path))
        self.store = CheckpointStore(self.config.checkpoint_store_url(), self.config.checkpoint_history_size)
        self.inputs = HeldKafkaInputs(self.config)
        self.window = WatermarkWindow(max(self.config.autosize_confirm_ms, WINDOW_POLLS * self.config.autosize_poll_ms))

    def decide(self, now_ms: int) -> ScaleDecision | None:
        """The policy's decision from this poll's reading (None: the job has not started)."""
        report = lag_report(self.config, self.store, self.inputs)
        if report.generation is None:
            return None
        watermarks = self.window.add(HighWatermarks(now_ms, report.high))
        current = self.store.generation(self.config.job_name)
        observed = Observed(behind=report.total, exact=report.exact, watermarks=watermarks)
        return decide(self.config, self.store, current, datetime.fromtimestamp(now_ms / 1000, UTC), observed=observed)

    def close(self) -> None:
        self.inputs.close()
        self.store.close()


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


class JobAutosizeTrigger(BaseEventTrigger):
    """Fires when the autosizer's decision has held (see the module's doc); its knobs are read from the job's
    config at every (re)open, so an edited config takes effect at the next poll."""

    def __init__(self, *, job: str, config_path: str, poll_ms: int = 5000, confirm_ms: int = 20_000, **_later: Any) -> None:
        super().__init__()
        self.job = job
        self.config_path = config_path
        self.poll_ms = poll_ms
        self.confirm_ms = confirm_ms

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"job": self.job, "config_path": self.config_path, "poll_ms": self.poll_ms, "confirm_ms": self.confirm_ms},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        probe: AutosizeProbe | None = None
        confirmation = Confirmation(self.confirm_ms, RETRY_MS)
        failing, opened, poll_ms = False, 0.0, self.poll_ms
        try:
            while True:
                now_ms = int(time.time() * 1000)
                try:
                    changed = _mtime(self.config_path)
                    if probe is not None and changed != opened:  # an edited config is read again
                        await asyncio.to_thread(probe.close)
                        probe = None
                    if probe is None:
                        opened = changed
                        probe = await asyncio.to_thread(AutosizeProbe, self.config_path)
                        confirmation.confirm_ms, poll_ms = probe.config.autosize_confirm_ms, probe.config.autosize_poll_ms
                    decision = await asyncio.to_thread(probe.decide, now_ms)
                    if failing:
                        self.log.info("job %r: autosizer reading again", self.job)
                        failing = False
                except Exception as e:  # a broker or store down, a config being edited: the next poll tries again
                    if not failing:
                        self.log.warning("job %r: the autosizer cannot decide (tried every %d ms): %s", self.job, poll_ms, e)
                        failing = True
                    if probe is not None:
                        await asyncio.to_thread(probe.close)
                        probe = None
                else:
                    if decision is not None and decision.origin == "autosize" and decision.generation is not None:
                        wanted = Wanted(decision.generation, decision.current or 0, decision.factor or 0, decision.applies)
                        if confirmation.observe(wanted, now_ms):
                            self.log.info("job %r: autosizer wants factor %s: %s", self.job, decision.factor, decision.reason)
                            yield TriggerEvent(
                                {
                                    "job": self.job,
                                    "generation": decision.generation,
                                    "current": decision.current,
                                    "factor": decision.factor,
                                    "at_ms": now_ms,
                                    "reason": decision.reason,
                                    "decision": decision.record.to_json() if decision.record else None,
                                }
                            )
                await asyncio.sleep(poll_ms / 1000)
        finally:
            if probe is not None:
                await asyncio.to_thread(probe.close)
