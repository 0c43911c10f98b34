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

import gc
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from elasticity.api.context import TaskContext
from elasticity.api.executor import SliceExecutor, SliceResult
from elasticity.api.stream import ApplicationDescriptor, Message, OutputStream, load_application
from elasticity.batch.exactly_once import staging_root
from elasticity.batch.reader import SlotReads
from elasticity.batch.sinks import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, Source, dead_letter, in_file, write_batch_file
from elasticity.config import elasticity_home
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.kafka.admin import Kafka, settings
from elasticity.serializers import RecordSerdeError, deserialize, serialize
from elasticity.state.commit_manager import Markers
from elasticity.state.table import SideInputBatch, SlotTables
from elasticity.state.worker import BatchState, ContainerState, open_container

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
        ("read_ns", pa.int64()),  # the slot's read and route time (on its first row)
        ("hash_ns", pa.int64()),  # the slot's key hashing time (on its first row)
        ("executor", pa.string()),  # where the slot ran: host and state folder
        ("stopped", pa.string()),  # JSON {sspkb key: first offset not processed}, when the task stopped early
        ("error", pa.string()),
        ("checkpoint_id", pa.string()),  # of the task's state snapshot in this batch (stateful jobs)
        ("state_markers", pa.string()),  # JSON CheckpointV2 state-checkpoint-markers of that snapshot
        ("state_metrics", pa.string()),  # JSON {store: metrics of this batch, and where the store was restored from}
    ]
)


@dataclass(frozen=True)
class ProcessContext:
    """Everything a worker needs, shipped with the closure (plain values only)."""

    job_name: str
    batch_id: int
    app_class: str
    job_inputs: tuple[SystemStream, ...]
    key_serdes: dict[str, str]  # system -> serde
    msg_serdes: dict[str, str]
    output_path: str
    audit_path: str
    dead_letter_path: str
    output_bootstraps: dict[str, Kafka]  # system -> its producer's settings, for Kafka outputs
    policy: str = "dlq"
    max_concurrency: int = 1
    callback_timeout_ms: int | None = None
    thread_pool_size: int = 0  # job.container.thread.pool.size (the config's default is 64): 0 = one after another
    state: BatchState | None = None  # a job with stores
    tables: SideInputBatch | None = None  # a job with tables: their side inputs and this batch's read-up-to offsets
    stage_kafka: bool = False  # processing.guarantee=exactly_once: Kafka outputs wait for the commit's transaction


_apps: dict[tuple[str | None, tuple[SystemStream, ...]], ApplicationDescriptor] = {}
_apps_lock = threading.Lock()


def _application(ctx: ProcessContext) -> ApplicationDescriptor:
    key = (ctx.app_class, ctx.job_inputs)
    with _apps_lock:
        if key not in _apps:
            _apps[key] = load_application(ctx.app_class, ctx.job_inputs)
        return _apps[key]


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


_slots_started = 0


def _freeze_long_lived() -> None:
    """PySpark's daemon runs a full gc.collect() in a reused Python worker after each of its tasks, holding the
    GIL while that task's snapshot uploads run and before the next task is read. A warm worker holds some 130k
    long-lived objects (its modules, clients, stores), and each such collection took 80-370 ms here. What is alive
    as a process's second slot starts is long-lived (the first slot's imports and caches; the first slot's garbage
    is collected): it is frozen once (gc.freeze), so later collections scan only what is newer."""
    global _slots_started
    _slots_started += 1
    if _slots_started == 2:
        gc.freeze()


