"""Reading partition metadata and offsets with the standard consumer API."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from kafka import KafkaConsumer, TopicPartition

from elasticity.config import JobConfig
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.kafka.admin import Kafka, TopicError, client_settings, partition_counts, probe, settings


@contextmanager
def consumer(kafka: Kafka) -> Iterator[KafkaConsumer]:
    kafka = settings(kafka)
    probe(kafka)
    # read_committed: a transactional producer's records once committed, and the end offset is the last stable one
    c = KafkaConsumer(
        **kafka.kwargs(request_timeout_ms=15_000, client_id="elasticity", isolation_level="read_committed"),
        enable_auto_commit=False,
    )
    try:
        yield c
    finally:
        c.close()


class KafkaInputs:
    """The job's inputs as the brokers see them (one bootstrap per system)."""

    def __init__(self, config: JobConfig) -> None:
        self.config = config

    def _by_system(self, ssps: Iterable[SystemStreamPartition]) -> dict[str, list[SystemStreamPartition]]:
        out: dict[str, list[SystemStreamPartition]] = {}
        for s in ssps:
            out.setdefault(s.system, []).append(s.without_key_bucket())
        return out

    def partition_counts(self, streams: Iterable[SystemStream]) -> dict[SystemStream, int]:
        counts: dict[SystemStream, int] = {}
        streams = list(streams)
        for system in sorted({s.system for s in streams}):
            admin = client_settings(self.config, system, "admin")
            counts.update(partition_counts(admin, [s for s in streams if s.system == system]))
        return counts

    def offsets(self, ssps: Iterable[SystemStreamPartition], which: str) -> dict[SystemStreamPartition, int]:
        """`oldest` (log start) or `upcoming` (high watermark) offset of each partition."""
        out = {}
        for system, group in self._by_system(ssps).items():
            with consumer(client_settings(self.config, system)) as c:
                tps = {TopicPartition(s.stream, s.partition): s for s in group}
                found = c.beginning_offsets(list(tps)) if which == "oldest" else c.end_offsets(list(tps))
                out.update({tps[tp]: int(o) for tp, o in found.items()})
        return out


STALL_TIMEOUT_S = 30.0


def read_log(kafka: Kafka, topic: str, partition: int = 0) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """Every record of one partition, oldest first, as (offset, key, value, timestamp ms): a log read whole,
    such as Samza's checkpoint topic."""
    bootstrap = str(kafka)
    with consumer(kafka) as c:
        tp = TopicPartition(topic, partition)
        if partition not in (c.partitions_for_topic(topic) or set()):
            raise TopicError(f"topic {topic!r} has no partition {partition} on {bootstrap}")
        c.assign([tp])
        start, end = c.beginning_offsets([tp])[tp], c.end_offsets([tp])[tp]
        c.seek(tp, start)
        out: list[tuple[int, bytes | None, bytes | None, int]] = []
        position, last_progress = start, time.monotonic()
        while position < end:
            polled = c.poll(timeout_ms=500, max_records=5000).get(tp, [])
            out += [(r.offset, r.key, r.value, r.timestamp) for r in polled if r.offset < end]
            if polled:
                position, last_progress = polled[-1].offset + 1, time.monotonic()
            elif (passed := c.position(tp)) > position:  # offsets with no record to return (markers, aborted)
                position, last_progress = passed, time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise TopicError(
                    f"reading {topic}-{partition} from {bootstrap}: no records after offset {position} for {STALL_TIMEOUT_S:.0f}s"
                )
        return out
