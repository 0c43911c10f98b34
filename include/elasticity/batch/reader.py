"""Read stage: each Spark task reads contiguous offset chunks with a Kafka client
(assign + seek, stop at the end), so an SSP is read once per batch whatever the
factor, and routes each record as it reads it: its key bucket, the virtual task
that owns it and that task's process slot, and whether that task has processed
it already (below its offset, or under one of its watermarks). Routing here costs
one C hash per record and saves the Spark stage a JVM join would need."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from elasticity.batch.sinks import SOURCE_FIELDS
from elasticity.checkpoint.batch_plan import OffsetRange
from elasticity.checkpoint.task_checkpoint import Watermark
from elasticity.jobmodel.keybucket import record_hash
from elasticity.jobmodel.model import NO_KEY_BUCKET

if TYPE_CHECKING:
    from kafka import KafkaConsumer

RECORD_SCHEMA = pa.schema([*SOURCE_FIELDS, ("value", pa.binary()), ("timestamp", pa.int64())])
RECORD_DDL = "system string, stream string, partition int, offset long, key binary, value binary, timestamp long"
ROUTED_READ_DDL = RECORD_DDL + ", key_bucket int, task_name string, slot int, skip boolean, hash_ns long"

_consumers: dict[str, KafkaConsumer] = {}  # one consumer per bootstrap and Python worker, reused across chunks
ROWS_PER_ARROW_BATCH = 10_000
STALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Chunk:
    bootstrap: str
    system: str
    stream: str
    partition: int
    start: int
    end: int


def chunks(ranges: Iterable[OffsetRange], bootstraps: dict[str, str], chunk_records: int) -> list[Chunk]:
    """Long ranges cut into contiguous chunks so that one partition can be read by several tasks."""
    out = []
    for r in ranges:
        for start in range(r.start, r.end, max(1, chunk_records)):
            out.append(
                Chunk(
                    bootstraps[r.ssp.system],
                    r.ssp.system,
                    r.ssp.stream,
                    r.ssp.partition,
                    start,
                    min(r.end, start + chunk_records),
                )
            )
    return out


def read_tasks(cs: list[Chunk], chunk_records: int) -> list[int]:
    """The read task of each chunk: chunks packed in order, up to `chunk_records` records per task.
    A small batch is one Spark task (each costs a Python worker round trip); a big one spreads out."""
    task, filled, out = 0, 0, []
    for c in cs:
        if filled and filled + (c.end - c.start) > chunk_records:
            task, filled = task + 1, 0
        filled += c.end - c.start
        out.append(task)
    return out


def _consumer(bootstrap: str) -> KafkaConsumer:
    from kafka import KafkaConsumer

    c = _consumers.get(bootstrap)
    if c is None:
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            client_id="elasticity-reader",
            max_partition_fetch_bytes=8 * 1024 * 1024,
            fetch_max_bytes=64 * 1024 * 1024,
        )
        _consumers[bootstrap] = c
    return c


def close_consumers() -> None:
    """Close the cached consumers (a driver that read directly, not a Spark worker)."""
    while _consumers:
        _consumers.popitem()[1].close()


def read_chunk(chunk: Chunk) -> Iterator[pa.RecordBatch]:
    from kafka import TopicPartition

    consumer = _consumer(chunk.bootstrap)
    tp = TopicPartition(chunk.stream, chunk.partition)
    consumer.assign([tp])
    consumer.seek(tp, chunk.start)
    position, cols, last_progress = chunk.start, _empty(), time.monotonic()
    while position < chunk.end:
        polled = consumer.poll(timeout_ms=500, max_records=5000).get(tp, [])
        for rec in polled:
            if rec.offset >= chunk.end:
                position = chunk.end
                break
            if rec.offset < position:
                continue
            cols["offset"].append(rec.offset)
            cols["key"].append(rec.key)
            cols["value"].append(rec.value)
            cols["timestamp"].append(rec.timestamp)
            position = rec.offset + 1
            if len(cols["offset"]) >= ROWS_PER_ARROW_BATCH:
                yield _batch(chunk, cols)
                cols = _empty()
        if polled:
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
            raise TimeoutError(
                f"reading {chunk.stream}-{chunk.partition} [{chunk.start}, {chunk.end}) from {chunk.bootstrap}: "
                f"no records after offset {position} for {STALL_TIMEOUT_S:.0f}s"
            )
    if cols["offset"]:
        yield _batch(chunk, cols)


def _empty() -> dict[str, list]:
    return {"offset": [], "key": [], "value": [], "timestamp": []}


def _batch(chunk: Chunk, cols: dict[str, list]) -> pa.RecordBatch:
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


Owner = tuple[str, int, tuple[Watermark, ...], int]  # task name, its start offset, its watermarks, its process slot


@dataclass(frozen=True)
class RouteTable:
    """Per input partition (system, stream, partition) and key bucket: the owning virtual task."""

    factor: int
    owners: dict[tuple[str, str, int], dict[int, Owner]]


def route_batch(table: RouteTable, chunk: Chunk, batch: pa.RecordBatch) -> pa.RecordBatch:
    owners = table.owners[(chunk.system, chunk.stream, chunk.partition)]
    offsets, keys = batch.column("offset").to_pylist(), batch.column("key").to_pylist()
    start = time.perf_counter_ns()
    hashes = [record_hash(k, o) for k, o in zip(keys, offsets, strict=True)]
    hash_ns = time.perf_counter_ns() - start
    factor = table.factor
    buckets = [h % factor for h in hashes] if factor > 1 else [NO_KEY_BUCKET] * len(hashes)
    tasks, slots, skips = [], [], []
    for h, b, o in zip(hashes, buckets, offsets, strict=True):
        name, first, marks, slot = owners[b]
        tasks.append(name)
        slots.append(slot)
        skips.append(o < first or any(w.covers(h, o) for w in marks))
    return pa.RecordBatch.from_arrays(
        [
            *batch.columns,
            pa.array(buckets, pa.int32()),
            pa.array(tasks, pa.string()),
            pa.array(slots, pa.int32()),
            pa.array(skips, pa.bool_()),
            pa.array([hash_ns] + [0] * (len(hashes) - 1), pa.int64()),
        ],
        names=[*batch.schema.names, "key_bucket", "task_name", "slot", "skip", "hash_ns"],
    )


def read_assigned(assigned: list[list[Chunk]], table: RouteTable, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function over `spark.range(n, numPartitions=n)`: Spark partition i reads the
    chunks of read task i (no shuffle to place them: one stage less per batch)."""
    for b in batches:
        for task in b.column(0).to_pylist():
            for chunk in assigned[task]:
                for records in read_chunk(chunk):
                    yield route_batch(table, chunk, records)
