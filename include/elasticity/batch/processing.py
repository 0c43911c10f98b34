"""Process stage: one process slot's virtual-task slices, run side by side.

Runs inside a Spark Python worker (or anywhere): the slot's records read and
routed (`batch.reader`), sinks written (one file per sink and slot), one
summary row per virtual task out.
Slices run on a thread pool (Samza's `job.container.thread.pool.size`), each
strictly in (SSP, offset) order, which is how I/O-bound virtual tasks overlap
without more containers. For a job with stores, each slice restores its task's
stores as it starts, operators reach them through `m.context.store(name)`, and
the slice ends with its task's synchronous snapshot; the summary rows carry each task's checkpoint id
and state markers, while the upload goes on in the background (`state.worker`).
Nothing here imports Spark.
"""

from __future__ import annotations

import bisect
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from elasticity.api.context import TaskContext
from elasticity.api.executor import SliceExecutor
from elasticity.api.stream import ApplicationDescriptor, Message, OutputStream
from elasticity.batch.container_process import container_process
from elasticity.batch.exactly_once import staging_root
from elasticity.batch.outcome import SUMMARY_SCHEMA
from elasticity.batch.process_context import ProcessContext
from elasticity.batch.reader import SlotReads
from elasticity.batch.scheduling import _Slice, _units
from elasticity.batch.shipped import prefer_shipped
from elasticity.batch.sinks import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, Source, dead_letter, in_file, write_batch_file
from elasticity.batch.slot_claims import claim
from elasticity.config import elasticity_home
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.kafka.admin import settings
from elasticity.serializers import RecordSerdeError, deserialize, serialize
from elasticity.state.commit_manager import Markers
from elasticity.state.table import SlotTables
from elasticity.state.worker import ContainerState

U = TypeVar("U")
R = TypeVar("R")


