"""What one micro-batch did: the JSON a run prints per batch, the Asset event
carries, the store keeps with SEP-32's metrics, and the job page charts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import orjson

from elasticity.metrics.freshness import freshness


@dataclass(kw_only=True)
class BatchSummary:
    job: str
    batch_id: int | None  # None: nothing to read
    generation: int | None
    factor: int | None
    replayed: bool = False
    owner: str = ""  # the lease owner: an Airflow run id, so a run finds the batches it committed
    finished_ms: int = 0
    records_read: int = 0
    processed: int = 0
    skipped: int = 0
    kept: int = 0  # records processed for the first time (dead letters included): read less skipped, up to any stop
    dead_lettered: int = 0
    outputs: int = 0
    task_count: int = 0
    offsets_committed: dict[str, dict[str, int]] = field(default_factory=dict)
    lag_left: int = 0  # records left to process: exact unless lag_left_exact is False (then at most)
    lag_left_exact: bool = True
    done_ahead: int = 0  # records above the slowest virtual tasks' offsets already processed (batch.coordinator.behind)
    lag_per_sspkb: dict[str, int] = field(default_factory=dict)
    durations_ms: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)  # records the log lost before they were read (LostRange)
    oldest_timestamp_ms: int | None = None  # the Kafka timestamps of the batch's oldest and newest records processed
    newest_timestamp_ms: int | None = None
    committed_ms: int | None = None  # when its commit was durable (None: not committed yet)
    freshness_ms: dict[str, int] | None = None  # {"oldest", "newest"}: their age at the commit (elasticity.metrics.freshness)

    def commit_at(self, committed_ms: int) -> None:
        """The batch's commit is durable at `committed_ms`: how old its oldest and newest records were then."""
        self.committed_ms = committed_ms
        self.freshness_ms = freshness(self.oldest_timestamp_ms, self.newest_timestamp_ms, committed_ms)

    def to_json(self) -> str:
        """Its fields as they are (a deep copy first, as `asdict` makes, took longer than the dump at
        thousands of virtual tasks), by orjson: a summary holds a lag and an offset per virtual task, and the
        standard library took 5-10 ms a batch to dump them at 4,096."""
        fields_ = {f.name: getattr(self, f.name) for f in fields(self)}
        return orjson.dumps(fields_, default=asdict, option=orjson.OPT_NON_STR_KEYS).decode()  # keys as `json` writes them

    @property
    def lag_left_text(self) -> str:
        return str(self.lag_left) if self.lag_left_exact else f"at most {self.lag_left}"

    def line(self) -> str:
        """One human line for logs and the demo."""
        if self.batch_id is None:
            return f"{self.job}: nothing to read (lag {self.lag_left_text})"
        d = self.durations_ms
        restores = self.metrics.get("state-restores")
        moved = f", {restores['count']} store restores ({restores['bytes']:,} bytes)" if restores and restores["count"] else ""
        return (
            f"{self.job} batch {self.batch_id}{' (replayed)' if self.replayed else ''} at factor {self.factor} "
            f"({self.task_count} virtual tasks): {self.records_read} read, {self.processed} processed, {self.skipped} skipped, "
            f"{self.dead_lettered} dead letters, lag left {self.lag_left_text}; {d.get('total', 0) / 1000:.2f} s "
            f"(process {d.get('process', 0) / 1000:.2f} s){moved}"
        )
