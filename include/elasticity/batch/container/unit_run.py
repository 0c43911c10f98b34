"""One unit of a process slot's virtual tasks through the app: their slices in one pass of the operator graph
(`SliceExecutor`), then what each task keeps: its summary row, its outputs (sent to Kafka, or rows for the slot's
files), its audit rows and dead letters.

An at-least-once Kafka output the broker refuses for itself (`kafka.refusals`: too large, invalid) is charged to
the input record it derives from, as a failure in the operator graph is: under `task.dead.letter.policy=dlq` a
dead letter (the refused key and value, the broker's reason), the record's other outputs kept; under `fail` its
task stops at that record. Nothing here imports Spark."""

from __future__ import annotations

import bisect
import contextlib
import json
import threading
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pyarrow as pa

from elasticity.api.context import TaskContext
from elasticity.api.executor import SliceExecutor, SliceResult
from elasticity.api.stream import ApplicationDescriptor, Message, OutputStream
from elasticity.batch.container.process_context import ProcessContext
from elasticity.batch.container.scheduling import Slice
from elasticity.batch.sinks.exactly_once import staging_root
from elasticity.batch.sinks.outputs import Source, dead_letter
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.kafka import clients
from elasticity.kafka.refusals import refusal, refused_output
from elasticity.serializers import RecordSerdeError, Serde, deserialize, serialize
from elasticity.state.table import SlotTables
from elasticity.state.worker import ContainerState

DELIVERY_S = 30.0  # the longest a sent output's acknowledgement is awaited
Refused = list[tuple[int, bytes | None, bytes | None, str]]  # (item it derives from, refused key and value, error)


@dataclass
class Producers:
    """Kafka producers shared by the threads of one container. kafka-python's producer is idempotent, and a
    record the broker refuses puts an idempotent producer in a fatal state (every record after it fails too): a
    producer that met a refusal is `renew`ed, and records that must be judged alone go on a producer that is
    not idempotent, one record in flight (`alone`)."""

    ctx: ProcessContext
    producers: dict[str, Any] = field(default_factory=dict)
    retired: list[Any] = field(default_factory=list)  # replaced by `renew`: closed with the others
    lock: threading.Lock = field(default_factory=threading.Lock)

    def producer(self, system: str):
        with self.lock:
            if system not in self.producers:
                self.producers[system] = clients.output_producer(self.ctx.output_bootstraps[system])
            return self.producers[system]

    def renew(self, system: str, broken: Any) -> None:
        """`broken` met a refusal: the threads' next records go on a new producer."""
        with self.lock:
            if self.producers.get(system) is broken:
                self.retired.append(self.producers.pop(system))

    def alone(self, system: str) -> Any:
        """A producer of the caller's own, for records that must each travel in a batch of its own; the caller
        closes it."""
        return clients.output_producer(self.ctx.output_bootstraps[system], alone=True)

    def flush(self) -> None:
        from kafka.errors import KafkaError

        for p in self.retired:  # its records were all judged: what it says of them now is its fatal state's echo
            with contextlib.suppress(KafkaError):
                p.close(timeout=DELIVERY_S)
        for p in self.producers.values():
            p.flush()
            p.close()


@dataclass(frozen=True, kw_only=True)
class Records:
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
    def of(cls, table: pa.Table) -> Records:
        names = {"systems": "system", "streams": "stream", "partitions": "partition", "offsets": "offset"}
        names |= {"keys": "key", "values": "value", "timestamps": "timestamp"}
        return cls(table=table, **{field: table.column(c).to_pylist() for field, c in names.items()})

    def source(self, row: int) -> Source:
        return self.systems[row], self.streams[row], self.partitions[row], self.offsets[row]


