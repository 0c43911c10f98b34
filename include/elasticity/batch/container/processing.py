"""Process stage: one process slot's virtual-task slices, run side by side.

Runs inside a Spark Python worker (or anywhere): the slot's records read and
routed (`batch.container.reader`), run unit by unit (`batch.container.unit_run`), sinks written (one
file per sink and slot: `batch.container.slot_files`), one summary row per virtual task out
(SUMMARY_SCHEMA, which the driver reads in `batch.coordinator.outcome`). What the worker keeps across batches is its `ContainerProcess`.
Slices run on a thread pool (Samza's `job.container.thread.pool.size`: `batch.container.scheduling`), each
strictly in (SSP, offset) order, which is how I/O-bound virtual tasks overlap
without more containers. For a job with stores, each slice restores its task's
stores as it starts, operators reach them through `m.context.store(name)`, and
the slice ends with its task's synchronous snapshot; the summary rows carry each task's checkpoint id
and state markers, while the upload goes on in the background (`state.worker`).
Nothing here imports Spark.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from elasticity.batch.container.container_process import container_process
from elasticity.batch.container.process_context import ProcessContext
from elasticity.batch.container.reader import SlotReads
from elasticity.batch.container.scheduling import Slice, deal_units, side_by_side
from elasticity.batch.container.shipped import prefer_shipped
from elasticity.batch.container.slot_claims import claim
from elasticity.batch.container.slot_files import write_slot_files
from elasticity.batch.container.unit_run import Producers, Records, UnitRun, run_unit
from elasticity.config import elasticity_home
from elasticity.formats.registry import load as load_registry
from elasticity.jobmodel.model import TaskName
from elasticity.metrics.freshness import timestamp_span
from elasticity.state.commit_manager import Markers
from elasticity.state.table import SlotTables
from elasticity.state.worker import ContainerState

SUMMARY_SCHEMA = pa.schema(
    [
        ("task_name", pa.string()),
        ("records", pa.int64()),
        ("processed", pa.int64()),
        ("dead_lettered", pa.int64()),
        ("outputs", pa.int64()),
        ("process_ns", pa.int64()),
        ("group_ns", pa.int64()),  # wall time of the whole group of virtual tasks this one ran in (one Python worker)
        ("read", pa.int64()),  # records of the task's buckets in the batch's ranges, processed or skipped
        ("skipped", pa.int64()),  # of those, already processed (below its offset or under a watermark)
        ("kept", pa.int64()),  # of the others, those before its stop: processed (or dead-lettered) in this batch
        ("read_ns", pa.int64()),  # the slot's read and route time (on its first row)
        ("hash_ns", pa.int64()),  # the slot's key hashing time (on its first row)
        ("executor", pa.string()),  # where the slot ran: host and state folder
        ("stopped", pa.string()),  # JSON {sspkb key: first offset not processed}, when the task stopped early
        ("error", pa.string()),
        ("checkpoint_id", pa.string()),  # of the task's state snapshot in this batch (stateful jobs)
        ("state_markers", pa.string()),  # JSON CheckpointV2 state-checkpoint-markers of that snapshot
        ("state_metrics", pa.string()),  # JSON {store: metrics of this batch, and where the store was restored from}
        ("oldest_timestamp", pa.int64()),  # the slot's lowest and highest Kafka record timestamp (on its first row)
        ("newest_timestamp", pa.int64()),
        ("busiest", pa.string()),  # JSON {factor: records of its busiest key bucket}, the weighed factors' (on its first row)
    ]
)


def run_slots(ctx: ProcessContext, reads: SlotReads, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over the placed slots (`spark.placement`): each input row is a process slot, whose
    records are read, routed and processed here, in one Spark task."""
    process = container_process()
    process.start_slot()
    if ctx.shipped and prefer_shipped(ctx.shipped):
        process.forget_applications()  # built from the code it replaces
    for b in batches:
        for partition in b.column(0).to_pylist():
            slot = partition
            if ctx.slot_claims is not None:  # a local master: the slot whose stores this process holds
                folder = elasticity_home() / "slot-claims" / ctx.slot_claims
                slot = claim(folder, partition, ctx.slots, process.last_slot.get(ctx.job_name))
                process.last_slot[ctx.job_name] = slot
            start = time.perf_counter_ns()
            table, counts = reads.read(slot)
            read_ns = time.perf_counter_ns() - start
            oldest, newest = timestamp_span(table.column("timestamp"))  # the batch's freshness, as an aggregate
            rows = process_slot(ctx, slot, table)
            for name in sorted(counts.read.keys() - {r["task_name"] for r in rows}):  # every record skipped
                zeros = dict.fromkeys(("records", "processed", "dead_lettered", "outputs", "process_ns", "kept"), 0)
                rows.append({"task_name": name, **zeros})
            elapsed = time.perf_counter_ns() - start
            where = f"{socket.gethostname()}:{elasticity_home()}"
            out = [
                {
                    **r,
                    "group_ns": elapsed,
                    "read": counts.read[r["task_name"]],
                    "skipped": counts.skipped[r["task_name"]],
                    "read_ns": read_ns if i == 0 else 0,
                    "hash_ns": counts.hash_ns if i == 0 else 0,
                    "oldest_timestamp": oldest if i == 0 else None,
                    "newest_timestamp": newest if i == 0 else None,
                    "busiest": json.dumps(counts.load.busiest()) if i == 0 and counts.load else None,
                    "executor": where,
                }
                for i, r in enumerate(rows)
            ]
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=SUMMARY_SCHEMA)


