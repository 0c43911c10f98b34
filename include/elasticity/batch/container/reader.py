"""Reading a process slot's records: the slot's Spark task reads the offset chunks
of the SSPs its virtual tasks own buckets of, with a Kafka client (assign + seek,
stop at the end), and routes each record as it reads it: its key bucket, the
virtual task that owns it, and whether that task has processed it already
(`routing.route_records`). Only the slot's own records are kept,
so reading, routing and processing are one Spark task and a batch one Spark stage;
routing costs one C hash per record."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from elasticity.batch.container.container_process import container_process
from elasticity.batch.container.routing import RouteTable, route_records
from elasticity.batch.sinks.outputs import SOURCE_FIELDS
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.kafka.admin import Kafka, settings

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError
    from kafka import KafkaConsumer

RECORD_SCHEMA = pa.schema([*SOURCE_FIELDS, ("value", pa.binary()), ("timestamp", pa.int64())])
ROUTED_SCHEMA = pa.schema([*RECORD_SCHEMA, ("key_bucket", pa.int32()), ("task_name", pa.string())])

LIBRDKAFKA_DEFAULTS = {
    "group.id": "elasticity-reader",  # librdkafka asks for one; partitions are assigned, no offset is committed
    "client.id": "elasticity-reader",
    "enable.auto.commit": False,
    "isolation.level": "read_committed",  # a transactional producer's records once committed, never aborted ones
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "log.connection.close": False,  # an idle connection the broker closes between batches is not an error
    "auto.offset.reset": "error",  # a planned offset no longer in the log is an error, never a silent jump
}
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


def _consumer(bootstrap: Kafka) -> KafkaConsumer:
    from kafka import KafkaConsumer

    consumers = container_process().consumers  # one per client settings and Python worker, reused across chunks
    c = consumers.get(bootstrap)
    if c is None:
        c = KafkaConsumer(
            **settings(bootstrap).kwargs(
                client_id="elasticity-reader",
                isolation_level="read_committed",
                max_partition_fetch_bytes=8 * 1024 * 1024,
                fetch_max_bytes=64 * 1024 * 1024,
            ),
            enable_auto_commit=False,
            auto_offset_reset="none",  # an offset no longer in the log raises, as librdkafka's "error" does
        )
        consumers[bootstrap] = c
    return c


def _fast_consumer(bootstrap: Kafka) -> Consumer | None:
    """confluent-kafka's consumer for these settings (librdkafka parses fetched records in C; every setting, a SASL
    login too, has its librdkafka counterpart), or None where the process set kafka-python's reader in its place."""
    from confluent_kafka import Consumer

    fast_consumers = container_process().fast_consumers
    if bootstrap not in fast_consumers:
        fast_consumers[bootstrap] = Consumer(settings(bootstrap).librdkafka(**LIBRDKAFKA_DEFAULTS))
    return fast_consumers[bootstrap]


Record = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp (ms)
Poll = Callable[[int], list[Record]]  # at most n records
Position = Callable[[], int]  # the offset the consumer fetches next (-1: none yet)


@contextlib.contextmanager
def _assigned(chunk: Chunk) -> Iterator[tuple[Poll, Position]]:
    """A consumer assigned to the chunk's partition at its start; yields its poll and its position. The position
    passes offsets that hold no record to return: transaction markers and, read_committed, aborted records."""
    fast = _fast_consumer(chunk.bootstrap)
    if fast is not None:
        from confluent_kafka import TopicPartition as Partition

        def consume(n: int) -> list[Record]:
            out = []
            for m in fast.consume(num_messages=min(n, 5000), timeout=0.5):
                if (error := m.error()) is not None:
                    _raise_unless_transient(error, chunk)
                    continue  # transient (a broker reconnecting): the stall timeout bounds it
                offset = m.offset()
                assert offset is not None  # a message that is not an error has one
                out.append((offset, m.key(), m.value(), m.timestamp()[1]))
            return out

        def position() -> int:
            return fast.position([Partition(chunk.stream, chunk.partition)])[0].offset

        fast.assign([Partition(chunk.stream, chunk.partition, chunk.start)])
        try:
            yield consume, position
        finally:
            fast.unassign()  # no fetching past the chunk while the consumer waits for the next
        return
    from kafka import TopicPartition

    consumer = _consumer(chunk.bootstrap)
    tp = TopicPartition(chunk.stream, chunk.partition)
    consumer.assign([tp])
    consumer.seek(tp, chunk.start)
    from kafka.errors import OffsetOutOfRangeError

    def poll(n: int) -> list[Record]:
        try:
            found = consumer.poll(timeout_ms=500, max_records=min(n, 5000)).get(tp, [])
        except OffsetOutOfRangeError as e:
            raise _truncated(chunk, str(e)) from None
        return [(r.offset, r.key, r.value, r.timestamp) for r in found]

    yield poll, lambda: consumer.position(tp)


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
    for cols in _chunk_columns(chunk):
        yield _batch(chunk, cols)