@dataclass(kw_only=True)
class UnitRun:
    """What a unit of virtual tasks leaves: a summary row per task, and for the slot's files each sink's rows
    (by the first slot row of the task they belong to, so that files list tasks in order), the slot rows the
    batch keeps and which of those were dead-lettered."""

    rows: list[dict[str, Any]]
    outputs: dict[str, list[tuple[int, list[tuple[Any, ...]]]]]  # root -> (task's first row, rows in OUTPUT_SCHEMA's order)
    kept: list[tuple[int, int]]  # slot rows [start, end) the batch keeps, a range per task
    failed: set[int]  # slot rows of those that were dead-lettered
    dead: list[tuple[int, dict[str, Any]]]  # (task's first row, DEAD_LETTER_SCHEMA row)


def sink_roots(ctx: ProcessContext, app: ApplicationDescriptor) -> dict[OutputStream, str | None]:
    """Each output's root for the slot's files: a Parquet output's, or an exactly-once Kafka output's staging
    root; None for a Kafka output sent at-least-once."""
    out: dict[OutputStream, str | None] = {}
    for o in app.outputs.values():
        if o.kind == "parquet":
            out[o] = f"{ctx.output_path.rstrip('/')}/{o.name}"
        else:
            out[o] = staging_root(ctx.output_path, o.system, o.name) if ctx.stage_kafka else None
    return out


def run_unit(
    ctx: ProcessContext,
    app: ApplicationDescriptor,
    unit: tuple[Slice, ...],
    records: Records,
    *,
    outputs: Producers,
    container: ContainerState | None,
    tables: SlotTables | None,
) -> UnitRun:
    """The unit's virtual tasks' slices through the app's operator graph in one pass (Samza's process() per
    message, here operator at a time), each task's messages with its own context (its stores; the container's
    tables), each task stopping on its own; then what each task keeps: its summary row, outputs, audit rows and
    dead letters."""
    messages, failed, ends = _messages(ctx, unit, records, container=container, tables=tables)
    result = SliceExecutor(
        app=app, max_concurrency=ctx.max_concurrency, callback_timeout_ms=ctx.callback_timeout_ms, policy=ctx.policy
    ).run(messages, failed, ends)
    kept = _Kept.of(unit, records, result, ends=ends, stateful=container is not None)
    refused = _send_kafka(ctx, app, kept, outputs)
    if refused and ctx.policy == "fail":
        first: dict[int, str] = {}
        for i, _, _, error in refused:
            first.setdefault(i, error)
        kept, refused = kept.stopped_at(first), []
    files, sent = _sink_rows(ctx, app, kept, refused)
    dead = _DeadLetters.of(ctx, kept, refused)
    rows = [_task_row(kept, j, sent=sent[j], dead=dead) for j in range(len(unit))]
    kept_ranges = [(t.start, t.start + kept.count(j)) for j, t in enumerate(unit)]
    return UnitRun(rows=rows, outputs=files, kept=kept_ranges, failed=dead.failed_rows, dead=dead.letters)


