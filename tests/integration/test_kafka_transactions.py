"""Inputs written by transactional producers, against the real broker: a job reads only committed records
(read_committed), plans up to the last stable offset, and reads ranges whose offsets hold transaction markers
and aborted records without waiting for records that will never come."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from elasticity.batch.container import reader
from elasticity.batch.container.container_process import container_process
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs, read_log
from elasticity.kafka.transactions import (
    JobTransactions,
    OutputRecord,
    OutputRefused,
    TransactionFenced,
    fence,
    read_commit_tail,
    transactional_id,
)
from tests.support.helpers import read_committed


def _producer(bootstrap: str, transactional_id: str | None = None) -> Producer:
    config = {"bootstrap.servers": bootstrap, "linger.ms": 0}
    if transactional_id:
        config["transactional.id"] = transactional_id
    p = Producer(config)
    if transactional_id:
        p.init_transactions(30)
    return p


def _send(p: Producer, topic: str, values: list[str]) -> None:
    for v in values:
        p.produce(topic, key=v.encode(), value=v.encode(), partition=0)
    p.flush(30)


@pytest.fixture
def transactional_topic(kafka_bootstrap):
    """One partition: plain records a0-a2 (offsets 0-2), an aborted transaction x0-x2 (3-5, its marker 6), a
    committed one c0-c1 of another producer (7-8, its marker 9, the partition's last offset).

    Another producer: the embedded broker answers a fetch with every aborted transaction of the partition, also
    those that ended before the fetch's offset (Kafka sends only those the fetched range overlaps), so a
    read_committed client that starts after an abort drops that producer's later records."""
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    plain = _producer(kafka_bootstrap)
    _send(plain, topic, ["a0", "a1", "a2"])
    aborted = _producer(kafka_bootstrap, f"aborts-{topic}")
    aborted.begin_transaction()
    _send(aborted, topic, ["x0", "x1", "x2"])
    aborted.abort_transaction(30)
    committed = _producer(kafka_bootstrap, f"commits-{topic}")
    committed.begin_transaction()
    _send(committed, topic, ["c0", "c1"])
    committed.commit_transaction(30)
    return topic


def test_a_chunk_reads_committed_records_only_and_ends_on_a_marker(kafka_bootstrap, transactional_topic):
    try:

        def read(start: int, end: int) -> list[tuple[int, bytes]]:
            chunk = reader.Chunk(
                bootstrap=kafka_bootstrap, system="kafka", stream=transactional_topic, partition=0, start=start, end=end
            )
            return [(r["offset"], r["value"]) for b in reader.read_chunk(chunk) for r in b.to_pylist()]

        assert read(0, 10) == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (7, b"c0"), (8, b"c1")]  # ends on a marker
        assert read(7, 10) == [(7, b"c0"), (8, b"c1")]
        assert read(3, 7) == []  # aborted records and their marker only
        assert read(9, 10) == []  # the last marker alone
    finally:
        container_process().close_consumers()


def test_a_batch_is_planned_up_to_the_last_stable_offset(kafka_bootstrap, transactional_topic):
    """Another producer's open transaction holds the plan's end at its first record (the last stable offset):
    what follows it is not readable read_committed until the transaction ends."""
    config = validate(
        {
            "job.name": "lso",
            "task.inputs": f"kafka.{transactional_topic}",
            "systems.kafka.consumer.bootstrap.servers": kafka_bootstrap,
        }
    )
    ssp = SystemStreamPartition("kafka", transactional_topic, 0)
    inputs = KafkaInputs(config)
    assert inputs.offsets([ssp], "upcoming") == {ssp: 10}
    other = _producer(kafka_bootstrap, f"other-{transactional_topic}")
    other.begin_transaction()
    _send(other, transactional_topic, ["o0"])
    try:
        assert inputs.offsets([ssp], "upcoming") == {ssp: 10}  # o0 is at 10, uncommitted
        other.commit_transaction(30)
        assert inputs.offsets([ssp], "upcoming") == {ssp: 12}  # o0 and its marker
    finally:
        other.flush(5)


