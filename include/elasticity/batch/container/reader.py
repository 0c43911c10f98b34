"""Reading a process slot's records: the slot's Spark task reads the offset chunks
of the SSPs its virtual tasks own buckets of, with a Kafka client (assign + seek,
stop at the end), and routes each record as it reads it: its key bucket, the
virtual task that owns it, and whether that task has processed it already
(`routing.route_records`). Only the slot's own records are kept,
so reading, routing and processing are one Spark task and a batch one Spark stage;
routing costs one C hash per record."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from elasticity.batch.container.bucket_load import BucketLoad
from elasticity.batch.container.container_process import container_process
from elasticity.batch.container.routing import RouteTable, route_records
from elasticity.batch.sinks.outputs import SOURCE_FIELDS
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.kafka import clients
from elasticity.kafka.clients import Kafka

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message

RECORD_SCHEMA = pa.schema([*SOURCE_FIELDS, ("value", pa.binary()), ("timestamp", pa.int64())])
ROUTED_SCHEMA = pa.schema([*RECORD_SCHEMA, ("key_bucket", pa.int32()), ("task_name", pa.string())])

ROWS_PER_READ = 10_000  # records a read hands on at once (an Arrow batch of read_chunk, or to the route)
Columns = dict[str, list]  # records read from one chunk: "offset", "key", "value" and "timestamp", as Python lists
STALL_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True)
class Chunk:
    bootstrap: Kafka  # the system's consumer settings
    system: str
    stream: str
    partition: int
    start: int
    end: int


def chunks(ranges: Iterable[OffsetRange], bootstraps: Mapping[str, Kafka], chunk_records: int) -> list[Chunk]:
    """Long ranges cut into contiguous chunks so that one partition can be read by several tasks."""
    out = []
    for r in ranges:
        for start in range(r.start, r.end, max(1, chunk_records)):
            out.append(
                Chunk(
                    bootstrap=bootstraps[r.ssp.system],
                    system=r.ssp.system,
                    stream=r.ssp.stream,
                    partition=r.ssp.partition,
                    start=start,
                    end=min(r.end, start + chunk_records),
                )
            )
    return out


def _consumer(bootstrap: Kafka) -> Consumer:
    """The process's reader for these settings, reused across chunks and batches."""
    consumers = container_process().consumers
    if bootstrap not in consumers:
        consumers[bootstrap] = clients.reader(bootstrap)
    return consumers[bootstrap]


def _raise_unless_transient(error: KafkaError, chunk: Chunk) -> None:
    """A read's error that no retry passes: an offset no longer in the log, or a fatal one."""
    from confluent_kafka import KafkaError, KafkaException

    if error.code() == KafkaError._AUTO_OFFSET_RESET:
        raise _truncated(chunk, error.str())
    if error.fatal():
        raise KafkaException(error)


class LogTruncatedError(RuntimeError):
    """A planned offset is no longer in the partition's log."""


def _truncated(chunk: Chunk, reason: str) -> LogTruncatedError:
    return LogTruncatedError(
        f"topic {chunk.stream!r} partition {chunk.partition}: offsets {chunk.start}..{chunk.end - 1} of this batch are no "
        f"longer in the log ({reason}): retention or DeleteRecords removed them after the batch was planned. The next "
        "plan checks the checkpoints against the log start (task.input.truncation.policy)"
    )


def read_chunk(chunk: Chunk) -> Iterator[pa.RecordBatch]:
    """The chunk's records as Arrow batches (RECORD_SCHEMA)."""
    for _, cols in read_chunks([chunk]):
        yield _batch(chunk, cols)


ChunkSource = Callable[[Iterable[Chunk]], Iterator[tuple[Chunk, Columns]]]  # chunks -> their records, each with its chunk


def read_chunks(chunks: Iterable[Chunk]) -> Iterator[tuple[Chunk, Columns]]:
    """The records of every chunk, each with its chunk, as columns (routed before any Arrow array is made). A
    system's chunks are read in one assignment of all their partitions (one fetch for them all, not an assign, a
    fetch and an unassign per partition one after another)."""
    by_bootstrap: dict[Kafka, list[Chunk]] = {}
    for c in chunks:
        by_bootstrap.setdefault(c.bootstrap, []).append(c)
    for bootstrap, group in by_bootstrap.items():
        for spans in _rounds(group):
            yield from _read_spans(_consumer(bootstrap), spans)


Partition = tuple[str, int]  # stream, partition