@dataclass
class _Outputs:
    """Kafka producers shared by the threads of one container."""

    ctx: ProcessContext
    producers: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def producer(self, system: str):
        with self.lock:
            if system not in self.producers:
                from kafka import KafkaProducer

                self.producers[system] = KafkaProducer(
                    **settings(self.ctx.output_bootstraps[system]).kwargs(acks="all", linger_ms=5)
                )
            return self.producers[system]

    def flush(self) -> None:
        for p in self.producers.values():
            p.flush()
            p.close()


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
            rows = process_slot(ctx, slot, table)
            for name in sorted(counts.read.keys() - {r["task_name"] for r in rows}):  # every record skipped
                rows.append({"task_name": name, "records": 0, "processed": 0, "dead_lettered": 0, "outputs": 0, "process_ns": 0})
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
    records = _Records.of(table)
    tasks = [_Slice(names[a], a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
    process = container_process()
    app = process.application(ctx.app_class, ctx.job_inputs)
    outputs = _Outputs(ctx)
    tables = SlotTables(ctx.tables, app.tables, slot) if ctx.tables else None  # caught up before any slice
    container = None
    markers: dict[TaskName, Markers] = {}
    # Samza's job.container.thread.pool.size: 0 = no pool, the slices run one after another
    pool = min(ctx.thread_pool_size, len(tasks))
    history = process.history(ctx.app_class) if pool > 1 else None
    if history is not None and history.single:
        pool = 1
    units = _units(tasks, max(1, pool), alone=bool(app.windows))
    cpu_ns: list[int] = []  # each unit's thread CPU time

    def run(unit: tuple[_Slice, ...]) -> _UnitRun:
        """The unit's virtual tasks restore their stores as it starts, and snapshot them and start their
        upload as it ends, so that the slot's other units run meanwhile (each task checkpoints on its own)."""
        started = time.thread_time_ns()
        try:
            if container is not None:
                for t in unit:
                    container.restore(TaskName(t.name))
            ran = _run_unit(ctx, app, unit, records, outputs=outputs, container=container, tables=tables)
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
        ran = [run(u) for u in units] if pool <= 1 else _side_by_side(run, units, pool, process.threads(pool))
        if history is not None:
            history.observe(single=pool <= 1, cpu_ns=sum(cpu_ns), wall_ns=time.perf_counter_ns() - started)
        _write_slot_files(ctx, app, slot, table, units=ran)
        rows = sorted((r for u in ran for r in u.rows), key=lambda r: r["task_name"])
        if container is not None:
            assert ctx.state is not None
            for r in rows:
                task = TaskName(r["task_name"])
                if task in markers:
                    r["checkpoint_id"], r["state_markers"] = (
                        str(ctx.state.checkpoint_id),
                        json.dumps(markers[task], sort_keys=True),
                    )
                r["state_metrics"] = json.dumps(container.report(task))
    finally:
        outputs.flush()
        if container is not None:
            container.release()
        if tables is not None:
            tables.close()
    return rows


def _side_by_side(run: Callable[[U], R], units: list[U], threads: int, pool: ThreadPoolExecutor) -> list[R]:
    """`run` over the units on `threads` threads of `pool`, each taking the next unit as it finishes one (in the given
    order); every unit runs, and the first failure in that order is raised once all have ended."""
    done: list[Any] = [None] * len(units)
    errors: list[BaseException | None] = [None] * len(units)
    queue = iter(enumerate(units))
    lock = threading.Lock()

    def runner() -> None:
        while True:
            with lock:
                i = next(queue, None)
            if i is None:
                return
            try:
                done[i[0]] = run(i[1])
            except BaseException as e:  # noqa: BLE001 - raised below, after the other units
                errors[i[0]] = e

    for f in [pool.submit(runner) for _ in range(min(threads, len(units)))]:
        f.result()
    failure = next((e for e in errors if e is not None), None)
    if failure is not None:
        raise failure
    return done


@dataclass(frozen=True, kw_only=True)
class _Records:
    """The slot's records, sorted by virtual task, SSP and offset: the table, and its columns as Python lists,
    taken once (a column's values per slice cost more than a small slice's records)."""

    table: pa.Table
    systems: list[str]
    streams: list[str]
    partitions: list[int]
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]

    @classmethod
    def of(cls, table: pa.Table) -> _Records:
        names = {"systems": "system", "streams": "stream", "partitions": "partition", "offsets": "offset"}
        names |= {"keys": "key", "values": "value", "timestamps": "timestamp"}
        return cls(table=table, **{field: table.column(c).to_pylist() for field, c in names.items()})

    def source(self, row: int) -> Source:
        return self.systems[row], self.streams[row], self.partitions[row], self.offsets[row]


@dataclass(kw_only=True)
class _UnitRun:
    """What a unit of virtual tasks leaves: a summary row per task, and for the slot's files each sink's rows
    (by the first slot row of the task they belong to, so that files list tasks in order), the slot rows the
    batch keeps and which of those were dead-lettered."""

    rows: list[dict[str, Any]]
    outputs: dict[str, list[tuple[int, list[tuple[Any, ...]]]]]  # root -> (task's first row, rows in OUTPUT_SCHEMA's order)
    kept: list[tuple[int, int]]  # slot rows [start, end) the batch keeps, a range per task
    failed: set[int]  # slot rows of those that were dead-lettered
    dead: list[tuple[int, dict[str, Any]]]  # (task's first row, DEAD_LETTER_SCHEMA row)


def _sink_roots(ctx: ProcessContext, app: ApplicationDescriptor) -> dict[OutputStream, str | None]:
    """Each output's root for the slot's files: a Parquet output's, or an exactly-once Kafka output's staging
    root; None for a Kafka output sent at-least-once."""
    out: dict[OutputStream, str | None] = {}
    for o in app.outputs.values():
        if o.kind == "parquet":
            out[o] = f"{ctx.output_path.rstrip('/')}/{o.name}"
        else:
            out[o] = staging_root(ctx.output_path, o.system, o.name) if ctx.stage_kafka else None
    return out


def _write_slot_files(
    ctx: ProcessContext, app: ApplicationDescriptor, slot: int, table: pa.Table, *, units: list[_UnitRun]
) -> None:
    """Each sink's rows of the slot's virtual tasks, in task order, as one file per (batch, slot), which a retry
    of the batch overwrites (a retry placed differently finds the batch's files deleted first: `delete_batches`).
    Every Parquet output and the audit get their file, empty or not; dead letters only when there are some."""
    name = f"slot-{slot}"
    for root in (r for r in _sink_roots(ctx, app).values() if r is not None):
        pieces = sorted((p for u in units for p in u.outputs.get(root, ())), key=lambda p: p[0])
        rows = [r for _, rs in pieces for r in rs]
        columns = zip(*rows, strict=True) if rows else [()] * len(in_file(OUTPUT_SCHEMA))
        write_batch_file(root, ctx.batch_id, name, _table(list(columns), in_file(OUTPUT_SCHEMA)))
    ranges = sorted(r for u in units for r in u.kept)
    failed = set().union(*(u.failed for u in units))
    if sum(b - a for a, b in ranges) == table.num_rows:
        kept = table
    else:
        kept = table.take(pa.array([g for a, b in ranges for g in range(a, b)], pa.int64()))
    seq = [i for a, b in ranges for i in range(b - a)]
    status = ["dead_letter" if g in failed else "processed" for a, b in ranges for g in range(a, b)]
    audit = _table(
        [*(kept.column(n) for n in ("system", "stream", "partition", "offset", "key", "task_name")), seq, status],
        in_file(AUDIT_SCHEMA),
    )
    write_batch_file(ctx.audit_path, ctx.batch_id, name, audit)
    dead = [d for _, d in sorted((d for u in units for d in u.dead), key=lambda d: d[0])]
    if dead:
        write_batch_file(ctx.dead_letter_path, ctx.batch_id, name, pa.Table.from_pylist(dead, schema=DEAD_LETTER_SCHEMA))


def _table(columns: list[Any], schema: pa.Schema) -> pa.Table:
    """Columns, Arrow or plain values, as a table of `schema`."""
    arrays = [
        c if isinstance(c, pa.ChunkedArray | pa.Array) else pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _run_unit(
    ctx: ProcessContext,
    app: ApplicationDescriptor,
    unit: tuple[_Slice, ...],
    records: _Records,
    *,
    outputs: _Outputs,
    container: ContainerState | None,
    tables: SlotTables | None,
) -> _UnitRun:
    """The unit's virtual tasks' slices through the app's operator graph in one pass (Samza's process() per
    message, here operator at a time), each task's messages with its own context (its stores; the container's
    tables), each task stopping on its own; then what each task keeps: its summary row, outputs, audit rows and
    dead letters."""
    messages, failed, ends = _messages(ctx, unit, records, container=container, tables=tables)
    result = SliceExecutor(
        app=app, max_concurrency=ctx.max_concurrency, callback_timeout_ms=ctx.callback_timeout_ms, policy=ctx.policy
    ).run(messages, failed, ends)
    n = len(messages)
    slot_row = [g for t in unit for g in range(t.start, t.end)]  # a message's row in the slot's records
    starts = [0, *ends[:-1]]
    # where each task's kept records end: all of them, or those before its stop; a stopped task with stores keeps
    # none (its stores saw records past the stop, operator at a time: only its last checkpoint's state is
    # consistent with its offsets)
    kept_end = [
        end if j not in result.stops else (start if container is not None else result.stops[j])
        for j, (start, end) in enumerate(zip(starts, ends, strict=True))
    ]

    def task_of(i: int) -> int:
        return bisect.bisect_right(ends, i) if i < n else len(unit) - 1  # a closed window: the unit's one task

    def kept(i: int, j: int) -> bool:
        """Item i of task j: a record before its task's stop, or a closed window of a task that did not stop."""
        return i < kept_end[j] if i < n else j not in result.stops

    def source(i: int) -> Source:
        """The input record an output or a dead letter comes from; for a closed window, the last record folded into it."""
        return records.source(slot_row[i]) if i < n else result.timers[i].source

    sent = [0] * len(unit)
    files: dict[str, list[tuple[int, list[tuple[Any, ...]]]]] = {}
    for out, root in _sink_roots(ctx, app).items():
        produced = []  # (task, item) of what the kept records produced
        for p in result.outputs.get(out, ()):
            j = task_of(p[0])
            if kept(p[0], j):
                produced.append((j, p))
                sent[j] += 1
        if root is None:
            _send(ctx, outputs, out, [p for _, p in produced])
            continue
        serdes = (
            (ctx.key_serdes.get(out.system, "string"), ctx.msg_serdes.get(out.system, "json")) if out.kind == "kafka" else None
        )
        by_task: dict[int, list[tuple[Any, ...]]] = {}
        for j, (i, k, v) in produced:
            task_rows = by_task.setdefault(j, [])
            system, stream, partition, offset = source(i)
            if serdes is not None:  # made by its system's serdes, as the at-least-once producer makes them
                key, value = serialize(serdes[0], k), serialize(serdes[1], v)
            else:
                key, value = k if isinstance(k, bytes) else serialize("string", k), serialize("json", v)
            task_rows.append((key, value, unit[j].name, len(task_rows), partition, offset, system, stream))
        files[root] = [(unit[j].start, r) for j, r in by_task.items()]

    dead: list[tuple[int, dict[str, Any]]] = []
    dead_count, failed_kept = [0] * len(unit), [0] * len(unit)
    failed_rows = set()

    def dead_letter_of(i: int, key: bytes | None, value: bytes | None, error: str) -> None:
        j = task_of(i)
        dead_count[j] += 1
        dead.append(
            (
                unit[j].start,
                dead_letter(source(i), key, value, task_name=TaskName(unit[j].name), batch_id=ctx.batch_id, error=error),
            )
        )

    for i, err in sorted(result.failures.items()):
        if i < n and kept(i, task_of(i)):
            failed_kept[task_of(i)] += 1
            failed_rows.add(slot_row[i])
            dead_letter_of(i, records.keys[slot_row[i]], records.values[slot_row[i]], err)
    # late for a window: dropped by that window only, the record itself was processed
    for i, reasons in sorted(result.late.items()):
        if i < n and kept(i, task_of(i)):
            for reason in reasons:
                dead_letter_of(i, records.keys[slot_row[i]], records.values[slot_row[i]], reason)
    for i, err in sorted(result.failures.items()):  # closed windows that failed downstream, when their task did not stop
        if i >= n and kept(i, task_of(i)):
            pane = result.timers[i].pane
            key = serialize("string", pane.key) if not isinstance(pane.key, bytes) else pane.key
            dead_letter_of(i, key, serialize("json", pane.as_dict()), err)

    rows = []
    for j, t in enumerate(unit):
        stopped: dict[str, int] = {}
        error = None
        if j in result.stops:
            stop = result.stops[j]
            stopped, error = _where_stopped(
                records,
                t,
                kept_end[j] - starts[j],
                stop=stop,
                stop_source=source(stop) if stop < n else None,
                error=result.failures[stop],
            )
        rows.append(
            {
                "task_name": t.name,
                "records": t.size,
                "processed": kept_end[j] - starts[j] - failed_kept[j],  # late records count: other branches processed them
                "dead_lettered": dead_count[j],
                "outputs": sent[j],
                "process_ns": result.process_ns * t.size // max(1, n),  # the unit's pass, by the task's share of its records
                "stopped": json.dumps(stopped) if stopped else None,
                "error": error,
            }
        )
    kept_ranges = [(t.start, t.start + kept_end[j] - starts[j]) for j, t in enumerate(unit)]
    return _UnitRun(rows=rows, outputs=files, kept=kept_ranges, failed=failed_rows, dead=dead)


def _messages(
    ctx: ProcessContext,
    unit: tuple[_Slice, ...],
    records: _Records,
    *,
    container: ContainerState | None,
    tables: SlotTables | None,
) -> tuple[list[Message], dict[int, str], list[int]]:
    """Each record of the unit's tasks decoded with its system's serdes, column by column; one its serde cannot
    read fails alone (a dead letter), not the slice. Returns the messages, those that failed, and where each
    task's messages end."""
    messages: list[Message] = []
    failed: dict[int, str] = {}
    ends: list[int] = []
    ssps: dict[tuple[str, str, int], SystemStreamPartition] = {}
    serdes: dict[str, tuple[str, str]] = {}
    r = records
    for t in unit:
        task = TaskName(t.name)
        context = TaskContext(task, partial(container.store, task) if container else None, tables.table if tables else None)
        a, b = t.start, t.end
        for system, stream, partition, offset, k, v, ts in zip(
            r.systems[a:b],
            r.streams[a:b],
            r.partitions[a:b],
            r.offsets[a:b],
            r.keys[a:b],
            r.values[a:b],
            r.timestamps[a:b],
            strict=True,
        ):
            ssp = ssps.get((system, stream, partition))
            if ssp is None:
                ssp = ssps[(system, stream, partition)] = SystemStreamPartition(system, stream, partition)
                serdes[system] = (ctx.key_serdes.get(system, "string"), ctx.msg_serdes.get(system, "json"))
            key_serde, msg_serde = serdes[system]
            try:
                key = deserialize(key_serde, k, "key")
                value = deserialize(msg_serde, v, "value")
            except RecordSerdeError as e:
                key, value, failed[len(messages)] = None, None, f"deserialize: {e}"
            messages.append(Message(key=key, value=value, ssp=ssp, offset=offset, timestamp=ts, context=context))
        ends.append(len(messages))
    return messages, failed, ends


def _send(ctx: ProcessContext, outputs: _Outputs, out: OutputStream, produced: list[tuple[int, Any, Any]]) -> None:
    """A Kafka output's messages, with the serdes of its system, on the container's shared producer."""
    producer = outputs.producer(out.system)
    key_serde, msg_serde = ctx.key_serdes.get(out.system, "string"), ctx.msg_serdes.get(out.system, "json")
    for _, k, v in produced:
        producer.send(out.name, key=serialize(key_serde, k), value=serialize(msg_serde, v))


def _where_stopped(
    records: _Records, task: _Slice, kept: int, *, stop: int, stop_source: Source | None, error: str
) -> tuple[dict[str, int], str]:
    """For a stopped task: per SSP and key bucket, the first offset not kept (where its checkpoint stops), and why
    (`stop_source`: the record it stopped at; None for a closed window)."""
    at = f"{stop_source[1]}-{stop_source[2]}@{stop_source[3]}" if stop_source is not None else "a closed window"
    buckets = records.table.column("key_bucket")
    stopped: dict[str, int] = {}
    for g in range(task.start + kept, task.end):
        sspkb = SystemStreamPartition(records.systems[g], records.streams[g], records.partitions[g], buckets[g].as_py())
        stopped.setdefault(ssp_to_key(sspkb), records.offsets[g])
    return stopped, f"{task.name} stopped at {at}: {error}"
