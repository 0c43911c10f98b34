"""Kafka changelog state backend (Samza's KafkaChangelogStateBackendFactory).

Each store has a compacted topic; a virtual task writes to its task's changelog
partition. The keys changed since the last snapshot are sent once each, with
their value at the snapshot (a tombstone when deleted), and flushed in the
synchronous snapshot, so the marker - the offset of the newest record of this
task in the partition - is known before processing resumes.

Transactional state: records past the committed marker were written by a
commit that never completed. A restore reads only up to the marker, and `init`
then sends the committed value (or a tombstone) for every key found past it,
so that compaction can never leave an uncommitted value as a key's last word
(Samza's changelog trimming).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kafka.admin import NewPartitions, NewTopic
from kafka.errors import InvalidPartitionsError
from rocksdict import WriteBatch

from elasticity import faults
from elasticity.checkpoint.state_markers import KafkaChangelogMarker
from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.config import KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.kafka import clients
from elasticity.kafka.admin import TopicError, admin_client, probe
from elasticity.kafka.clients import SystemClients
from elasticity.kafka.consumer import read_range
from elasticity.kafka.producer import produce
from elasticity.state.backends import StateBackend, StoreContext
from elasticity.state.kv import KeyValueStore
from elasticity.state.rocksdb import open_db

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

COMPACTED = {"cleanup.policy": "compact"}
_TIMEOUT_S = 60.0


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ChangelogClient:
    """One producer per container and broker, shared by every store's backend (thread-safe)."""

    def __init__(self, kafka: SystemClients) -> None:
        self.kafka = kafka
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._topics: set[str] = set()

    @property
    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                probe(self.kafka.producer)
                self._producer = clients.ordered_producer(self.kafka.producer)
            return self._producer

    def write(self, tp: TopicPartition, records: Iterable[tuple[bytes, bytes | None]]) -> int | None:
        """Send (key, value) records to the partition, in order, and wait for every one; returns the offset of the
        last (None: no record). Raises the broker's error for a record not written."""
        from confluent_kafka import KafkaException

        producer, offsets, failed = self.producer, list[int](), list["KafkaError"]()

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failed.append(err)
            else:
                offsets.append(msg.offset() or 0)  # a delivered record has its offset

        sent = 0
        for key, value in records:
            produce(producer, tp.topic, key, value, partition=tp.partition, on_delivery=delivered)
            sent += 1
        producer.flush()  # every record delivered, or failed by delivery.timeout.ms
        if failed or len(offsets) < sent:
            raise (
                KafkaException(failed[0])
                if failed
                else TopicError(f"changelog {tp.topic}[{tp.partition}]: records not acknowledged")
            )
        return max(offsets, default=None)

    def ensure_topic(self, topic: str, partitions: int) -> None:
        """A compacted topic with at least `partitions` partitions (a rescale may add tasks)."""
        with self._lock:
            if topic in self._topics:
                return
            with admin_client(self.kafka.admin) as admin:
                described = [t for t in admin.describe_topics([topic]) if t["error_code"] == 0 and t["partitions"]]
                if not described:
                    result = admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=COMPACTED)], raise_errors=False)
                    for t in result["topics"]:
                        if t["error_code"] not in (0, 36):  # 36: created meanwhile by another container
                            raise TopicError(f"cannot create changelog topic {topic!r}: {t['error_message'] or t['error_code']}")
                elif len(described[0]["partitions"]) < partitions:
                    try:
                        admin.create_partitions({topic: NewPartitions(partitions)})
                    except InvalidPartitionsError:  # another client (a parallel move upload) grew it meanwhile
                        (now,) = admin.describe_topics([topic])
                        if len(now["partitions"]) < partitions:
                            raise
            self._topics.add(topic)

    def read(self, tp: TopicPartition, start: int, end: int | None) -> Iterator[tuple[int, bytes, bytes | None]]:
        """(offset, key, value) of records in [start, end); end None = the end at the call."""
        from confluent_kafka import TopicPartition as Partition

        probe(self.kafka.consumer)
        c = clients.log_reader(self.kafka.consumer, "elasticity-changelog")
        try:
            if end is None:
                end = c.get_watermark_offsets(Partition(tp.topic, tp.partition), timeout=_TIMEOUT_S, cached=False)[1]

            def stalled(position: int) -> TopicError:
                return TopicError(f"changelog {tp.topic}[{tp.partition}] ends before offset {end} (at {position})")

            for m in read_range(c, tp.topic, tp.partition, start=start, end=end, stalled=stalled):
                yield m.offset(), m.key(), m.value()  # type: ignore[misc]
        finally:
            c.close()

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.flush()
                self._producer = None