@dataclass(frozen=True, kw_only=True)
class _Kept:
    """What a unit's pass keeps: item i of the pass is message i (i < n) or a closed window (i >= n); each task keeps
    its records up to its stop, if it stopped."""

    unit: tuple[Slice, ...]
    records: Records
    result: SliceResult
    n: int  # the pass's messages
    ends: list[int]  # where each task's messages end
    starts: list[int]  # where they start
    kept_end: list[int]  # where each task's kept messages end
    slot_row: list[int]  # a message's row in the slot's records
    stateful: bool

    @classmethod
    def of(cls, unit: tuple[Slice, ...], records: Records, result: SliceResult, *, ends: list[int], stateful: bool) -> _Kept:
        starts = [0, *ends[:-1]]
        # where each task's kept records end: all of them, or those before its stop; a stopped task with stores keeps
        # none (its stores saw records past the stop, operator at a time: only its last checkpoint's state is
        # consistent with its offsets)
        kept_end = [
            end if j not in result.stops else (start if stateful else result.stops[j])
            for j, (start, end) in enumerate(zip(starts, ends, strict=True))
        ]
        return cls(
            unit=unit,
            records=records,
            result=result,
            n=ends[-1] if ends else 0,
            ends=ends,
            starts=starts,
            kept_end=kept_end,
            slot_row=[g for t in unit for g in range(t.start, t.end)],
            stateful=stateful,
        )

    def stopped_at(self, failed: dict[int, str]) -> _Kept:
        """Under the fail policy, what is kept once each task with a `failed` item (an output the broker refused)
        stops at the first of them, as at a record that failed in the graph."""
        stops = dict(self.result.stops)
        for i in sorted(failed):
            stops[self.task_of(i)] = min(stops.get(self.task_of(i), i), i)
        result = replace(
            self.result, failures={**self.result.failures, **failed}, stops=stops, stopped_at=min(stops.values(), default=None)
        )
        return _Kept.of(self.unit, self.records, result, ends=self.ends, stateful=self.stateful)

    def task_of(self, i: int) -> int:
        return bisect.bisect_right(self.ends, i) if i < self.n else len(self.unit) - 1  # a closed window: the unit's one task

    def kept(self, i: int, j: int) -> bool:
        """Item i of task j: a record before its task's stop, or a closed window of a task that did not stop."""
        return i < self.kept_end[j] if i < self.n else j not in self.result.stops

    def source(self, i: int) -> Source:
        """The input record an output or a dead letter comes from; for a closed window, the last record folded into it."""
        return self.records.source(self.slot_row[i]) if i < self.n else self.result.timers[i].source

    def count(self, j: int) -> int:
        """Task j's kept records."""
        return self.kept_end[j] - self.starts[j]


def _sink_rows(
    ctx: ProcessContext, app: ApplicationDescriptor, kept: _Kept, refused: Refused
) -> tuple[dict[str, list[tuple[int, list[tuple[Any, ...]]]]], list[int]]:
    """What the kept items produced as rows for the slot's file of its sink (by the first slot row of their task),
    a Kafka output sent at-least-once aside (`_send_kafka`); and how many each task sent (the refused not)."""
    unit = kept.unit
    sent = [0] * len(unit)
    files: dict[str, list[tuple[int, list[tuple[Any, ...]]]]] = {}
    for out, root in sink_roots(ctx, app).items():
        produced = []  # (task, item) of what the kept records produced
        for p in kept.result.outputs.get(out, ()):
            j = kept.task_of(p[0])
            if kept.kept(p[0], j):
                produced.append((j, p))
                sent[j] += 1
        if root is None:
            continue
        serdes = ctx.serdes_of(out.system, out.name) if out.kind == "kafka" else None
        typed = ctx.output_schemas.get(out.name) if out.kind == "parquet" else None
        by_task: dict[int, list[tuple[Any, ...]]] = {}
        for j, (i, k, v) in produced:
            task_rows = by_task.setdefault(j, [])
            system, stream, partition, offset = kept.source(i)
            columns: tuple[Any, ...] = ()
            try:
                if serdes is not None:  # made by its stream's serdes, as the at-least-once producer makes them
                    key, value = serialize(serdes[0], k, out.name, "key"), serialize(serdes[1], v, out.name)
                else:
                    key, value = k if isinstance(k, bytes) else serialize("string", k), serialize("json", v)
                    if typed is not None:  # a typed output: one column per declared field
                        columns = typed.row(v)
            except RecordSerdeError as e:  # does not fit its schema: a dead letter, as a refused output
                refused.append((i, *_as_written(k, v), f"{out.system}.{out.name}: {e}"))
                continue
            task_rows.append(
                (key, value, unit[j].name, len(task_rows), partition, offset, system, stream, ctx.generation, *columns)
            )
        files[root] = [(unit[j].start, r) for j, r in by_task.items()]
    for i, *_ in refused:
        sent[kept.task_of(i)] -= 1
    return files, sent


