"""Lag of a job as it stands: the current generation's checkpoints against the
brokers' high watermarks, with no Spark. It decides whether a run has anything
to do (a run with nothing to read ends in seconds) and is what the job page
shows, so that right after a rescale every new virtual task shows its real lag.
Both the store and the brokers answer it or fail fast, before any Spark starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elasticity.batch.coordinator import Inputs, JobCoordinator
from elasticity.batch.planning import start_offsets
from elasticity.checkpoint.store import CheckpointStore
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
    per_ssp: dict[str, int] = field(default_factory=dict)  # each input partition, from its slowest virtual task
    new_partitions: tuple[str, ...] = ()  # input partitions the current job model does not have yet

    @property
    def total(self) -> int:
        return sum(self.per_ssp.values())

    @property
    def has_work(self) -> bool:
        return self.generation is None or self.pending_batch is not None or self.total > 0 or bool(self.new_partitions)

    def describe(self) -> str:
        if self.generation is None:
            return f"job {self.job!r} has no generation yet: the first run creates it"
        parts = [f"job {self.job!r} generation {self.generation} (factor {self.factor}): lag {self.total}"]
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
    per_ssp = {ssp_to_key(ssp): max(0, high[ssp] - start) for ssp, start in start_offsets(cps.values()).items()}
    return LagReport(
        job=config.job_name,
        generation=generation.number,
        factor=generation.factor,
        pending_batch=pending.batch_id if pending else None,
        per_sspkb=per_sspkb,
        per_ssp=per_ssp,
        new_partitions=tuple(ssp_to_key(s) for s in sorted(wanted - known)),
    )
