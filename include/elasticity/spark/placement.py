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

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession


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
