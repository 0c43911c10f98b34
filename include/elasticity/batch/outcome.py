"""A batch's outcome as the process stage reports it: one summary row per virtual task (SUMMARY_SCHEMA), read
on the driver as TaskSummary tuples. Nothing here imports Spark."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

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
    read_ns: int
    hash_ns: int
    executor: str
    stopped: str | None
    error: str | None
    checkpoint_id: str | None
    state_markers: str | None
    state_metrics: str | None

    @classmethod
    def of(cls, table: pa.Table) -> list[TaskSummary]:
        """The rows of a table of SUMMARY_SCHEMA, column by column."""
        return [cls(*r) for r in zip(*(table.column(n).to_pylist() for n in cls._fields), strict=True)]