def run_slots(ctx: ProcessContext, reads: SlotReads, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over the placed slots (`spark.placement`): each input row is a process slot, whose
    records are read, routed and processed here, in one Spark task."""
    _freeze_long_lived()
    for b in batches:
        for slot in b.column(0).to_pylist():
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
    columns = _Columns.of(table)  # once per slot: a column's values per slice cost more than the slice's records
    slices = [(names[a], columns.part(table, a, b)) for a, b in zip(bounds, bounds[1:], strict=False)]
    outputs = _Outputs(ctx)
    tables = SlotTables(ctx.tables, _application(ctx).tables, slot) if ctx.tables else None  # caught up before any slice
    container = None
    markers: dict[TaskName, Markers] = {}
    sinks: dict[str, _SliceSinks] = {}  # task -> what it leaves for the slot's files

    def run(name: str, part: _Part) -> dict[str, Any]:
        """A virtual task restores its stores as its slice starts, and snapshots them and starts their upload
        as it ends, so that the slot's other tasks run meanwhile (each task checkpoints on its own)."""
        task = TaskName(name)
        if container is not None:
            container.restore(task)
        row, sinks[name] = _run_slice(ctx, task, part, outputs, container, tables)
        if container is not None and not row["stopped"]:
            assert ctx.state is not None
            markers[task] = container.commit(container.snapshot(ctx.state.checkpoint_id, task))
        return row

    # Samza's job.container.thread.pool.size: 0 = no pool, the slices run one after another
    pool = min(ctx.thread_pool_size, len(slices))
    try:
        container = open_container(ctx.state, _application(ctx).stores.values(), slot) if ctx.state else None
        if pool <= 1:
            rows = [run(n, t) for n, t in slices]
        else:
            # the longest slices first: their stores open before the others' (the opens take the GIL in turn)
            rows = _side_by_side(run, sorted(slices, key=lambda nt: -nt[1].table.num_rows), pool)
        _write_slot_files(ctx, slot, [sinks[name] for name, _ in slices])
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


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _threads(size: int) -> ThreadPoolExecutor:
    """The process's slice threads, kept from batch to batch: a pool started per slot and batch spent more
    than the slices themselves at thousands of small virtual tasks (a thread and a future per slice)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < size:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(size, thread_name_prefix="vtask")
        return _pool


def _side_by_side(run: Any, slices: list[tuple[str, _Part]], threads: int) -> list[dict[str, Any]]:
    """`run` over the slices on `threads` threads, each taking the next slice as it finishes one (in the given
    order); every slice runs, and the first failure in that order is raised once all have ended."""
    rows: list[Any] = [None] * len(slices)
    errors: list[BaseException | None] = [None] * len(slices)
    queue = iter(enumerate(slices))
    lock = threading.Lock()

    def runner() -> None:
        while True:
            with lock:
                i, (name, part) = next(queue, (-1, (None, None)))
            if i < 0:
                return
            try:
                rows[i] = run(name, part)
            except BaseException as e:  # noqa: BLE001 - raised below, after the other slices
                errors[i] = e

    for f in [_threads(threads).submit(runner) for _ in range(threads)]:
        f.result()
    failure = next((e for e in errors if e is not None), None)
    if failure is not None:
        raise failure
    return rows


@dataclass(frozen=True)
class _SliceSinks:
    """What a slice leaves for its slot's files, as plain values: an Arrow table per slice and sink costs more
    than a small slice's rows, and at thousands of virtual tasks most slices hold a record or two."""

    outputs: dict[str, list[tuple[Any, ...]]]  # Parquet output root -> rows in OUTPUT_SCHEMA's file order
    kept: pa.Table  # the routed records the batch keeps: their audit rows
    failed: frozenset[int]  # positions in `kept` that were dead-lettered
    dead: list[dict[str, Any]]  # DEAD_LETTER_SCHEMA rows


def _write_slot_files(ctx: ProcessContext, slot: int, parts: list[_SliceSinks]) -> None:
    """Each sink's rows of the slot's virtual tasks, in task order, as one file per (batch, slot), which a retry
    of the batch overwrites (a retry placed differently finds the batch's folder emptied first: `delete_batches`).
    Every Parquet output and the audit get their file, empty or not; dead letters only when there are some."""
    name = f"slot-{slot}"
    for root in parts[0].outputs if parts else ():
        rows = [r for p in parts for r in p.outputs[root]]
        columns = zip(*rows, strict=True) if rows else [()] * len(in_file(OUTPUT_SCHEMA))
        write_batch_file(root, ctx.batch_id, name, _table(list(columns), in_file(OUTPUT_SCHEMA)))
    kept = pa.concat_tables(p.kept for p in parts).combine_chunks()
    seq = [i for p in parts for i in range(p.kept.num_rows)]
    status = ["dead_letter" if i in p.failed else "processed" for p in parts for i in range(p.kept.num_rows)]
    audit = _table(
        [*(kept.column(n) for n in ("system", "stream", "partition", "offset", "key", "task_name")), seq, status],
        in_file(AUDIT_SCHEMA),
    )
    write_batch_file(ctx.audit_path, ctx.batch_id, name, audit)
    dead = [d for p in parts for d in p.dead]
    if dead:
        write_batch_file(ctx.dead_letter_path, ctx.batch_id, name, pa.Table.from_pylist(dead, schema=DEAD_LETTER_SCHEMA))


def _table(columns: list[Any], schema: pa.Schema) -> pa.Table:
    """Columns, Arrow or plain values, as a table of `schema`."""
    arrays = [
        c if isinstance(c, pa.ChunkedArray | pa.Array) else pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _run_slice(
    ctx: ProcessContext,
    task: TaskName,
    part: _Part,
    outputs: _Outputs,
    container: ContainerState | None,
    tables: SlotTables | None,
) -> tuple[dict[str, Any], _SliceSinks]:
    """One virtual task's slice run through the app; its summary row says what the driver's checkpoint needs,
    and its outputs, audit and dead letters go to the slot's files."""
    ran = _execute(ctx, task, part, container, tables)
    sent, files = _write_outputs(ctx, ran, outputs)
    dead = _dead_letters(ctx, ran)
    failed = frozenset(i for i in ran.result.failures if i < ran.kept)
    stopped, error = _where_stopped(ran)
    return {
        "task_name": task.name,
        "records": ran.records,
        "processed": ran.kept
        - sum(1 for i in ran.result.failures if i < ran.kept),  # late records count: other branches processed them
        "dead_lettered": len(dead),
        "outputs": sent,
        "process_ns": ran.result.process_ns,
        "stopped": json.dumps(stopped) if stopped else None,
        "error": error,
    }, _SliceSinks(files, ran.table.slice(0, ran.kept), failed, dead)


@dataclass(frozen=True)
class _SliceRun:
    """A slice after the app ran over it: what the sinks and the summary are written from."""

    task: TaskName
    table: pa.Table  # the routed records, in offset order
    coordinates: _Coordinates  # the same records' coordinates, as Python lists
    result: SliceResult
    kept: int  # records the batch keeps, from the first (see `_kept`)

    @property
    def records(self) -> int:
        return self.table.num_rows

    @property
    def whole(self) -> bool:
        """The task did not stop: every record is kept, and so are the windows closed at the slice's end."""
        return self.result.stopped_at is None

    def source(self, i: int) -> Source:
        """The input record an output or a dead letter comes from; for a closed window, the last record folded into it."""
        if i < self.records:
            c = self.coordinates
            return c.systems[i], c.streams[i], c.partitions[i], c.offsets[i]
        return self.result.timers[i].source

    def raw(self, i: int) -> tuple[bytes | None, bytes | None]:
        """Record i's key and value as read (for its dead letter)."""
        return self.table.column("key")[i].as_py(), self.table.column("value")[i].as_py()


@dataclass(frozen=True)
class _Coordinates:
    """Where each record of a slice comes from, column by column (no Python row per record)."""

    systems: list[str]
    streams: list[str]
    partitions: list[int]
    offsets: list[int]


@dataclass(frozen=True)
class _Part:
    """A virtual task's slice of the slot's records: as Arrow, and its columns as Python lists."""

    table: pa.Table
    coordinates: _Coordinates
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps: list[int]


@dataclass(frozen=True)
class _Columns:
    """The slot's records' columns as Python lists, taken once and cut per slice."""

    lists: tuple[list[Any], ...]  # system, stream, partition, offset, key, value, timestamp

    @classmethod
    def of(cls, table: pa.Table) -> _Columns:
        names = ("system", "stream", "partition", "offset", "key", "value", "timestamp")
        return cls(tuple(table.column(c).to_pylist() for c in names))

    def part(self, table: pa.Table, a: int, b: int) -> _Part:
        systems, streams, partitions, offsets, keys, values, timestamps = (c[a:b] for c in self.lists)
        return _Part(table.slice(a, b - a), _Coordinates(systems, streams, partitions, offsets), keys, values, timestamps)


def _execute(
    ctx: ProcessContext,
    task: TaskName,
    part: _Part,
    container: ContainerState | None,
    tables: SlotTables | None,
) -> _SliceRun:
    """The slice through the app's operator graph (Samza's process() per message, here operator at a time),
    with the task's stores and the container's tables in reach of its operators."""
    context = TaskContext(task, partial(container.store, task) if container else None, tables.table if tables else None)
    messages, failed = _messages(ctx, part, context)
    result = SliceExecutor(_application(ctx), ctx.max_concurrency, ctx.callback_timeout_ms, ctx.policy).run(messages, failed)
    records = part.table.num_rows
    return _SliceRun(
        task, part.table, part.coordinates, result, _kept(result.stopped_at, records, stateful=container is not None)
    )


def _messages(ctx: ProcessContext, part: _Part, context: TaskContext) -> tuple[list[Message], dict[int, str]]:
    """Each record decoded with its system's serdes, column by column; one its serde cannot read fails alone (a
    dead letter), not the slice."""
    c, keys, values, timestamps = part.coordinates, part.keys, part.values, part.timestamps
    messages, failed = [], {}
    ssps: dict[tuple[str, str, int], SystemStreamPartition] = {}
    serdes: dict[str, tuple[str, str]] = {}
    for i, (system, stream, partition, offset) in enumerate(zip(c.systems, c.streams, c.partitions, c.offsets, strict=True)):
        ssp = ssps.get((system, stream, partition))
        if ssp is None:
            ssp = ssps[(system, stream, partition)] = SystemStreamPartition(system, stream, partition)
            serdes[system] = (ctx.key_serdes.get(system, "string"), ctx.msg_serdes.get(system, "json"))
        key_serde, msg_serde = serdes[system]
        try:
            key = deserialize(key_serde, keys[i], "key")
            value = deserialize(msg_serde, values[i], "value")
        except RecordSerdeError as e:
            key, value, failed[i] = None, None, f"deserialize: {e}"
        messages.append(Message(key, value, ssp, offset, timestamps[i], context))
    return messages, failed


def _kept(stopped_at: int | None, records: int, stateful: bool) -> int:
    """How many records the batch keeps: all, or those before the stop (task.dead.letter.policy=fail). A stopped
    task with stores keeps none: its stores saw records past the stop (operator at a time), and only its last
    checkpoint's state is consistent with its offsets."""
    if stopped_at is None:
        return records
    return 0 if stateful else stopped_at


def _write_outputs(ctx: ProcessContext, ran: _SliceRun, outputs: _Outputs) -> tuple[int, dict[str, list[tuple[Any, ...]]]]:
    """Each output stream's messages from the kept records: a Parquet output's rows for the slot's file, a Kafka
    output's staged for the commit's transaction (exactly-once) or sent (at-least-once). Returns how many there
    were, and the rows for the slot's files by root."""
    sent, files = 0, {}
    for out in _application(ctx).outputs.values():
        produced = _kept_outputs(ran, out)
        sent += len(produced)
        if out.kind == "parquet":
            files[f"{ctx.output_path.rstrip('/')}/{out.name}"] = _output_rows(ran, produced)
        elif ctx.stage_kafka:
            serdes = ctx.key_serdes.get(out.system, "string"), ctx.msg_serdes.get(out.system, "json")
            files[staging_root(ctx.output_path, out.system, out.name)] = _output_rows(ran, produced, serdes)
        else:
            _send(ctx, outputs, out, produced)
    return sent, files


def _kept_outputs(ran: _SliceRun, out: OutputStream) -> list[tuple[int, Any, Any]]:
    """What the kept records produced on `out`; closed windows (indices past the slice) come out only when the
    whole slice is kept, as they fold records past any stop."""
    return [p for p in ran.result.outputs.get(out, []) if p[0] < ran.kept or (ran.whole and p[0] >= ran.records)]


def _output_rows(
    ran: _SliceRun, produced: list[tuple[int, Any, Any]], kafka_serdes: tuple[str, str] | None = None
) -> list[tuple[Any, ...]]:
    """An output's rows (OUTPUT_SCHEMA's columns but the batch's id, which its folder names), each with its place
    in the task's output order and the input record it comes from; a Kafka output's key and value are made by
    its system's serdes, as the at-least-once producer makes them."""
    rows = []
    for seq, (i, k, v) in enumerate(produced):
        system, stream, partition, offset = ran.source(i)
        if kafka_serdes is not None:
            key, value = serialize(kafka_serdes[0], k), serialize(kafka_serdes[1], v)
        else:
            key, value = k if isinstance(k, bytes) else serialize("string", k), serialize("json", v)
        rows.append((key, value, ran.task.name, seq, partition, offset, system, stream))
    return rows


def _send(ctx: ProcessContext, outputs: _Outputs, out: OutputStream, produced: list[tuple[int, Any, Any]]) -> None:
    """A Kafka output's messages, with the serdes of its system, on the container's shared producer."""
    producer = outputs.producer(out.system)
    key_serde, msg_serde = ctx.key_serdes.get(out.system, "string"), ctx.msg_serdes.get(out.system, "json")
    for _, k, v in produced:
        producer.send(out.name, key=serialize(key_serde, k), value=serialize(msg_serde, v))


def _dead_letters(ctx: ProcessContext, ran: _SliceRun) -> list[dict[str, Any]]:
    """The kept records that failed, those late for a window and, when the whole slice is kept, the closed
    windows that failed downstream."""
    result = ran.result
    dead = [
        dead_letter(ran.source(i), *ran.raw(i), ran.task, ctx.batch_id, err)
        for i, err in sorted(result.failures.items())
        if i < ran.kept
    ]
    dead += [  # late for a window: dropped by that window only, the record itself was processed
        dead_letter(ran.source(i), *ran.raw(i), ran.task, ctx.batch_id, reason)
        for i, reasons in sorted(result.late.items())
        if i < ran.kept
        for reason in reasons
    ]
    if ran.whole:
        dead += [_window_dead_letter(ctx, ran, i, err) for i, err in sorted(result.failures.items()) if i >= ran.records]
    return dead


def _window_dead_letter(ctx: ProcessContext, ran: _SliceRun, i: int, error: str) -> dict[str, Any]:
    """A closed window that failed downstream: its last record's coordinates, the window as the value."""
    pane = ran.result.timers[i].pane
    key = serialize("string", pane.key) if not isinstance(pane.key, bytes) else pane.key
    return dead_letter(ran.source(i), key, serialize("json", pane.as_dict()), ran.task, ctx.batch_id, error)


def _where_stopped(ran: _SliceRun) -> tuple[dict[str, int], str | None]:
    """For a stopped task: per SSP and key bucket, the first offset not kept (where its checkpoint stops), and why."""
    stop = ran.result.stopped_at
    if stop is None:
        return {}, None
    at = f"{ran.source(stop)[1]}-{ran.source(stop)[2]}@{ran.source(stop)[3]}" if stop < ran.records else "a closed window"
    stopped: dict[str, int] = {}
    for r in ran.table.slice(ran.kept).to_pylist():
        sspkb = SystemStreamPartition(r["system"], r["stream"], r["partition"], r["key_bucket"])
        stopped.setdefault(ssp_to_key(sspkb), r["offset"])
    return stopped, f"{ran.task.name} stopped at {at}: {ran.result.failures[stop]}"
