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

An output record the broker refuses (`kafka.refusals`: too large, invalid) makes its transaction abort, and
sending it again never helps. `JobTransactions.commit` finds which records were refused for themselves (the
broker refuses a whole record batch: those of a refused batch are sent again each alone; the records' delivery
reports are read only after a first refusal, as each costs a Python call) and then either
commits every other record in a new transaction, with the commit record counting only those (the refused ones
are handed to `on_refused`, before that commit, to be dead-lettered), or, without `on_refused`, raises
`OutputRefused` with nothing of the transaction visible. A producer whose transaction was aborted for a
refusal is replaced by a new one under the same transactional.id (its sequence numbers are spent: a broker
refuses its next transaction as out of order).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from elasticity.kafka import clients
from elasticity.kafka.admin import TopicError, create_topic, probe
from elasticity.kafka.clients import Kafka, settings
from elasticity.kafka.producer import produce
from elasticity.kafka.refusals import Refusal, decided, refusal

if TYPE_CHECKING:
    from confluent_kafka import Message, Producer

_TIMEOUT_S = 30.0


class TransactionFenced(RuntimeError):
    """A newer run fenced this one: its transaction cannot commit, and nothing it wrote will show."""


class OutputRefused(RuntimeError):
    """The broker refused an output record for itself, and no one takes it (task.dead.letter.policy=fail): the
    transaction is aborted, nothing of it shows, and sending it again would be refused again."""

    def __init__(self, message: str, refused: Refusal) -> None:
        super().__init__(message)
        self.refused = refused


CommitParts = Iterable[bytes] | Callable[[frozenset[int]], Iterable[bytes]]  # the parts, or them given the refused


def transactional_id(job: str, job_id: str, run: str) -> str:
    """One per job and run (`run` unique per attempt)."""
    return f"elasticity.{job}.{job_id}.{run}"


def _producer(kafka: Kafka, tid: str) -> Producer:
    kafka = settings(kafka)
    probe(kafka)  # a dead address or a refused SASL login named in seconds, not after init_transactions' 30
    p = clients.transactional_producer(kafka, tid)
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


class _Taken:
    """A commit's outputs, taken from the caller's iterable as its first transaction sends them (a caller may
    yield them lazily, inside the transaction), and kept for a transaction after it: (index, record) pairs."""

    def __init__(self, outputs: Iterable[OutputRecord]) -> None:
        self._rest, self.taken = iter(outputs), list[OutputRecord]()

    def __iter__(self) -> Iterator[tuple[int, OutputRecord]]:
        i = 0
        while True:
            if i == len(self.taken):
                r = next(self._rest, None)
                if r is None:
                    return
                self.taken.append(r)
            yield i, self.taken[i]
            i += 1


