"""The plan of one micro-batch, written ahead of running it (like the offsets
log of Spark's Kafka source) so that a retry replays the identical batch."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from elasticity.jobmodel.model import SystemStreamPartition


class BatchStatus(StrEnum):
    """A batch's row in the store: planned (written ahead, replayed until it commits), committed, or abandoned
    (a rescale dropped its plan: its ranges are read again under the new generation)."""

    PLANNED = "planned"
    COMMITTED = "committed"
    ABANDONED = "abandoned"


@dataclass(frozen=True, order=True)
class OffsetRange:
    """[start, end) of one input partition (SSP without bucket)."""

    ssp: SystemStreamPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    job_name: str
    batch_id: int
    generation: int
    ranges: tuple[OffsetRange, ...]
    # per side-input partition, the offset its tables are read up to in this batch (written with the plan: a replay reads to the same)
    side_inputs: tuple[tuple[SystemStreamPartition, int], ...] = ()

    @property
    def records(self) -> int:
        return sum(r.size for r in self.ranges)
