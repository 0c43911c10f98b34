"""SEP-32's metrics as a batch and a rescale report them: Samza's names, ns units.

Beside them, Samza's container counter `skipped-envelopes` (RunLoop: envelopes read
but not processed, because their key bucket's task had them already): here the
records a batch read and skipped as already processed (below their virtual task's
checkpoint, or a merge's watermark). `process-ns` is not Samza's container timer
of one envelope's process call: here it is one virtual task's whole slice of a
batch; the per-envelope figure is `process-ns-per-message`. Samza has no end-to-end
latency metric: a batch's freshness (`elasticity.metrics.freshness`) goes out in its
style, `batch-freshness-oldest-ms` and `batch-freshness-newest-ms`.

A batch's figures travel in its summary (the store's batch table); a rescale's
(`job-model-generation-ns`, `checkpoint-compute-ns`: SEP-32 reports them at a
task scale-up or scale-down) go to the store's rescale table. Both also go to
the job's reporters (elasticity.metrics.reporters) as StatsD gauges and counters.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from sqlalchemy.exc import SQLAlchemyError

from elasticity.checkpoint.store import CheckpointStore, StoreError
from elasticity.metrics.freshness import NEWEST_GAUGE, OLDEST_GAUGE
from elasticity.metrics.reporters import Metric, Reporters, metric_name
from elasticity.metrics.summary import BatchSummary

log = logging.getLogger(__name__)

BATCH_GAUGES = ("keyhash-compute-ns", "process-ns-per-message", "total-input-consumption-ns", "commit-ns", "task-count")


def batch_metrics(summary: BatchSummary) -> list[Metric]:
    """A committed batch: job-level gauges (its freshness among them), counters of records, and per
    virtual task its `process-ns` (the slice), records and `process-ns-per-message`."""
    job, m = summary.job, summary.metrics
    out = [Metric(metric_name(job, k), m[k]) for k in BATCH_GAUGES if isinstance(m.get(k), int)]
    out += [
        Metric(metric_name(job, "lag"), summary.lag_left),
        Metric(metric_name(job, "records-read"), summary.records_read, "c"),
        Metric(metric_name(job, "processed"), summary.processed, "c"),
        Metric(metric_name(job, "skipped-envelopes"), summary.skipped, "c"),
        Metric(metric_name(job, "dead-lettered"), summary.dead_lettered, "c"),
    ]
    if summary.freshness_ms is not None:  # none for a batch of no timestamped record
        out += [
            Metric(metric_name(job, OLDEST_GAUGE), summary.freshness_ms["oldest"]),
            Metric(metric_name(job, NEWEST_GAUGE), summary.freshness_ms["newest"]),
        ]
    records = m.get("records", {})
    for task, ns in sorted(m.get("process-ns", {}).items()):
        n = records.get(task, 0)
        out += [
            Metric(metric_name(job, "task", task, "process-ns"), ns),
            Metric(metric_name(job, "task", task, "records"), n, "c"),
        ]
        if n:
            out.append(Metric(metric_name(job, "task", task, "process-ns-per-message"), round(ns / n)))
    return out


def per_message_ns(total_ns: int, messages: int) -> int:
    """A per-message figure from a total over `messages` (0 when there were none)."""
    return round(total_ns / messages) if messages else 0


@dataclass(frozen=True, kw_only=True)
class RescaleMetrics:
    """What one rescale (or a job's first generation) cost, as SEP-32 names it."""

    job: str
    generation: int
    old_factor: int | None  # None: the job's first generation
    factor: int
    origin: str
    task_count: int
    job_model_generation_ns: int  # the current generation and partition counts read, the new JobModel built
    checkpoint_compute_ns: int  # the new generation's checkpoints computed from the old ones (migration)
    state_move_ns: int | None = None  # a stateful job's stores moved to the new virtual tasks (state.rescale)

    def to_json(self) -> str:
        return json.dumps({k.replace("_", "-"): v for k, v in asdict(self).items()})

    def metrics(self) -> list[Metric]:
        return [
            Metric(metric_name(self.job, "job-model-generation-ns"), self.job_model_generation_ns),
            Metric(metric_name(self.job, "checkpoint-compute-ns"), self.checkpoint_compute_ns),
            *([Metric(metric_name(self.job, "state-move-ns"), self.state_move_ns)] if self.state_move_ns is not None else []),
            Metric(metric_name(self.job, "task-count"), self.task_count),
            Metric(metric_name(self.job, "factor"), self.factor),
            Metric(metric_name(self.job, "rescales"), 1, "c"),
        ]


def record_rescale(store: CheckpointStore, reporters: Reporters, m: RescaleMetrics) -> None:
    """Into the store's rescale table and out to the reporters; the rescale already
    committed, so a failure here is logged, never raised."""
    try:
        store.record_rescale_metrics(m.job, m.generation, m.to_json())
    except (SQLAlchemyError, StoreError) as e:
        log.warning("job %r: rescale metrics of generation %d not stored: %s", m.job, m.generation, e)
    reporters.report(m.metrics())
