"""The job's exactly-once Kafka outputs as data quality reads them: read_committed from the last validated edge
(or whole), each record with its provenance headers, and per batch how many records its commit record says it
sent, so the checks can prove each input record reached each output once and in order per key."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from elasticity.api.stream import ApplicationDescriptor
from elasticity.batch.sinks.exactly_once import provenance
from elasticity.checkpoint.commit_record import complete_records
from elasticity.config import JobConfig
from elasticity.config.names import commit_topic
from elasticity.kafka.admin import client_settings
from elasticity.kafka.transactions import read_committed_from
from elasticity.quality import cursor
from elasticity.quality.checks import KAFKA_COLUMNS


@dataclass(frozen=True)
class KafkaOutputs:
    """The job's exactly-once Kafka outputs as a read_committed reader sees them (KAFKA_COLUMNS, from each
    record's provenance headers), per committed batch of the window and output how many records its commit record
    says it sent (`recorded`: a commit record of the batch is visible; `sent` None: written before the counts),
    and where each topic's partitions were read up to for the batches after the window (the next edge)."""

    records: pd.DataFrame
    batches: pd.DataFrame
    edges: dict[str, dict[int, int]]


def next_edges(read: Iterable[tuple[int, int, int]], ends: dict[int, int], last: int) -> dict[int, int]:
    """Per partition, where the next incremental read starts (`read`: partition, offset and batch of each record):
    the first record of a batch after `last`, else the end read up to (batches commit in order, one transaction
    each, so nothing of a later batch lies before it)."""
    edges = dict(ends)
    for partition, offset, batch in read:
        if batch > last:
            edges[partition] = min(edges[partition], offset)
    return edges


def kafka_outputs(
    config: JobConfig, app: ApplicationDescriptor, window: list[int], since: cursor.Cursor | None
) -> KafkaOutputs | None:
    """Read from the edge (incremental) or whole. None: the job has no exactly-once Kafka output."""
    if config.processing_guarantee != "exactly_once":
        return None
    outputs = sorted({(o.system, o.name) for o in app.outputs.values() if o.kind == "kafka"})
    if not outputs:
        return None
    kafka = client_settings(config, outputs[0][0])
    last = window[-1] if window else since.last_batch if since else 0
    edges_before = since.kafka_edges if since else {}
    rows, edges = [], {}
    for _, name in outputs:
        read, ends = read_committed_from(kafka, name, edges_before.get(name))
        found = [(r, provenance(r.headers)) for r in read]
        edges[name] = next_edges(((r.partition, r.offset, int(p.get("batch_id", 0))) for r, p in found), ends, last)
        rows += [{"output": name, "partition": r.partition, "offset": r.offset, "key": r.key, **p} for r, p in found]
    records = pd.DataFrame(rows, columns=KAFKA_COLUMNS)
    for c in ("source_partition", "source_offset", "batch_id", "seq"):
        records[c] = pd.to_numeric(records[c]).astype("Int64")
    if since is not None:  # later batches are the next run's
        records = records[records["batch_id"].isna() | (records["batch_id"] <= last)]
    commits = commit_topic(config.job_name, config.job_id)
    parts, ends = read_committed_from(kafka, commits, edges_before.get(commits))
    edges[commits] = next_edges(
        ((r.partition, r.offset, max(json.loads(r.value or b"{}").get("batches") or [0])) for r in parts), ends, last
    )
    sent: dict[int, dict[str, int] | None] = {}
    for record in complete_records([r.value or b"" for r in parts], config.job_name):
        sent |= {b: record.outputs.get(b) for b in record.batch_ids}  # None: a record written before the counts
    batches = pd.DataFrame(
        [
            {
                "batch_id": b,
                "output": name,
                "recorded": b in sent,
                "sent": None if (counts := sent.get(b)) is None else counts.get(name, 0),
            }
            for b in window
            for _, name in outputs
        ],
        columns=["batch_id", "output", "recorded", "sent"],
    )
    return KafkaOutputs(records, batches.astype({"batch_id": "Int64", "sent": "Float64"}), edges)


def kafka_positions(previous: pd.DataFrame | None, records: pd.DataFrame) -> pd.DataFrame:
    """Per key and input partition of each output partition, its last validated output: where its order goes on."""
    keyed = records[records["key"].notna()]
    merged = pd.concat([previous, keyed], ignore_index=True) if previous is not None and len(previous) else keyed
    group = ["output", "partition", "key", "source_system", "source_stream", "source_partition"]
    return merged.drop_duplicates(group, keep="last")[KAFKA_COLUMNS]
