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

    @contextmanager
    def _using(self, system: str) -> Iterator[KafkaConsumer]:
        with consumer(client_settings(self.config, system)) as c:
            yield c

    def offsets(self, ssps: Iterable[SystemStreamPartition], which: str) -> dict[SystemStreamPartition, int]:
        """`oldest` (log start) or `upcoming` (high watermark) offset of each partition."""
        return self._read_offsets(ssps, (which,))[which]

    def bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> tuple[dict[SystemStreamPartition, int], dict[SystemStreamPartition, int]]:
        """Each partition's log start and high watermark, with one client per system."""
        found = self._read_offsets(ssps, ("oldest", "upcoming"))
        return found["oldest"], found["upcoming"]

    def _read_offsets(
        self, ssps: Iterable[SystemStreamPartition], which: tuple[str, ...]
    ) -> dict[str, dict[SystemStreamPartition, int]]:
        out: dict[str, dict[SystemStreamPartition, int]] = {w: {} for w in which}
        for system, group in self._by_system(ssps).items():
            tps = {TopicPartition(s.stream, s.partition): s for s in group}
            with self._using(system) as c:
                for w in which:
                    found = c.beginning_offsets(list(tps)) if w == "oldest" else c.end_offsets(list(tps))
                    out[w].update({tps[tp]: int(o) for tp, o in found.items()})
        return out


class HeldKafkaInputs(KafkaInputs):
    """KafkaInputs that keep one consumer per system open across calls, for a watcher polling the lag every
    few seconds: a new client per poll (probe, bootstrap, metadata) costs more CPU than the poll itself.
    Partition counts come from the consumer's metadata, refreshed every `metadata_max_age_ms`. A failed call
    closes the system's consumer; the next call opens a new one."""

    def __init__(self, config: JobConfig, metadata_max_age_ms: int = 30_000) -> None:
        super().__init__(config)
        self._metadata_max_age_ms = metadata_max_age_ms
        self._consumers: dict[str, KafkaConsumer] = {}

    def _consumer(self, system: str) -> KafkaConsumer:
        if system not in self._consumers:
            kafka = client_settings(self.config, system)
            probe(kafka)
            self._consumers[system] = KafkaConsumer(
                **kafka.kwargs(
                    request_timeout_ms=15_000,
                    client_id="elasticity-lag",
                    isolation_level="read_committed",
                    metadata_max_age_ms=self._metadata_max_age_ms,
                ),
                enable_auto_commit=False,
            )
        return self._consumers[system]

    @contextmanager
    def _using(self, system: str) -> Iterator[KafkaConsumer]:
        try:
            yield self._consumer(system)
        except Exception:
            self._drop(system)
            raise

    def _drop(self, system: str) -> None:
        c = self._consumers.pop(system, None)
        if c is not None:
            c.close()

    def partition_counts(self, streams: Iterable[SystemStream]) -> dict[SystemStream, int]:
        counts: dict[SystemStream, int] = {}
        for s in streams:
            with self._using(s.system) as c:
                found = c.partitions_for_topic(s.stream)
            if not found:
                raise TopicError(f"topic {s.stream!r} (input {s}) not found on {client_settings(self.config, s.system)}")
            counts[s] = len(found)
        return counts

    def close(self) -> None:
        for system in list(self._consumers):
            self._drop(system)


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
