"""Where each process slot runs: one Spark task per slot, over a cached DataFrame.

A batch maps over `spark.range(slots)` kept in executor memory: Spark runs a task
where its input block is cached (PROCESS_LOCAL, within `spark.locality.wait`), so
slot i runs on the executor that first computed partition i, batch after batch,
and its stores stay on that executor's disk. If the executor is lost, Spark
recomputes the block on another one and the slot moves there: its stores restore
from their backends once, and stay again. The same choice makes a batch one Spark
stage: each slot's task reads its own SSPs and processes them (no shuffle).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StructField, StructType


def placed_slots(spark: SparkSession, slots: int) -> DataFrame:
    """The slots as a cached one-row-per-partition DataFrame, cached once per session: a warm Spark Connect
    session finds it from one run to the next (the same plan is the same cache entry)."""
    df = spark.range(0, slots, 1, slots)
    if df.storageLevel == StorageLevel.NONE:
        df = df.persist(StorageLevel.MEMORY_ONLY)
        df.count()  # computed now: the blocks, and so the slots, spread over the executors registered
    return df


def rebalance(spark: SparkSession, slots: int, used: set[str], recent: set[str]) -> bool:
    """After an executor was lost, Spark recomputed its blocks on the executors left, and there they stay: the
    slots crowd fewer executors than the job had while others sit idle. When a batch ran its slots on fewer
    executors than it has slots, and on fewer than recent batches did, the placement is dropped: the next
    batch places the slots again over the executors registered then (the moved slots restore their stores
    once). `used` and `recent` name executors by host and state folder."""
    if len(used) >= slots or not recent - used:
        return False
    spark.range(0, slots, 1, slots).unpersist()
    return True


def _import_stages(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: what a slot's first batch imports (the read, route, process and sink stages, the
    Kafka client, the stores and RocksDB), imported now in this Python worker, which the session keeps."""
    import elasticity.batch.container.processing  # noqa: F401
    import elasticity.kafka.consumer  # noqa: F401
    import elasticity.state.worker  # noqa: F401

    with contextlib.suppress(ImportError):
        import rocksdict  # noqa: F401
    for b in batches:
        yield pa.RecordBatch.from_pylist([{"pid": os.getpid()} for _ in range(b.num_rows)])


def ready_slots(spark: SparkSession, slots: int, rounds: int = 1) -> int:
    """A session readied for a job's batches (a server's warm-up): its placed slots cached and a Python worker
    per concurrent slot with the stages imported, mapped over `rounds` times as the engine's batches map (a
    type, not DDL; fetched as Arrow): a session's first plans cost its server more than later ones. Returns
    the workers that answered."""
    placed = placed_slots(spark, slots)
    schema = StructType([StructField("pid", LongType())])
    pids: set[int] = set()
    for _ in range(rounds):
        pids.update(placed.mapInArrow(_import_stages, schema).toArrow().column("pid").to_pylist())
    return len(pids)