@dataclass(kw_only=True)
class _DeadLetters:
    """A unit's dead letters (by the first slot row of their task), and per task how many it dead-lettered and how
    many of its kept records failed."""

    ctx: ProcessContext
    kept: _Kept
    letters: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    failed_kept: list[int] = field(default_factory=list)
    failed_rows: set[int] = field(default_factory=set)  # slot rows of the kept records that failed

    @classmethod
    def of(cls, ctx: ProcessContext, kept: _Kept, refused: Refused) -> _DeadLetters:
        """Failed records, records late for a window, closed windows that failed downstream, and outputs the broker
        refused, of what the unit keeps."""
        dead = cls(ctx=ctx, kept=kept, count=[0] * len(kept.unit), failed_kept=[0] * len(kept.unit))
        result, records, n, slot_row = kept.result, kept.records, kept.n, kept.slot_row
        for i, err in sorted(result.failures.items()):
            if i < n and kept.kept(i, kept.task_of(i)):
                dead.failed_kept[kept.task_of(i)] += 1
                dead.failed_rows.add(slot_row[i])
                dead.add(i, records.keys[slot_row[i]], records.values[slot_row[i]], err)
        # late for a window: dropped by that window only, the record itself was processed
        for i, reasons in sorted(result.late.items()):
            if i < n and kept.kept(i, kept.task_of(i)):
                for reason in reasons:
                    dead.add(i, records.keys[slot_row[i]], records.values[slot_row[i]], reason)
        for i, err in sorted(result.failures.items()):  # closed windows that failed downstream, when their task did not stop
            if i >= n and kept.kept(i, kept.task_of(i)):
                pane = result.timers[i].pane
                key = serialize("string", pane.key) if not isinstance(pane.key, bytes) else pane.key
                dead.add(i, key, serialize("json", pane.as_dict()), err)
        for i, key, value, err in sorted(refused, key=lambda r: r[0]):  # the input record was processed; this output refused
            dead.add(i, key, value, err)
        return dead

    def add(self, i: int, key: bytes | None, value: bytes | None, error: str) -> None:
        j = self.kept.task_of(i)
        task = self.kept.unit[j]
        self.count[j] += 1
        letter = dead_letter(
            self.kept.source(i), key, value, task_name=TaskName(task.name), batch_id=self.ctx.batch_id, error=error
        )
        self.letters.append((task.start, letter))


def _task_row(kept: _Kept, j: int, *, sent: int, dead: _DeadLetters) -> dict[str, Any]:
    """Task j's summary row: its records, what it processed, dead-lettered and sent, and where and why it stopped."""
    t, result = kept.unit[j], kept.result
    stopped: dict[str, int] = {}
    error = None
    if j in result.stops:
        stop = result.stops[j]
        stopped, error = _where_stopped(
            kept.records,
            t,
            kept.count(j),
            stop=stop,
            stop_source=kept.source(stop) if stop < kept.n else None,
            error=result.failures[stop],
        )
    return {
        "task_name": t.name,
        "records": t.size,
        "processed": kept.count(j) - dead.failed_kept[j],  # late records count: other branches processed them
        "dead_lettered": dead.count[j],
        "kept": kept.count(j),  # what its checkpoint now passes for the first time: the records behind (coordinator.behind)
        "outputs": sent,
        "process_ns": result.process_ns * t.size // max(1, kept.n),  # the unit's pass, by the task's share of its records
        "stopped": json.dumps(stopped) if stopped else None,
        "error": error,
    }


