"""Lag of a job as it stands: the current generation's checkpoints against the
brokers' high watermarks, with no Spark. It decides whether a run has anything
to do (a run with nothing to read ends in seconds) and is what the job page
shows, so that right after a rescale every new virtual task shows its real lag.
Both the store and the brokers answer it or fail fast, before any Spark starts.

The records behind are exact after a merge too: the records above the slowest virtual task's offset that
some task has processed already are counted by the batches and carried here (`batch.coordinator.behind`);
where that count is unknown the figure is an upper bound and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from elasticity.batch.coordinator.behind import DoneAhead, apart, carried, recorded
from elasticity.batch.coordinator.job_coordinator import Inputs, JobCoordinator
from elasticity.batch.coordinator.planning import start_offsets
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import JobConfig
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.jobmodel.object_mapper import ssp_to_key


@dataclass(frozen=True, kw_only=True)
class LagReport:
    job: str
    generation: int | None  # None: the job has not started (its first run creates generation 1)
    factor: int | None
    pending_batch: int | None = None  # a planned batch that did not commit: the next run replays it
    per_sspkb: dict[str, int] = field(default_factory=dict)  # each virtual task's SSPKb: high watermark - its offset
    # each input partition: its end minus its slowest virtual task's offset; exact, but at most for those `apart`
    per_ssp: dict[str, int] = field(default_factory=dict)
    apart: tuple[str, ...] = ()  # partitions whose virtual tasks stand at different offsets, or skip a merge's watermarks
    done_ahead: int = 0  # records above those offsets already processed (a merge's watermarks, a faster sibling)
    exact: bool = True  # False: `done_ahead` is unknown, taken as 0, and `total` is an upper bound
    new_partitions: tuple[str, ...] = ()  # input partitions the current job model does not have yet
    committed: int = 0  # the sum of the committed start offsets: it moves when a batch commits
    high: int = 0  # the inputs' high watermarks summed over their partitions: records that ever arrived

    @property
    def total(self) -> int:
        """The records left to process, each counted once (at most that many when not `exact`)."""
        return max(0, sum(self.per_ssp.values()) - self.done_ahead)

    @property
    def has_work(self) -> bool:
        return self.generation is None or self.pending_batch is not None or self.total > 0 or bool(self.new_partitions)

    def describe(self) -> str:
        if self.generation is None:
            return f"job {self.job!r} has no generation yet: the first run creates it"
        lag = f"{self.total}" if self.exact else f"at most {self.total}"
        parts = [f"job {self.job!r} generation {self.generation} (factor {self.factor}): lag {lag}"]
        if self.pending_batch is not None:
            parts.append(f"batch {self.pending_batch} planned but not committed (it will be replayed)")
        if self.new_partitions:
            parts.append(f"new input partitions {', '.join(self.new_partitions)}")
        return "; ".join(parts)


def lag_report(config: JobConfig, store: CheckpointStore, inputs: Inputs) -> LagReport:
    coordinator = JobCoordinator(config, store, inputs)
    generation = coordinator.current()  # the store answers...
    counts = inputs.partition_counts(config.inputs)  # ...and so do the brokers, even for a job's first run
    if generation is None:
        return LagReport(job=config.job_name, generation=None, factor=None)
    pending = store.pending_plan(config.job_name)
    cps = coordinator.checkpoints(generation)
    known = {s.without_key_bucket() for cp in cps.values() for s in cp.offsets}
    wanted = {SystemStreamPartition(ss.system, ss.stream, p) for ss, n in counts.items() for p in range(n)}
    high = inputs.offsets(sorted(known), "upcoming")
    per_sspkb = {
        ssp_to_key(ssp): max(0, high[ssp.without_key_bucket()] - offset)
        for cp in cps.values()
        for ssp, offset in cp.offsets.items()
    }
    starts = start_offsets(cps.values())
    per_ssp = {ssp_to_key(ssp): max(0, high[ssp] - start) for ssp, start in starts.items()}
    done = done_ahead(store, config.job_name, generation.number, cps.values())
    return LagReport(
        job=config.job_name,
        generation=generation.number,
        factor=generation.factor,
        pending_batch=pending.batch_id if pending else None,
        per_sspkb=per_sspkb,
        per_ssp=per_ssp,
        new_partitions=tuple(ssp_to_key(s) for s in sorted(wanted - known)),
        committed=sum(starts.values()),
        high=sum(high.values()),
        apart=tuple(ssp_to_key(s) for s in sorted(apart(cps.values()))),
        done_ahead=done.records,
        exact=done.exact,
    )


def done_ahead(store: CheckpointStore, job: str, generation: int, checkpoints: Iterable[TaskCheckpoint]) -> DoneAhead:
    """The records above the partitions' starts already processed, as the latest committed batch counted them,
    carried to `checkpoints`; the store is read only when some partition's virtual tasks are apart."""
    cps = list(checkpoints)
    if not apart(cps):
        return carried(None, cps)
    latest = store.metrics(job, limit=1)
    return carried(recorded(latest[-1] if latest else None, cps, generation), cps)


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LagObservation:
    """What one poll of the lag watcher saw."""

    lag: int  # records waiting
    must_run: bool  # a first run, a written-ahead batch to replay or new input partitions: a run has work whatever the lag
    leased: bool  # a live run (or rescale) holds the job's lease: it runs batches until caught up
    position: tuple[int | None, int]  # (generation, committed offsets): it moves when a run commits or rescales

    @staticmethod
    def of(report: LagReport, *, leased: bool) -> LagObservation:
        must_run = report.generation is None or report.pending_batch is not None or bool(report.new_partitions)
        return LagObservation(report.total, must_run, leased, (report.generation, report.committed))