def _chunk_columns(chunk: Chunk) -> Iterator[Columns]:
    with _assigned(chunk) as (poll, consumer_position):
        position, cols, last_progress = chunk.start, _empty(), time.monotonic()
        while position < chunk.end:
            polled = poll(chunk.end - position)
            for offset, key, value, timestamp in polled:
                if offset >= chunk.end:
                    position = chunk.end
                    break
                if offset < position:
                    continue
                cols["offset"].append(offset)
                cols["key"].append(key)
                cols["value"].append(value)
                cols["timestamp"].append(timestamp)
                position = offset + 1
                if len(cols["offset"]) >= ROWS_PER_READ:
                    yield cols
                    cols = _empty()
            if polled:
                last_progress = time.monotonic()
            elif (passed := consumer_position()) > position:  # offsets with no record to return (markers, aborted)
                position, last_progress = min(passed, chunk.end), time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise TimeoutError(
                    f"reading {chunk.stream}-{chunk.partition} [{chunk.start}, {chunk.end}) from {chunk.bootstrap}: "
                    f"no records after offset {position} for {STALL_TIMEOUT_S:.0f}s"
                )
        if cols["offset"]:
            yield cols


ChunkSource = Callable[[Iterable[Chunk]], Iterator[tuple[Chunk, Columns]]]  # chunks -> their records, each with its chunk


def read_chunks(chunks: Iterable[Chunk]) -> Iterator[tuple[Chunk, Columns]]:
    """The records of every chunk, each with its chunk, as columns (routed before any Arrow array is made). A
    system librdkafka can read is read in one assignment of all its chunks' partitions (one fetch for them all,
    not an assign, a fetch and an unassign per partition one after another); the others chunk by chunk."""
    by_bootstrap: dict[Kafka, list[Chunk]] = {}
    for c in chunks:
        by_bootstrap.setdefault(c.bootstrap, []).append(c)
    for bootstrap, group in by_bootstrap.items():
        fast = _fast_consumer(bootstrap) if len(group) > 1 else None
        if fast is None:
            for c in group:
                yield from ((c, cols) for cols in _chunk_columns(c))
        else:
            yield from _read_together(fast, group)


def _read_together(fast: Consumer, group: list[Chunk]) -> Iterator[tuple[Chunk, Columns]]:
    """`read_chunk`'s rules over several partitions at once: a partition's chunks (contiguous, as `chunks` cuts
    a range) read as one span, records below a span's position skipped, and a span done at its end, or when the
    consumer's position passes it (markers, aborted records); a partition done is paused."""
    from confluent_kafka import TopicPartition as Partition

    spans: dict[tuple[str, int], _Span] = {}
    for c in sorted(group, key=lambda c: (c.stream, c.partition, c.start)):
        span = spans.get((c.stream, c.partition))
        if span is None:
            spans[(c.stream, c.partition)] = _Span(c, c.start, c.end)
        elif c.start == span.end:
            span.end = c.end
        else:  # not contiguous: read apart
            yield from ((c, cols) for cols in _chunk_columns(c))
    assigned = [Partition(stream, partition, span.position) for (stream, partition), span in spans.items()]
    fast.assign(assigned)
    fast.resume(assigned)  # librdkafka keeps a partition paused by an earlier read across its unassign
    try:
        open_, last_progress = {k for k, s in spans.items() if s.position < s.end}, time.monotonic()
        while open_:
            progressed, done = False, []
            for m in fast.consume(num_messages=min(sum(spans[k].end - spans[k].position for k in open_), 5000), timeout=0.5):
                key = (m.topic() or "", m.partition() or 0)
                if (error := m.error()) is not None:
                    span = spans.get(key)
                    _raise_unless_transient(error, replace(span.chunk, start=span.position, end=span.end) if span else group[0])
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
                        yield span.chunk, span.take()
                span.position = min(offset + 1, span.end) if offset < span.end else span.end
                if span.position >= span.end:
                    open_.discard(key)
                    done.append(Partition(*key))
            if not progressed and open_:
                waiting = sorted(open_)
                for key, at in zip(waiting, fast.position([Partition(*k) for k in waiting]), strict=True):
                    span = spans[key]
                    if at.offset > span.position:  # offsets with no record to return (markers, aborted)
                        span.position, progressed = min(at.offset, span.end), True
                        if span.position >= span.end:
                            open_.discard(key)
                            done.append(Partition(*key))
            if done:  # one call: each pause waits for librdkafka's broker thread, about a millisecond, holding the GIL
                fast.pause(done)
            if progressed:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
                stream, partition = waiting[0]
                span = spans[waiting[0]]
                raise TimeoutError(
                    f"reading {stream}-{partition} [{span.chunk.start}, {span.end}) from {span.chunk.bootstrap}: "
                    f"no records after offset {span.position} for {STALL_TIMEOUT_S:.0f}s"
                )
        for span in spans.values():
            if span.cols["offset"]:
                yield span.chunk, span.take()
    finally:
        fast.resume(assigned)  # a paused partition would stay paused for the consumer's next read
        fast.unassign()  # no fetching past the chunks while the consumer waits for the next batch


@dataclass
class _Span:
    """One partition's part of a slot's read: from its first chunk's start to its last chunk's end."""

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
        counts, out = ReadCounts(), Routed()
        for chunk, cols in (source or read_chunks)(self.chunks.get(slot, ())):
            route(self.route, chunk, cols, slot=slot, counts=counts, out=out)
        return out.table(), counts
