"""Reading partition metadata and offsets with the standard consumer API, and a partition's records by range."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kafka import KafkaConsumer

from elasticity.config import JobConfig
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.kafka import clients
from elasticity.kafka.admin import TopicError, client_settings, partition_counts, probe
from elasticity.kafka.clients import Kafka, settings

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message
    from confluent_kafka.admin import AdminClient


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
        return self._read_offsets(ssps, (which,))[which]

    def bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> tuple[dict[SystemStreamPartition, int], dict[SystemStreamPartition, int]]:
        """Each partition's log start and high watermark, with one client per system."""
        found = self._read_offsets(ssps, ("oldest", "upcoming"))
        return found["oldest"], found["upcoming"]

    def offsets_for_time(
        self, ssps: Iterable[SystemStreamPartition], timestamp_ms: int
    ) -> dict[SystemStreamPartition, int | None]:
        """Per partition, the earliest offset whose record timestamp is at or after `timestamp_ms` (Kafka's
        ListOffsets by timestamp, through librdkafka's offsets_for_times); None when no record is."""
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as Partition

        out: dict[SystemStreamPartition, int | None] = {}
        for system, group in self._by_system(ssps).items():
            kafka = client_settings(self.config, system)
            probe(kafka)
            c = clients.log_reader(kafka, "elasticity-replay")
            try:
                asked = [Partition(s.stream, s.partition, timestamp_ms) for s in group]
                for tp in c.offsets_for_times(asked, timeout=_TIMEOUT_S):
                    if tp.error is not None:
                        raise KafkaException(tp.error)
                    out[SystemStreamPartition(system, tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
            finally:
                c.close()
        return out

    @contextmanager
    def _admin(self, system: str) -> Iterator[AdminClient]:
        kafka = client_settings(self.config, system, "admin")
        probe(kafka)
        yield clients.offsets_admin(kafka)

    def _read_offsets(
        self, ssps: Iterable[SystemStreamPartition], which: tuple[str, ...]
    ) -> dict[str, dict[SystemStreamPartition, int]]:
        """Each end asked of every partition at once (one ListOffsets request per end, in flight together);
        read_committed: `upcoming` is the last stable offset."""
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as Partition
        from confluent_kafka.admin import OffsetSpec

        spec = {"oldest": OffsetSpec.earliest(), "upcoming": OffsetSpec.latest()}
        out: dict[str, dict[SystemStreamPartition, int]] = {w: {} for w in which}
        for system, group in self._by_system(ssps).items():
            with self._admin(system) as admin:
                asked = {
                    w: admin.list_offsets(
                        {Partition(s.stream, s.partition): spec[w] for s in group},
                        isolation_level=IsolationLevel.READ_COMMITTED,
                        request_timeout=_TIMEOUT_S,
                    )
                    for w in which
                }
                for w, futures in asked.items():
                    for tp, future in futures.items():
                        out[w][SystemStreamPartition(system, tp.topic, tp.partition)] = future.result().offset
        return out


class HeldKafkaInputs(KafkaInputs):
    """KafkaInputs that keep their clients per system open across calls (a consumer for partition counts, an
    admin client for offsets), for a watcher polling the lag every few seconds or a run of batches: a new client
    per poll (probe, bootstrap, metadata) costs more CPU than the poll itself. Partition counts come from the
    consumer's metadata, refreshed every `metadata_max_age_ms`. A failed call drops the client it used; the next
    call opens a new one."""

    def __init__(self, config: JobConfig, metadata_max_age_ms: int = 30_000) -> None:
        super().__init__(config)
        self._metadata_max_age_ms = metadata_max_age_ms
        self._consumers: dict[str, KafkaConsumer] = {}
        self._admins: dict[str, AdminClient] = {}

    @contextmanager
    def _admin(self, system: str) -> Iterator[AdminClient]:
        if system not in self._admins:
            with super()._admin(system) as admin:
                self._admins[system] = admin
        try:
            yield self._admins[system]
        except Exception:
            self._admins.pop(system, None)
            raise

    def _consumer(self, system: str) -> KafkaConsumer:
        if system not in self._consumers:
            kafka = client_settings(self.config, system)
            probe(kafka)
            self._consumers[system] = clients.metadata_consumer(
                kafka, client_id="elasticity-lag", metadata_max_age_ms=self._metadata_max_age_ms
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
        self._admins.clear()  # librdkafka's clients close as they are dropped


STALL_TIMEOUT_S = 30.0
_TIMEOUT_S = 30.0
Record = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp (ms)


def read_range(
    c: Consumer, topic: str, partition: int, *, start: int, end: int, stalled: Callable[[int], Exception]
) -> Iterator[Message]:
    """The records of offsets [start, end) of one partition, oldest first, with a consumer of `clients.log_reader`:
    done once the consumer's position passes `end` (transaction markers, aborted records, compacted gaps take
    offsets too). No progress for STALL_TIMEOUT_S raises `stalled(position)`."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka import TopicPartition as Partition

    c.assign([Partition(topic, partition, start)])
    try:
        position, last_progress = start, time.monotonic()
        while position < end:
            got = c.consume(num_messages=min(end - position, 5000), timeout=0.5)
            for m in got:
                if (error := m.error()) is not None:
                    if error.fatal() or error.code() == KafkaError._AUTO_OFFSET_RESET:
                        raise KafkaException(error)
                    continue  # transient (a broker reconnecting): the stall timeout bounds it
                offset = m.offset()
                if offset is None or offset < position:
                    continue
                if offset >= end:
                    position = end
                    break
                yield m
                position = offset + 1
            if got:
                last_progress = time.monotonic()
            elif (passed := c.position([Partition(topic, partition)])[0].offset) > position:
                position, last_progress = min(passed, end), time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise stalled(position)
    finally:
        c.unassign()


def log_bounds(c: Consumer, kafka: Kafka, topic: str, partition: int) -> tuple[int, int]:
    """The partition's log start and end (read_committed: the last stable offset), asked with a consumer of
    `clients.log_reader`; TopicError when the partition does not exist."""
    from confluent_kafka import TopicPartition as Partition

    found = c.list_topics(topic, timeout=_TIMEOUT_S).topics.get(topic)
    if found is None or found.error is not None or partition not in found.partitions:
        raise TopicError(f"topic {topic!r} has no partition {partition} on {kafka}")
    return c.get_watermark_offsets(Partition(topic, partition), timeout=_TIMEOUT_S, cached=False)


def read_log(kafka: Kafka, topic: str, partition: int = 0) -> list[Record]:
    """Every record of one partition, oldest first, as (offset, key, value, timestamp ms): a log read whole,
    such as Samza's checkpoint topic."""
    kafka = settings(kafka)
    probe(kafka)
    c = clients.log_reader(kafka, "elasticity")
    try:
        start, end = log_bounds(c, kafka, topic, partition)

        def stalled(position: int) -> TopicError:
            return TopicError(
                f"reading {topic}-{partition} from {kafka}: no records after offset {position} for {STALL_TIMEOUT_S:.0f}s"
            )

        return [
            (m.offset(), m.key(), m.value(), m.timestamp()[1])  # type: ignore[misc]
            for m in read_range(c, topic, partition, start=start, end=end, stalled=stalled)
        ]
    finally:
        c.close()
