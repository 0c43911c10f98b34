"""A job's Kafka transactions: its outputs and the commit record that proves them, visible together or not at all.

As Kafka Streams commits its input offsets inside the transaction that carries its outputs, a batch's Kafka
outputs and its commit record (the checkpoints it commits) go in one transaction to the job's commit topic; a
run that dies after the Kafka commit is finished from that record, one that dies before it leaves nothing
visible to `read_committed` readers.

Each run writes under a transactional.id of its own and first fences the one the run before used:
`init_transactions` on the old id aborts what that run left open and makes its producer's commit fail, even if
its process still runs. A fresh id per run is also a fresh producer id: a broker that hands a fetch aborted
transactions ending before the fetched offsets (the embedded one does) cannot hide a later run's committed
records behind an earlier run's abort, as it would records of the same producer id.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from elasticity.kafka.admin import Kafka, TopicError, create_topic, probe, settings

if TYPE_CHECKING:
    from confluent_kafka import Message, Producer

TRANSACTION_TIMEOUT_MS = 60_000  # the longest a dead run's open transaction holds readers at its first record
_TIMEOUT_S = 30.0
_PRODUCER = {
    "enable.idempotence": True,
    "acks": "all",
    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
    "delivery.timeout.ms": TRANSACTION_TIMEOUT_MS // 2,
    "partitioner": "murmur2_random",  # Java's (and kafka-python's) partitioner: a key lands where theirs put it
    "linger.ms": 5,
    "log.connection.close": False,
}


class TransactionFenced(RuntimeError):
    """A newer run fenced this one: its transaction cannot commit, and nothing it wrote will show."""


def transactional_id(job: str, job_id: str, run: str) -> str:
    """One per job and run (`run` unique per attempt)."""
    return f"elasticity.{job}.{job_id}.{run}"


def commit_topic(job: str, job_id: str) -> str:
    """A job's commit records, named as Samza names its checkpoint topic (`__samza_checkpoint_ver_1_for_<job>_<id>`)."""
    return f"__elasticity_commits_{job}_{job_id}"


def _producer(kafka: Kafka, tid: str) -> Producer:
    from confluent_kafka import Producer

    kafka = settings(kafka)
    probe(kafka)  # a dead address or a refused SASL login named in seconds, not after init_transactions' 30
    p = Producer({**kafka.librdkafka(**_PRODUCER), "transactional.id": tid})
    p.init_transactions(_TIMEOUT_S)
    return p


def fence(kafka: Kafka, tid: str) -> None:
    """Abort what `tid` left open and fence its producer: what it has not committed never shows."""
    _producer(kafka, tid).flush(_TIMEOUT_S)


@dataclass(frozen=True)
class OutputRecord:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class JobTransactions:
    """One run's transactional producer: each `commit` is one transaction of outputs and a commit record."""

    def __init__(self, kafka: Kafka, tid: str, commits: str) -> None:
        self.kafka, self.tid, self.commits = kafka, tid, commits
        create_topic(kafka, commits, 1)
        self._producer = _producer(kafka, tid)
        self.in_transaction = False  # one began and has neither committed nor aborted

    def commit(self, outputs: Iterable[OutputRecord], commit_record: Iterable[bytes]) -> int:
        """Every output in order, then the commit record's parts, in one transaction; returns how many outputs.
        TransactionFenced: a newer run fenced this one (nothing of this transaction shows)."""
        from confluent_kafka import KafkaError, KafkaException

        p, sent = self._producer, 0
        try:
            p.begin_transaction()
            self.in_transaction = True
            for r in outputs:
                self._produce(r.topic, r.key, r.value, r.headers)
                sent += 1
            for part in commit_record:
                self._produce(self.commits, None, part)
            p.commit_transaction(_TIMEOUT_S)
            self.in_transaction = False
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
                raise TransactionFenced(f"transactional.id {self.tid!r} on {self.kafka} was fenced by a newer run") from e
            if error.txn_requires_abort():
                p.abort_transaction(_TIMEOUT_S)
                self.in_transaction = False
            raise
        return sent

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, headers: tuple = ()) -> None:
        while True:
            try:
                self._producer.produce(topic, key=key, value=value, headers=list(headers) or None)
                return
            except BufferError:  # the local queue is full: let deliveries drain
                self._producer.poll(0.05)

    def close(self) -> None:
        self._producer.flush(_TIMEOUT_S)


def read_commit_tail(kafka: Kafka, commits: str, window: int | None = 256) -> list[bytes]:
    """The committed values among the last `window` offsets (None: all) of a job's commit topic, oldest first (transaction
    markers take offsets too; read_committed, an aborted commit record never shows); empty while it does not exist."""
    return [r.value or b"" for r in read_committed(kafka, commits, window)]


@dataclass(frozen=True, kw_only=True)
class CommittedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def _committed(partition: int, m: Message) -> CommittedRecord:
    """A consumed record as read (librdkafka gives headers as a list of (name, bytes) pairs)."""
    headers = cast("list[tuple[str, bytes | None]]", m.headers() or [])
    return CommittedRecord(
        partition=partition, offset=cast(int, m.offset()), key=m.key(), value=m.value(), headers=tuple(headers)
    )


def read_committed(kafka: Kafka, topic: str, tail: int | None = None) -> list[CommittedRecord]:
    """What a read_committed consumer sees of `topic` (all of it, or the last `tail` offsets of each partition),
    partition by partition in log order; empty while the topic does not exist."""
    return read_committed_from(kafka, topic, tail=tail)[0]


def read_committed_from(
    kafka: Kafka, topic: str, starts: Mapping[int, int] | None = None, tail: int | None = None
) -> tuple[list[CommittedRecord], dict[int, int]]:
    """What a read_committed consumer sees of `topic` from `starts` (partition -> offset; a partition not named
    from its start), and per partition the offset read up to: everything below it is decided (committed or
    aborted), so a later read from there misses nothing. Empty while the topic does not exist."""
    from confluent_kafka import Consumer, TopicPartition

    config = settings(kafka).librdkafka(**{"group.id": "elasticity-read-committed", "enable.auto.commit": False})
    c = Consumer({**config, "isolation.level": "read_committed"})
    out: list[CommittedRecord] = []
    ends: dict[int, int] = {}
    try:
        found = c.list_topics(topic, timeout=_TIMEOUT_S).topics.get(topic)
        if found is None or found.error is not None:
            return [], {}
        for p in sorted(found.partitions):
            tp = TopicPartition(topic, p)
            low, high = c.get_watermark_offsets(tp, timeout=_TIMEOUT_S, cached=False)
            start = max(low, (starts or {}).get(p, low) if tail is None else high - tail)
            if start > high:  # the log is shorter than the edge knew: made again, so read it all
                start = low
            ends[p] = high
            if high <= start:
                continue
            c.assign([TopicPartition(topic, p, start)])
            deadline = time.monotonic() + _TIMEOUT_S
            while c.position([tp])[0].offset < high:  # past transaction markers and aborted records too
                if time.monotonic() > deadline:
                    raise TopicError(f"reading {topic}-{p} up to offset {high} from {kafka}: no progress for {_TIMEOUT_S:.0f}s")
                got = c.consume(num_messages=1000, timeout=0.5)
                if got:
                    deadline = time.monotonic() + _TIMEOUT_S
                out += [_committed(p, m) for m in got if m.error() is None]
        return out, ends
    finally:
        c.close()