def test_a_whole_log_is_read_to_its_last_marker(kafka_bootstrap, transactional_topic):
    """read_log (a Samza checkpoint topic, read whole) ends on a partition whose last offset is a marker."""
    assert [(o, v) for o, _, v, _ in read_log(kafka_bootstrap, transactional_topic)] == [
        (0, b"a0"),
        (1, b"a1"),
        (2, b"a2"),
        (7, b"c0"),
        (8, b"c1"),
    ]


def _outputs(topic: str, tag: str, n: int) -> list[OutputRecord]:
    return [OutputRecord(topic, f"k{i % 3}".encode(), f"{tag}{i}".encode()) for i in range(n)]


def test_a_commit_shows_its_outputs_and_its_record_together(kafka_bootstrap):
    out, commits = f"out-{uuid.uuid4().hex[:8]}", f"commits-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, out, 1)
    tx = JobTransactions(kafka_bootstrap, transactional_id("j", "1", uuid.uuid4().hex), commits)
    assert read_commit_tail(kafka_bootstrap, commits) == []
    assert tx.commit(_outputs(out, "a", 5), [b"batch 1 part 0", b"batch 1 part 1"]) == 5
    assert tx.commit(_outputs(out, "b", 2), [b"batch 2"]) == 2
    tx.close()
    assert [v for _, _, v in read_committed(kafka_bootstrap, out)] == [b"a0", b"a1", b"a2", b"a3", b"a4", b"b0", b"b1"]
    assert read_commit_tail(kafka_bootstrap, commits) == [b"batch 1 part 0", b"batch 1 part 1", b"batch 2"]
    assert read_commit_tail(kafka_bootstrap, commits, window=2) == [b"batch 2"]  # the record and its commit marker


def test_a_record_the_broker_refuses_is_left_out_of_a_new_transaction_or_fails_the_commit(kafka_bootstrap):
    """The embedded broker enforces a topic's max.message.bytes on each record batch, as Kafka does: one record
    over it refuses its whole batch (here every batch: 7 headers make 20 records more than 1 kB). The refused
    record is found, handed over and left out; every other record commits once, in order. Without a taker the
    commit fails naming the reason, nothing shows, and the same producer commits the next transaction."""
    out, commits = f"out-{uuid.uuid4().hex[:8]}", f"commits-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, out, 1, {"max.message.bytes": "1024"})
    headers = tuple((f"h{i}", b"x" * 20) for i in range(7))
    outputs = [OutputRecord(out, b"k", b"a%d" % i, headers) for i in range(20)]
    outputs[7] = OutputRecord(out, b"k", b"B" * 5000, headers)
    tx = JobTransactions(kafka_bootstrap, transactional_id("j", "1", uuid.uuid4().hex), commits)
    taken: list[list[tuple[int, str]]] = []

    def record(refused: frozenset[int]) -> list[bytes]:
        return [b"%d refused" % len(refused)]

    assert tx.commit(outputs, record, on_refused=lambda rs: taken.append([(r.index, r.reason) for r in rs])) == 19
    assert taken == [[(7, "MESSAGE_TOO_LARGE (Broker: Message size too large)")]]
    assert [v for _, _, v in read_committed(kafka_bootstrap, out)] == [b"a%d" % i for i in range(20) if i != 7]
    assert read_commit_tail(kafka_bootstrap, commits) == [b"1 refused"]

    with pytest.raises(OutputRefused, match=rf"^{out}: MESSAGE_TOO_LARGE \(Broker: Message size too large\)$"):
        tx.commit(outputs, [b"never"])
    assert tx.commit(outputs[:3], [b"next"]) == 3
    tx.close()
    assert [v for _, _, v in read_committed(kafka_bootstrap, out)][19:] == [b"a0", b"a1", b"a2"]
    assert read_commit_tail(kafka_bootstrap, commits) == [b"1 refused", b"next"]