def process_slot(ctx: ProcessContext, slot: int, table: pa.Table) -> list[dict[str, Any]]:
    """The slot's routed records through its virtual tasks' slices; a summary row per task that had records."""
    if table.num_rows == 0:
        return []
    table, records, tasks = _slices(table)
    load_registry(ctx.registry)  # the driver's in-memory registry's schemas, with their ids
    process = container_process()
    app = process.application(ctx.app_class, ctx.job_inputs)
    outputs = Producers(ctx)
    tables = SlotTables(ctx.tables, app.tables, slot) if ctx.tables else None  # caught up before any slice
    container = None
    markers: dict[TaskName, Markers] = {}
    # Samza's job.container.thread.pool.size: 0 = no pool, the slices run one after another
    pool = min(ctx.thread_pool_size, len(tasks))
    history = process.history(ctx.app_class) if pool > 1 else None
    if history is not None and history.single:
        pool = 1
    units = deal_units(tasks, max(1, pool), alone=bool(app.windows))
    cpu_ns: list[int] = []  # each unit's thread CPU time

    def run(unit: tuple[Slice, ...]) -> UnitRun:
        """The unit's virtual tasks restore their stores as it starts, and snapshot them and start their
        upload as it ends, so that the slot's other units run meanwhile (each task checkpoints on its own)."""
        started = time.thread_time_ns()
        try:
            if container is not None:
                for t in unit:
                    container.restore(TaskName(t.name))
            ran = run_unit(ctx, app, unit, records, outputs=outputs, container=container, tables=tables)
            if container is not None:
                assert ctx.state is not None
                for row in ran.rows:
                    if not row["stopped"]:
                        task = TaskName(row["task_name"])
                        markers[task] = container.commit(container.snapshot(ctx.state.checkpoint_id, task))
            return ran
        finally:
            cpu_ns.append(time.thread_time_ns() - started)

    try:
        container = process.open_container(ctx.state, app.stores.values(), slot) if ctx.state else None
        started = time.perf_counter_ns()
        ran = [run(u) for u in units] if pool <= 1 else side_by_side(run, units, pool, process.threads(pool))
        if history is not None:
            history.observe(single=pool <= 1, cpu_ns=sum(cpu_ns), wall_ns=time.perf_counter_ns() - started)
        write_slot_files(ctx, app, slot, table, units=ran)
        rows = sorted((r for u in ran for r in u.rows), key=lambda r: r["task_name"])
        if container is not None:
            assert ctx.state is not None
            _add_state(rows, container, markers, checkpoint_id=str(ctx.state.checkpoint_id))
    finally:
        outputs.flush()
        if container is not None:
            container.release()
        if tables is not None:
            tables.close()
    return rows


def _slices(table: pa.Table) -> tuple[pa.Table, Records, list[Slice]]:
    """The slot's records sorted by virtual task, SSP and offset, and each task's slice of them."""
    table = table.take(
        pc.sort_indices(
            table,
            [
                ("task_name", "ascending"),
                ("system", "ascending"),
                ("stream", "ascending"),
                ("partition", "ascending"),
                ("offset", "ascending"),
            ],
        )
    )
    names = table.column("task_name").to_pylist()
    bounds = [0] + [i for i in range(1, len(names)) if names[i] != names[i - 1]] + [len(names)]
    return table, Records.of(table), [Slice(names[a], a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def _add_state(
    rows: list[dict[str, Any]], container: ContainerState, markers: dict[TaskName, Markers], *, checkpoint_id: str
) -> None:
    """Each task's row with its snapshot's checkpoint id and markers (a task that took one) and its stores' metrics."""
    for r in rows:
        task = TaskName(r["task_name"])
        if task in markers:
            r["checkpoint_id"], r["state_markers"] = checkpoint_id, json.dumps(markers[task], sort_keys=True)
        r["state_metrics"] = json.dumps(container.report(task))
