"""A batch's outcome: one summary row per virtual task as the process stage reports it (`container.processing.SUMMARY_SCHEMA`), read on
the driver as TaskSummary tuples, and what the driver makes of them: the new checkpoints, SEP-32's batch metrics
and the stores', and the batch's summary. Nothing here imports Spark."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, NamedTuple

import pyarrow as pa

from elasticity.batch.container.bucket_load import busiest_of
from elasticity.batch.coordinator.behind import DoneAhead, behind, summary_fields
from elasticity.batch.coordinator.planning import advance_all
from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.store import Generation
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import ssp_from_key, ssp_to_key
from elasticity.metrics.freshness import batch_span
from elasticity.metrics.job_metrics import per_message_ns
from elasticity.metrics.summary import BatchSummary


class TaskSummary(NamedTuple):
    """One virtual task's summary row as the driver reads it (SUMMARY_SCHEMA's columns, in order): a tuple per
    task, not an object with a field lookup per attribute, as thousands come back per batch."""

    task_name: str
    records: int
    processed: int
    dead_lettered: int
    outputs: int
    process_ns: int
    group_ns: int
    read: int
    skipped: int
    kept: int
    read_ns: int
    hash_ns: int
    executor: str
    stopped: str | None
    error: str | None
    checkpoint_id: str | None
    state_markers: str | None
    state_metrics: str | None
    oldest_timestamp: int | None
    newest_timestamp: int | None
    busiest: str | None

    @classmethod
    def of(cls, table: pa.Table) -> list[TaskSummary]:
        """The rows of a table of SUMMARY_SCHEMA, column by column."""
        return [cls(*r) for r in zip(*(table.column(n).to_pylist() for n in cls._fields), strict=True)]


def new_checkpoints(
    plan: BatchPlan, cps: dict[TaskName, TaskCheckpoint], rows: list[TaskSummary], *, stateful: bool
) -> dict[TaskName, TaskCheckpoint]:
    """Each virtual task's checkpoint after the batch: past its ranges, or at the first offset it did not
    keep where it stopped; with the state snapshot it took, for a job with stores."""
    stopped = {
        TaskName(r.task_name): {ssp_from_key(k): int(v) for k, v in json.loads(r.stopped).items()} for r in rows if r.stopped
    }
    new_cps = advance_all(cps, plan.ranges, stopped)
    return with_state(new_cps, cps, rows) if stateful else new_cps


def summary_metrics(
    durations: dict[str, float],
    new_cps: dict[TaskName, TaskCheckpoint],
    rows: list[TaskSummary],
    *,
    stateful: bool,
) -> dict[str, Any]:
    """SEP-32's batch metrics, the stores' and the per-task figures of the job page."""
    metrics: dict[str, Any] = {
        "total-input-consumption-ns": int((durations["spark"] - durations["process"]) * 1e6),
        # per message, as SEP-32 means it: the hashing alone, timed in each Arrow batch of the read (route_records)
        "keyhash-compute-ns": per_message_ns(sum(r.hash_ns for r in rows), sum(r.read for r in rows)),
        "executors": sorted({r.executor for r in rows}),
    }
    if stateful:
        metrics.update(state_metrics(new_cps, rows))
    ran = [r for r in rows if r.records]
    metrics["process-ns"] = {r.task_name: r.process_ns for r in ran}  # per virtual task: its slice
    metrics["process-ns-per-message"] = per_message_ns(sum(r.process_ns for r in ran), sum(r.records for r in ran))
    metrics["records"] = {r.task_name: r.records for r in ran}  # per virtual task: its records/s on the job page
    counted = [{int(f): n for f, n in json.loads(r.busiest).items()} for r in rows if r.busiest]
    if counted:  # an autosized job's: each weighed factor's busiest key bucket (RouteTable.weighed)
        metrics["busiest-bucket-records"] = busiest_of(counted)
    return metrics


def batch_summary(
    job: str,
    generation: Generation,
    plan: BatchPlan | None,
    cps: dict[TaskName, TaskCheckpoint],
    *,
    high: dict[SystemStreamPartition, int],
    durations: dict[str, float],
    metrics: dict[str, Any],
    done: DoneAhead,
) -> BatchSummary:
    """The batch's summary: its checkpoints' offsets and the lag each leaves, with its durations and metrics;
    the records left, from its slowest virtual tasks less `done`, those above them already processed."""
    lag: dict[str, int] = {}
    committed: dict[str, dict[str, int]] = {}
    starts: dict[SystemStreamPartition, int] = {}  # per input partition, its slowest virtual task's offset
    for name, cp in cps.items():  # one pass: thousands of virtual tasks
        offsets = committed[name.name] = {}
        for ssp, offset in cp.offsets.items():
            key, base = ssp_to_key(ssp), ssp.without_key_bucket()
            lag[key] = max(0, high.get(base, offset) - offset)
            offsets[key] = offset
            if offset < starts.get(base, offset + 1):
                starts[base] = offset
    metrics["task-count"] = len(cps)
    metrics["lag"] = lag
    return BatchSummary(
        job=job,
        batch_id=plan.batch_id if plan else None,
        generation=generation.number,
        factor=generation.factor,
        task_count=len(cps),
        offsets_committed=committed if plan else {},
        lag_left=behind({b: max(0, high.get(b, o) - o) for b, o in starts.items()}, done),
        **summary_fields(done),
        lag_per_sspkb=lag,
        durations_ms=durations,
        metrics=metrics,
    )


def count_records(summary: BatchSummary, rows: list[TaskSummary]) -> None:
    """The batch's record counts: read from the tasks' buckets and skipped as already processed, processed,
    dead-lettered and output, and why tasks stopped."""
    summary.records_read = sum(r.read for r in rows)
    summary.skipped = sum(r.skipped for r in rows)
    summary.kept = sum(r.kept for r in rows)
    summary.processed = sum(r.processed for r in rows)
    summary.dead_lettered = sum(r.dead_lettered for r in rows)
    summary.outputs = sum(r.outputs for r in rows)
    summary.errors = [r.error for r in rows if r.error]
    summary.oldest_timestamp_ms, summary.newest_timestamp_ms = batch_span((r.oldest_timestamp, r.newest_timestamp) for r in rows)


def with_state(
    new_cps: dict[TaskName, TaskCheckpoint], cps: dict[TaskName, TaskCheckpoint], rows: list[TaskSummary]
) -> dict[TaskName, TaskCheckpoint]:
    """Each task's new checkpoint with its snapshot of this batch; a task that took none (no records
    here, or stopped) keeps the state of the checkpoint it started from."""
    snapped = {TaskName(r.task_name): r for r in rows if r.checkpoint_id}
    out = {}
    for name, cp in new_cps.items():
        r = snapped.get(name)
        if r is not None and r.checkpoint_id and r.state_markers:
            out[name] = replace(cp, checkpoint_id=CheckpointId.parse(r.checkpoint_id), state_markers=json.loads(r.state_markers))
        else:
            out[name] = replace(cp, checkpoint_id=cps[name].checkpoint_id, state_markers=cps[name].state_markers)
    return out


def state_metrics(cps: dict[TaskName, TaskCheckpoint], rows: list[TaskSummary]) -> dict[str, Any]:
    """Per store, this batch's metrics summed over its virtual tasks ("store-metrics"), and per virtual
    task and store its checkpoint id, markers, size and restore source ("stores"), for the summary and
    the job page."""
    totals: dict[str, dict[str, int]] = {}
    local: dict[str, dict[str, dict[str, Any]]] = {}  # task -> store -> disk usage and restore source
    for r in rows:
        for store, m in json.loads(r.state_metrics or "{}").items():
            source = m.pop("restored-from")
            agg = totals.setdefault(store, {})
            for k, v in m.items():
                agg[k] = agg.get(k, 0) + v
            local.setdefault(r.task_name, {})[store] = {"disk-usage-bytes": m["disk-usage-bytes"], "restored-from": source}
    stores: dict[str, dict[str, Any]] = {}
    for name, cp in cps.items():
        markers: dict[str, dict[str, str]] = {}
        for factory, by_store in cp.state_markers.items():
            for store, marker in by_store.items():
                markers.setdefault(store, {})[factory] = marker
        for store in markers.keys() | local.get(name.name, {}).keys():
            stores.setdefault(name.name, {})[store] = {
                "checkpoint-id": str(cp.checkpoint_id),
                "markers": markers.get(store, {}),
                **local.get(name.name, {}).get(store, {}),
            }
    restores = {
        "count": sum(t.get("restores", 0) for t in totals.values()),
        "bytes": sum(t.get("restore-bytes", 0) for t in totals.values()),
    }
    return {"store-metrics": totals, "stores": stores, "state-restores": restores}