def test_a_run_fenced_by_the_next_one_never_shows_what_it_wrote(kafka_bootstrap):
    """A zombie: run A is fenced by run B, which then commits; A's open transaction is aborted and its later
    commit fails. A reader that starts anywhere, past A's abort too, sees B's records and none of A's."""
    out, commits = f"out-{uuid.uuid4().hex[:8]}", f"commits-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, out, 1)
    tid_a, tid_b = (transactional_id("j", "1", f"{run}-{uuid.uuid4().hex}") for run in "ab")
    a = JobTransactions(kafka_bootstrap, tid_a, commits)

    def a_outputs_while_b_takes_over():
        yield from _outputs(out, "a", 3)
        a._producer.flush(30)  # A's records are in the log, its transaction open
        fence(kafka_bootstrap, tid_a)
        JobTransactions(kafka_bootstrap, tid_b, commits).commit(_outputs(out, "b", 3), [b"b's record"])
        yield from _outputs(out, "z", 2)

    with pytest.raises(TransactionFenced, match=tid_a):
        a.commit(a_outputs_while_b_takes_over(), [b"a's record"])
    assert [v for _, _, v in read_committed(kafka_bootstrap, out)] == [b"b0", b"b1", b"b2"]
    assert [v for _, _, v in read_committed(kafka_bootstrap, out, start=4)] == [b"b0", b"b1", b"b2"]  # past A's abort
    assert read_commit_tail(kafka_bootstrap, commits) == [b"b's record"]


def test_a_dead_runs_open_transaction_holds_readers_until_it_is_fenced(kafka_bootstrap, tmp_path):
    """A process killed inside a transaction: its records hold read_committed readers at the first of them
    (the last stable offset), until the next run fences its transactional.id, which aborts them."""
    out = f"out-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, out, 1)
    tid = transactional_id("j", "1", uuid.uuid4().hex)
    script = (
        "import os, sys\n"
        "from elasticity.kafka.transactions import JobTransactions, OutputRecord\n"
        f"tx = JobTransactions({kafka_bootstrap!r}, {tid!r}, 'commits-{out}')\n"
        "tx._producer.begin_transaction()\n"
        f"tx._produce({out!r}, b'k', b'lost')\n"
        "tx._producer.flush(30)\n"
        "os._exit(9)\n"
    )
    import subprocess
    import sys

    assert subprocess.run([sys.executable, "-c", script], timeout=120).returncode == 9
    config = validate(
        {"job.name": "lso", "task.inputs": f"kafka.{out}", "systems.kafka.consumer.bootstrap.servers": kafka_bootstrap}
    )
    ssp = SystemStreamPartition("kafka", out, 0)
    assert KafkaInputs(config).offsets([ssp], "upcoming") == {ssp: 0}  # held at the open transaction
    fence(kafka_bootstrap, tid)
    assert KafkaInputs(config).offsets([ssp], "upcoming") == {ssp: 2}  # the record and its abort marker
    assert read_committed(kafka_bootstrap, out) == []


def test_keys_land_in_the_partitions_javas_partitioner_picks(kafka_bootstrap):
    from kafka.partitioner.default import murmur2

    out = f"out-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, out, 4)
    tx = JobTransactions(kafka_bootstrap, transactional_id("j", "1", uuid.uuid4().hex), f"commits-{out}")
    records = [OutputRecord(out, f"user-{i}".encode(), b"v") for i in range(40)]
    tx.commit(records, [b"r"])
    tx.close()
    seen = {k: p for p, k, _ in read_committed(kafka_bootstrap, out)}
    assert seen == {r.key: (murmur2(r.key) & 0x7FFFFFFF) % 4 for r in records}  # kafka-python's, as Java's
    assert len(set(seen.values())) == 4