@dataclass
class _Span:
    """One partition's part of a read: from its first chunk's start to its last chunk's end, read up to `position`."""

    chunk: Chunk
    position: int
    end: int
    cols: Columns = field(default_factory=lambda: _empty())

    def add(self, offset: int, key: bytes | None, value: bytes | None, timestamp: int) -> None:
        self.cols["offset"].append(offset)
        self.cols["key"].append(key)
        self.cols["value"].append(value)
        self.cols["timestamp"].append(timestamp)

    def take(self) -> Columns:
        cols, self.cols = self.cols, _empty()
        return cols

    def unread(self) -> Chunk:
        """What is left of the span to read, as a chunk (for errors)."""
        return replace(self.chunk, start=self.position, end=self.end)


def _rounds(group: list[Chunk]) -> list[dict[Partition, _Span]]:
    """The chunks as spans, at most one per partition a round: a partition's contiguous chunks (as `chunks` cuts
    a range) one span, a chunk that does not follow on its partition's span in a later round."""
    rounds: list[dict[Partition, _Span]] = []
    for c in sorted(group, key=lambda c: (c.stream, c.partition, c.start)):
        key = (c.stream, c.partition)
        for spans in rounds:
            span = spans.get(key)
            if span is None:
                spans[key] = _Span(c, c.start, c.end)
                break
            if c.start == span.end:
                span.end = c.end
                break
        else:
            rounds.append({key: _Span(c, c.start, c.end)})
    return rounds


def _read_spans(consumer: Consumer, spans: dict[Partition, _Span]) -> Iterator[tuple[Chunk, Columns]]:
    """The spans' records, every partition assigned at once: records below a span's position skipped, a span done
    at its end, or when the consumer's position passes it (transaction markers, aborted records read_committed);
    a partition done is paused. No progress on any for STALL_TIMEOUT_S is a TimeoutError."""
    from confluent_kafka import TopicPartition

    assigned = [TopicPartition(stream, partition, span.position) for (stream, partition), span in spans.items()]
    consumer.assign(assigned)
    consumer.resume(assigned)  # librdkafka keeps a partition paused by an earlier read across its unassign
    try:
        open_, last_progress = {k for k, s in spans.items() if s.position < s.end}, time.monotonic()
        while open_:
            full: list[tuple[Chunk, Columns]] = []
            wanted = min(sum(spans[k].end - spans[k].position for k in open_), 5000)
            progressed, done = _take(consumer.consume(num_messages=wanted, timeout=0.5), spans, open_, full)
            yield from full
            if not progressed and open_:
                progressed, done = _passed(consumer, spans, open_)
            if done:  # one call: each pause waits for librdkafka's broker thread, about a millisecond, holding the GIL
                consumer.pause([TopicPartition(*k) for k in done])
            if progressed:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise _stalled(spans[min(open_)])
        for span in spans.values():
            if span.cols["offset"]:
                yield span.chunk, span.take()
    finally:
        consumer.resume(assigned)  # a paused partition would stay paused for the consumer's next read
        consumer.unassign()  # no fetching past the chunks while the consumer waits for the next batch


def _take(
    messages: list[Message], spans: dict[Partition, _Span], open_: set[Partition], full: list[tuple[Chunk, Columns]]
) -> tuple[bool, list[Partition]]:
    """One fetch's records into their spans (a span's columns appended to `full` every ROWS_PER_READ records);
    returns whether any span moved, and the partitions it finished (no longer `open_`)."""
    progressed, done = False, []
    for m in messages:
        key = (m.topic() or "", m.partition() or 0)
        if (error := m.error()) is not None:
            span = spans.get(key)
            _raise_unless_transient(error, span.unread() if span else next(iter(spans.values())).chunk)
            continue  # transient (a broker reconnecting): the stall timeout bounds it
        offset = m.offset()
        if key not in open_ or offset is None:
            continue
        span = spans[key]
        if offset < span.position:
            continue
        progressed = True
        if offset < span.end:
            span.add(offset, m.key(), m.value(), m.timestamp()[1])
            if len(span.cols["offset"]) >= ROWS_PER_READ:
                full.append((span.chunk, span.take()))
        span.position = min(offset + 1, span.end) if offset < span.end else span.end
        if span.position >= span.end:
            open_.discard(key)
            done.append(key)
    return progressed, done


def _passed(consumer: Consumer, spans: dict[Partition, _Span], open_: set[Partition]) -> tuple[bool, list[Partition]]:
    """Spans whose partition's position passed offsets with no record to return (markers, aborted records) moved
    to it; returns whether any moved, and the partitions so finished."""
    from confluent_kafka import TopicPartition

    progressed, done = False, []
    waiting = sorted(open_)
    for key, at in zip(waiting, consumer.position([TopicPartition(*k) for k in waiting]), strict=True):
        span = spans[key]
        if at.offset > span.position:
            span.position, progressed = min(at.offset, span.end), True
            if span.position >= span.end:
                open_.discard(key)
                done.append(key)
    return progressed, done


