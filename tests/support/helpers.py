"""Setting up a job for the integration tests: a fresh topic, and a config whose
state (store, outputs, audit, dead letters, reports) lives in one folder."""

from __future__ import annotations

import uuid
from pathlib import Path

from elasticity.apps.demo_feed import demo_records
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send


def fresh_topic(bootstrap: str, prefix: str, partitions: int, records: int = 0, keys: int = 20, seed: int = 7) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    if records:
        send(bootstrap, topic, demo_records(records, keys=keys, seed=seed))
    return topic


def job_props(name: str, topic: str, folder: Path, factor: int = 2, **extra: str) -> dict[str, str]:
    return {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": str(factor),
        "job.container.thread.pool.size": "64",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "task.checkpoint.store.url": f"sqlite:///{folder / 'store.db'}",
        "job.output.path": str(folder / "out"),
        "job.audit.path": str(folder / "audit"),
        "job.dead.letter.path": str(folder / "dlq"),
        "job.report.path": str(folder / "report"),
        **extra,
    }


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def read_log(
    bootstrap: str, topic: str, isolation: str = "read_uncommitted"
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every record of `topic` up to each partition's high watermark, partition
    by partition, in log order: read to the end the broker names, never until a poll times out."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": isolation})
    out = []
    try:
        for p in sorted(c.list_topics(topic, timeout=10).topics[topic].partitions):
            tp = TopicPartition(topic, p)
            low, high = c.get_watermark_offsets(tp, timeout=10, cached=False)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            while c.position([tp])[0].offset < high:  # past markers and aborted records too
                out += [(p, m.offset(), m.key(), m.value()) for m in c.consume(500, timeout=0.5) if m.error() is None]
        return out
    finally:
        c.close()


def read_committed(bootstrap: str, topic: str, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every record a read_committed consumer of `topic` sees from offset `start` of
    each partition, partition by partition, in log order."""
    return [(p, k, v) for p, o, k, v in read_log(bootstrap, topic, "read_committed") if o >= start]


def edge_table(store, job: str, table: str):
    """One Parquet table of the job's data-quality edge as the store keeps it: positions, state or kafka_positions."""
    import io

    import pandas as pd

    edge = store.quality_edge(job)
    assert edge is not None, f"job {job!r} has no data-quality edge"
    return pd.read_parquet(io.BytesIO(getattr(edge, table)))


def put_edge_table(store, job: str, table: str, frame) -> None:
    """Replace one table of the job's edge (the rest of its row as it was), as a tampered edge would read."""
    import dataclasses
    import io

    out = io.BytesIO()
    frame.to_parquet(out, index=False)
    store.save_quality_edge(job, dataclasses.replace(store.quality_edge(job), **{table: out.getvalue()}))