def _messages(
    ctx: ProcessContext,
    unit: tuple[Slice, ...],
    records: Records,
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
    serdes: dict[tuple[str, str], tuple[Serde, Serde]] = {}
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
                serdes[(system, stream)] = ctx.serdes_of(system, stream)
            key_serde, msg_serde = serdes[(system, stream)]
            try:
                key = deserialize(key_serde, k, "key")
                value = deserialize(msg_serde, v, "value")
            except RecordSerdeError as e:
                key, value, failed[len(messages)] = None, None, f"deserialize: {e}"
            messages.append(Message(key=key, value=value, ssp=ssp, offset=offset, timestamp=ts, context=context))
        ends.append(len(messages))
    return messages, failed, ends


def _send_kafka(ctx: ProcessContext, app: ApplicationDescriptor, kept: _Kept, outputs: Producers) -> Refused:
    """The kept items' at-least-once Kafka outputs, on the container's shared producers; returns those the broker
    refused for themselves. Every other error fails the slot (the batch replays), never losing a record quietly."""
    refused: Refused = []
    for out, root in sink_roots(ctx, app).items():
        if root is None:
            items = [p for p in kept.result.outputs.get(out, ()) if kept.kept(p[0], kept.task_of(p[0]))]
            refused += _send(ctx, outputs, out, items)
    return refused


def _send(ctx: ProcessContext, outputs: Producers, out: OutputStream, produced: list[tuple[int, Any, Any]]) -> Refused:
    """A Kafka output's messages, with the serdes of its system, sent together; one refused among others (its
    whole batch refused: nothing of it written) is sent again alone, and is refused only if refused so."""
    producer = outputs.producer(out.system)
    key_serde, msg_serde = ctx.serdes_of(out.system, out.name)
    pending = []
    refused: Refused = []
    for i, k, v in produced:
        try:
            key, value = serialize(key_serde, k, out.name, "key"), serialize(msg_serde, v, out.name)
        except RecordSerdeError as e:  # does not fit its schema: never sent, a dead letter
            refused.append((i, *_as_written(k, v), f"{out.system}.{out.name}: {e}"))
            continue
        pending.append((i, key, value, _produce(producer, out.name, key, value)))
    verdicts = [(i, key, value, _verdict(delivery)) for i, key, value, delivery in pending]  # every one settled first
    suspects = any(v is not None and not v[2] for *_, v in verdicts)
    if suspects:
        outputs.renew(out.system, producer)
    solo = outputs.alone(out.system) if suspects else None
    try:
        for i, key, value, verdict in verdicts:
            if verdict is not None and not verdict[2]:  # awaited before the next is sent: a batch of its own
                verdict = _verdict(_produce(solo, out.name, key, value), alone=True)
            if verdict is not None:
                refused.append((i, key, value, refused_output(f"{out.system}.{out.name}", verdict[0], verdict[1])))
    finally:
        if solo is not None:
            solo.close()
    return refused


def _as_written(k: Any, v: Any) -> tuple[bytes | None, bytes | None]:
    """An output its serde could not write, as a dead letter keeps it: bytes as they are, else JSON."""
    return tuple(x if isinstance(x, bytes) or x is None else _json_or_text(x) for x in (k, v))  # type: ignore[return-value]


def _json_or_text(x: Any) -> bytes:
    try:
        return serialize("json", x) or b""
    except (TypeError, ValueError):
        return repr(x).encode("utf-8")


def _produce(producer: Any, topic: str, key: bytes | None, value: bytes | None) -> Any:
    """kafka-python's future of the record, or the refusal its client raised before sending it (too large for
    its max.request.size; or the one a producer in a fatal state repeats)."""
    from kafka.errors import KafkaError

    try:
        return producer.send(topic, key=key, value=value)
    except KafkaError as e:
        if refusal(getattr(e, "errno", None) or -1, type(e).__name__) is None:
            raise
        return e


def _verdict(delivery: Any, *, alone: bool = False) -> tuple[int, str, bool] | None:
    """None once the broker has the record; else (partition, the broker's reason, refused alone) of a refusal."""
    from kafka.errors import KafkaError

    if isinstance(delivery, KafkaError):
        return -1, str(refusal(delivery.errno, type(delivery).__name__)), alone
    try:
        delivery.get(timeout=DELIVERY_S)
        return None
    except KafkaError as e:
        reason = refusal(getattr(e, "errno", None) or -1, type(e).__name__)
        if reason is None:
            raise
        where = getattr(getattr(delivery, "_produce_future", None), "topic_partition", None)
        return (where[1] if where is not None else -1), reason, alone


def _where_stopped(
    records: Records, task: Slice, kept: int, *, stop: int, stop_source: Source | None, error: str
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
