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
from collections.abc import Iterator
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import InvalidPartitionsError
from rocksdict import WriteBatch

from elasticity import faults
from elasticity.checkpoint.state_markers import KafkaChangelogMarker
from elasticity.checkpoint.task_checkpoint import CheckpointId
from elasticity.config import KAFKA_CHANGELOG_FACTORY
from elasticity.config.kafka_clients import SystemClients
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.kafka.admin import TopicError, admin_client, probe
from elasticity.state.backends import StateBackend, StoreContext
from elasticity.state.kv import KeyValueStore
from elasticity.state.rocksdb import open_db

COMPACTED = {"cleanup.policy": "compact"}
ORDERED_ACKED = {"acks": "all", "max_in_flight_requests_per_connection": 1}
READ_IDLE_POLLS = 30  # one-second polls without a record before a read gives up


class ChangelogClient:
    """One producer per container and broker, shared by every store's backend (thread-safe)."""

    def __init__(self, kafka: SystemClients) -> None:
        self.kafka = kafka
        self._producer: KafkaProducer | None = None
        self._lock = threading.Lock()
        self._topics: set[str] = set()

    @property
    def producer(self) -> KafkaProducer:
        with self._lock:
            if self._producer is None:
                probe(self.kafka.producer)
                # the marker is the offset of the last record sent: every send acknowledged, in order, whatever acks says
                self._producer = KafkaProducer(
                    **{**self.kafka.producer.kwargs(linger_ms=5, batch_size=512 * 1024), **ORDERED_ACKED}
                )
            return self._producer

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
        with self._consumer() as c:
            end = int(c.end_offsets([tp])[tp]) if end is None else end
            if start >= end:
                return
            c.assign([tp])
            c.seek(tp, start)
            idle = 0
            while c.position(tp) < end:
                records = c.poll(timeout_ms=1000, max_records=10_000).get(tp, [])
                idle = 0 if records else idle + 1
                if idle > READ_IDLE_POLLS:
                    raise TopicError(f"changelog {tp.topic}[{tp.partition}] ends before offset {end} (at {c.position(tp)})")
                for rec in records:
                    if rec.offset >= end:
                        return
                    yield rec.offset, rec.key, rec.value

    def _consumer(self) -> KafkaConsumer:
        probe(self.kafka.consumer)
        return KafkaConsumer(
            **self.kafka.consumer.kwargs(
                client_id="elasticity-changelog", max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20
            ),
            enable_auto_commit=False,
        )

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.close()
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
        producer = self.client.producer
        futures = [producer.send(self.tp.topic, key=k, value=store.db.get(k), partition=self.tp.partition) for k in sorted(keys)]
        producer.flush()
        faults.point("state.changelog.flushed")
        return max(f.get(timeout=60).offset for f in futures)

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