@dataclass(frozen=True, kw_only=True)
class LagThresholds:
    records: int = 1  # airflow.microbatch.lag.records
    max_wait_ms: int = 60_000  # airflow.microbatch.lag.max.wait.ms
    cooldown_ms: int = 60_000  # airflow.microbatch.lag.cooldown.ms

    @staticmethod
    def of(config: JobConfig) -> LagThresholds:
        return LagThresholds(
            records=config.microbatch_lag_records,
            max_wait_ms=config.microbatch_lag_max_wait_ms,
            cooldown_ms=config.microbatch_lag_cooldown_ms,
        )


class LagWatch:
    """Decides, poll by poll, when waiting records should start a micro-batch run: once `records` wait, or
    once fewer have waited `max_wait_ms`. Never while a run holds the lease (records arriving then are that
    run's: it runs until caught up), and once per burst: after firing it stays quiet until it has seen a run
    (the lease taken, or the committed position moved) or `cooldown_ms` has passed (a run that never came).
    Pure: the clock is the caller's, so a restart of the watcher only forgets what the next poll sees again."""

    def __init__(self, thresholds: LagThresholds) -> None:
        self.thresholds = thresholds
        self.waiting_since_ms: int | None = None  # when lag was first seen above zero, no run since
        self.fired_ms: int | None = None  # when it last fired, until a run is seen
        self.fired_position: tuple[int | None, int] | None = None

    def observe(self, seen: LagObservation, now_ms: int) -> bool:
        """True when this observation should start a run."""
        t = self.thresholds
        if seen.leased:  # a run is on: it covers what waits, and its end re-arms the watcher
            self.waiting_since_ms = self.fired_ms = self.fired_position = None
            return False
        if self.fired_ms is not None:
            if seen.position == self.fired_position and now_ms - self.fired_ms < t.cooldown_ms:
                return False
            self.fired_ms = self.fired_position = None  # a run came and went (or never came): armed again
        if seen.lag <= 0 and not seen.must_run:
            self.waiting_since_ms = None
            return False
        if self.waiting_since_ms is None:
            self.waiting_since_ms = now_ms
        if seen.must_run or seen.lag >= t.records or now_ms - self.waiting_since_ms >= t.max_wait_ms:
            self.waiting_since_ms = None
            self.fired_ms, self.fired_position = now_ms, seen.position
            return True
        return False


class LagProbe:
    """One poll of a job's lag and lease (store reads and broker metadata, no records), on clients kept open
    across polls: `inputs` should hold its consumers (HeldKafkaInputs)."""

    def __init__(self, config: JobConfig, store: CheckpointStore, inputs: Inputs) -> None:
        self.config = config
        self.store = store
        self.inputs = inputs

    def observe(self) -> LagObservation:
        leased = self.store.lease(self.config.job_name) is not None
        if leased:  # no broker call while a run is on
            return LagObservation(0, False, True, (None, 0))
        return LagObservation.of(lag_report(self.config, self.store, self.inputs), leased=False)

    def close(self) -> None:
        close: Callable[[], None] | None = getattr(self.inputs, "close", None)
        if close is not None:
            close()
        self.store.close()