class KafkaChangelogStateBackend(StateBackend):
    factory = KAFKA_CHANGELOG_FACTORY
    tracks_changes = True  # the store remembers the keys written since the last snapshot

    def __init__(self, context: StoreContext, client: ChangelogClient, partitions: int) -> None:
        super().__init__(context)
        assert context.config.changelog is not None
        self.client = client
        changelog = context.config.changelog
        client.ensure_topic(changelog.stream, partitions)
        self.ssp = SystemStreamPartition(
            changelog.system, changelog.stream, context.changelog_partition, parse_task_name(context.task).key_bucket
        )
        self.tp = TopicPartition(changelog.stream, context.changelog_partition)
        self.offset: int | None = None  # newest offset of this task's records in the committed state
        self.restored_records = 0  # this task's records the last restore applied

    def _marker(self) -> str:
        return KafkaChangelogMarker(self.ssp, self.offset).to_json()

    def init(self, marker: str | None, store: KeyValueStore) -> None:
        self.offset = KafkaChangelogMarker.from_json(marker).offset if marker else None
        if not self.context.transactional:
            return
        start = 0 if self.offset is None else self.offset + 1
        tail = {key for _, key, _ in self.client.read(self.tp, start, None) if key is not None and self.context.owns(key)}
        if tail:  # trim: the committed value has the last word again
            self.offset = max(self.offset or -1, self._send(store, tail))

    def snapshot(self, store: KeyValueStore, checkpoint_id: CheckpointId) -> str:
        assert store.changes is not None
        changed, store.changes = store.changes, set()
        if changed:
            self.offset = max(self.offset or -1, self._send(store, changed))
        return self._marker()

    def _send(self, store: KeyValueStore, keys: set[bytes]) -> int:
        last = self.client.write(self.tp, ((k, store.db.get(k)) for k in sorted(keys)))
        faults.point("state.changelog.flushed")
        assert last is not None  # keys were sent
        return last

    def upload(self, checkpoint_id: CheckpointId, folder: Path, pending: str | None) -> str:
        return pending or self._marker()

    def restore(self, marker: str | None, folder: Path) -> str:
        """Replay this task's records up to the marker (to the end without one, or without transactions)."""
        parsed = KafkaChangelogMarker.from_json(marker) if marker else None
        offset = parsed.offset if parsed is not None else None
        if parsed is not None and offset is None:
            end: int | None = 0
        elif offset is not None and self.context.transactional:
            end = offset + 1
        else:
            end = None
        db = open_db(folder)
        newest = parsed.offset if parsed else None
        self.restored_records = 0
        try:
            batch = WriteBatch(raw_mode=True)
            for offset, key, value in self.client.read(self.tp, 0, end):
                newest = offset if newest is None else max(newest, offset)
                if key is None or not self.context.owns(key):
                    continue
                self.restored_records += 1
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
                if batch.len() >= 10_000:
                    db.write(batch)
                    batch = WriteBatch(raw_mode=True)
            db.write(batch)
        finally:
            db.close()
        return KafkaChangelogMarker(self.ssp, newest).to_json()
