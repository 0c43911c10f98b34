"""The keys of one micro-batch: what it reads, how it processes, and where its sinks write. Part of `JobConfig`."""

from __future__ import annotations

from dataclasses import dataclass

from elasticity.config.keys import (
    key,
)
from elasticity.config.parsers import (
    int_range,
    nonempty,
    retention_ms,
)


@dataclass(frozen=True, kw_only=True)
class BatchKeys:
    """One micro-batch: read, process, sinks."""

    batch_max_records: int = key(
        "batch.max.records",
        int_range(1),
        "100000",
        doc="Most records one micro-batch reads over all partitions (like Spark's maxOffsetsPerTrigger).",
        samza="none in Samza (it streams); Spark's maxOffsetsPerTrigger",
    )
    read_chunk_records: int = key(
        "batch.read.chunk.records",
        int_range(1),
        "50000",
        doc="Longest offset range one Spark task reads; longer ranges are cut into chunks read in parallel.",
    )
    app_class: str = key(
        "app.class",
        nonempty,
        "elasticity.apps.identity:build",
        doc="module:factory building the operator chain (default: the identity app, every record unchanged to parquet.output).",
        samza="Samza's key names a SamzaApplication class; here a module:factory function building the same high-level API",
    )
    output_path: str | None = key(
        "job.output.path", nonempty, None, doc="Root of the Parquet outputs (default $ELASTICITY_HOME/<job>/output)."
    )
    audit_path: str | None = key(
        "job.audit.path",
        nonempty,
        None,
        doc="Parquet audit dataset, one row per processed input record (default $ELASTICITY_HOME/<job>/audit).",
    )
    dead_letter_path: str | None = key(
        "job.dead.letter.path", nonempty, None, doc="Parquet dead-letter dataset (default $ELASTICITY_HOME/<job>/dead-letter)."
    )
    compaction_target_bytes: int = key(
        "job.output.compaction.target.bytes",
        int_range(1),
        "134217728",
        doc="Size compaction merges the small files of validated batches to, in every Parquet sink (outputs, audit, "
        "dead letters): compacted-<first>-<last>.parquet files of about this many bytes (default 128 MiB).",
        samza="none in Samza; the target file size of Spark/Delta's OPTIMIZE and Iceberg's write.target-file-size-bytes",
    )
    output_retention_ms: int | None = key(
        "job.output.retention.ms",
        retention_ms,
        "-1",
        doc="How long the Parquet outputs of a validated batch are kept after it was written; -1: for ever (they are "
        "the job's results; compacted, never expired unless set).",
        samza="Kafka's topic retention.ms, -1 for no limit",
    )
    audit_retention_ms: int | None = key(
        "job.audit.retention.ms",
        retention_ms,
        "604800000",
        doc="How long the audit rows of a batch data quality has validated are kept after the batch was written "
        "(default 7 days); -1: for ever. Rows of a batch not yet validated are never expired.",
        samza="Kafka's topic retention.ms (its default, 7 days), -1 for no limit",
    )
    dead_letter_retention_ms: int | None = key(
        "job.dead.letter.retention.ms",
        retention_ms,
        "2592000000",
        doc="How long the dead letters of a validated batch are kept after the batch was written (default 30 days); -1: for ever.",
        samza="Kafka's topic retention.ms, -1 for no limit",
    )