class JobTransactions:
    """One run's transactional producer: each `commit` is one transaction of outputs and a commit record."""

    def __init__(self, kafka: Kafka, tid: str, commits: str) -> None:
        self.kafka, self.tid, self.commits = kafka, tid, commits
        create_topic(kafka, commits, 1)
        self._producer = _producer(kafka, tid)
        self.in_transaction = False  # one began and has neither committed nor aborted

    def commit(
        self,
        outputs: Iterable[OutputRecord],
        commit_record: CommitParts,
        *,
        on_refused: Callable[[list[Refusal]], None] | None = None,
    ) -> int:
        """Every output in order, then the commit record's parts, in one transaction; returns how many outputs.
        A record the broker refuses for itself is left out of a new transaction, `commit_record` (when a function:
        of the indices of the refused outputs) counting without it, once `on_refused` has taken every one refused
        so far; without `on_refused` it raises OutputRefused.
        TransactionFenced: a newer run fenced this one (nothing of this transaction shows)."""
        records = _Taken(outputs)
        fixed = None if callable(commit_record) else list(commit_record)
        refused: dict[int, Refusal] = {}
        alone: set[int] = set()
        watch = False  # each record's delivery report is read (a Python call per record): once a refusal was met
        while True:
            parts = fixed if fixed is not None else list(cast(Callable, commit_record)(frozenset(refused)))
            refusals = self._transaction(records, parts, skip=refused.keys(), alone=alone, watch=watch)
            if refusals is None:  # refused, whose unknown: again, reading the reports
                watch = True
                continue
            if not refusals:
                return len(records.taken) - len(refused)
            own, alone = decided(refusals, alone)
            if own and on_refused is None:
                raise OutputRefused(f"{own[0].topic}: {own[0].reason}", own[0])
            if own and on_refused is not None:
                refused |= {r.index: r for r in own}
                on_refused(sorted(refused.values(), key=lambda r: r.index))

    def _transaction(
        self, records: _Taken, parts: list[bytes], *, skip: Iterable[int], alone: set[int], watch: bool
    ) -> list[Refusal] | None:
        """One transaction of `records` (but `skip`; those in `alone` each in a batch of its own) and `parts`:
        committed (returns no refusal), or aborted for the refusals it met (returned; the producer replaced), or
        for refusals it did not `watch` the delivery reports of (None)."""
        from confluent_kafka import KafkaError, KafkaException

        p, refusals, skipped = self._producer, [], set(skip)

        def report(i: int, *, solo: bool) -> Callable[[Any, Any], None]:
            def delivered(err: KafkaError | None, msg: Message) -> None:
                if err is not None and (reason := refusal(err.code(), err.str())) is not None:
                    where = (msg.topic() or records.taken[i].topic, -1 if msg.partition() is None else cast(int, msg.partition()))
                    refusals.append(Refusal(index=i, topic=where[0], partition=where[1], reason=reason, alone=solo))

            return delivered

        try:
            p.begin_transaction()
            self.in_transaction = True
            for i, r in records:
                if i in skipped:
                    continue
                if i in alone:
                    p.flush(_TIMEOUT_S)  # what went before is sent: this record travels in a batch of its own
                try:
                    self._produce(
                        r.topic, r.key, r.value, r.headers, **({"on_delivery": report(i, solo=i in alone)} if watch else {})
                    )
                except KafkaException as e:  # the client's own limit (message.max.bytes): refused before any batch
                    if (reason := refusal(e.args[0].code(), e.args[0].str())) is None:
                        raise
                    refusals.append(Refusal(index=i, topic=r.topic, partition=-1, reason=reason, alone=True))
                if i in alone:
                    p.flush(_TIMEOUT_S)
                if refusals:
                    break  # this transaction cannot commit: find the next refusal in a new one
            if not refusals:
                for part in parts:
                    self._produce(self.commits, None, part)
                p.commit_transaction(_TIMEOUT_S)
                self.in_transaction = False
                return []
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH):
                raise TransactionFenced(f"transactional.id {self.tid!r} on {self.kafka} was fenced by a newer run") from e
            p.poll(0)  # the delivery reports that say which records were refused
            if not refusals and (watch or refusal(error.code(), error.str()) is None):
                if error.txn_requires_abort():
                    p.abort_transaction(_TIMEOUT_S)
                    self.in_transaction = False
                raise
        self._restart()
        return refusals or None

    def _restart(self) -> None:
        """Abort the open transaction and go on with a new producer under the same transactional.id."""
        from confluent_kafka import KafkaException

        with contextlib.suppress(KafkaException):  # the new producer's init_transactions aborts it anyway
            self._producer.abort_transaction(_TIMEOUT_S)
        self._producer = _producer(self.kafka, self.tid)
        self.in_transaction = False

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, headers: tuple = (), **kw: Any) -> None:
        produce(self._producer, topic, key, value, headers=list(headers) or None, **kw)

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
    from confluent_kafka import TopicPartition

    c = clients.log_reader(kafka, "elasticity-read-committed")
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