def _stalled(span: _Span) -> TimeoutError:
    c = span.chunk
    return TimeoutError(
        f"reading {c.stream}-{c.partition} [{c.start}, {span.end}) from {c.bootstrap}: "
        f"no records after offset {span.position} for {STALL_TIMEOUT_S:.0f}s"
    )


def _empty() -> Columns:
    return {"offset": [], "key": [], "value": [], "timestamp": []}


def _batch(chunk: Chunk, cols: Columns) -> pa.RecordBatch:
    n = len(cols["offset"])
    return pa.RecordBatch.from_arrays(
        [
            pa.array([chunk.system] * n, pa.string()),
            pa.array([chunk.stream] * n, pa.string()),
            pa.array([chunk.partition] * n, pa.int32()),
            pa.array(cols["offset"], pa.int64()),
            pa.array(cols["key"], pa.binary()),
            pa.array(cols["value"], pa.binary()),
            pa.array(cols["timestamp"], pa.int64()),
        ],
        schema=RECORD_SCHEMA,
    )


@dataclass
class ReadCounts:
    """Per virtual task of a slot: records read from its buckets, and those skipped as already processed."""

    read: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    hash_ns: int = 0
    load: BucketLoad | None = None  # the weighed factors' key buckets (RouteTable.weighed)


class Routed:
    """A slot's kept records, column by column (ROUTED_SCHEMA) in read order: one Arrow table per slot and batch,
    not a batch per partition read (at thousands of virtual tasks a slot reads a hundred partitions and more)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in ROUTED_SCHEMA.names}

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.cols, schema=ROUTED_SCHEMA)


def route(table: RouteTable, chunk: Chunk, cols: Columns, *, slot: int, counts: ReadCounts, out: Routed) -> None:
    """The records of `cols` (read from `chunk`) that slot `slot` processes (`routing.route_records`), appended
    to `out` with their key bucket and virtual task."""
    routes = route_records(table, (chunk.system, chunk.stream, chunk.partition), cols["key"], cols["offset"], slot=slot)
    counts.hash_ns += routes.hash_ns
    counts.read.update(routes.read)
    counts.skipped.update(routes.skipped)
    if counts.load is not None:
        counts.load.add(chunk.partition, routes.hashes)
    o, kept = out.cols, routes.kept
    for name in ("offset", "key", "value", "timestamp"):
        o[name] += map(cols[name].__getitem__, kept)
    o["task_name"] += routes.tasks
    o["key_bucket"] += routes.buckets
    o["system"] += [chunk.system] * len(kept)
    o["stream"] += [chunk.stream] * len(kept)
    o["partition"] += [chunk.partition] * len(kept)


@dataclass(frozen=True)
class SlotReads:
    """What each process slot reads: the chunks of the SSPs its virtual tasks own a bucket of, and the route.

    A slot reads its own SSPs in the Spark task that processes them (one stage per batch, no shuffle); an SSP whose
    buckets belong to several slots is read by each of them, which keeps only its own buckets."""

    route: RouteTable
    chunks: dict[int, tuple[Chunk, ...]]  # slot -> its chunks, in offset order per SSP

    @classmethod
    def of(cls, route: RouteTable, all_chunks: Iterable[Chunk]) -> SlotReads:
        by_slot: dict[int, list[Chunk]] = {}
        for c in all_chunks:
            firsts: dict[int, int] = {}  # slot -> the lowest offset any of its tasks still needs here
            for _, first, _, slot in route.owners.get((c.system, c.stream, c.partition), {}).values():
                firsts[slot] = min(firsts.get(slot, first), first)
            for slot, first in sorted(firsts.items()):
                if c.end > first:  # below every task's offset, a chunk holds nothing the slot processes
                    by_slot.setdefault(slot, []).append(replace(c, start=max(c.start, first)))
        return cls(route, {s: tuple(cs) for s, cs in by_slot.items()})

    def read(self, slot: int, source: ChunkSource | None = None) -> tuple[pa.Table, ReadCounts]:
        """The slot's records to process, routed, and what it read per virtual task. `source` reads the chunks:
        from Kafka (`read_chunks`), or from the app test harness's logs in memory."""
        counts, out = ReadCounts(load=BucketLoad(self.route.weighed) if self.route.weighed else None), Routed()
        for chunk, cols in (source or read_chunks)(self.chunks.get(slot, ())):
            route(self.route, chunk, cols, slot=slot, counts=counts, out=out)
        return out.table(), counts
