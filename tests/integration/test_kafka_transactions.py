"""Inputs written by transactional producers, against the real broker: a job reads only committed records
(read_committed), plans up to the last stable offset, and reads ranges whose offsets hold transaction markers
and aborted records without waiting for records that will never come."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from elasticity.batch import reader
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs, read_log


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


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_a_chunk_reads_committed_records_only_and_ends_on_a_marker(kafka_bootstrap, transactional_topic, client):
    if client == "kafka-python":
        reader._fast_consumers[kafka_bootstrap] = None  # the reader's kafka-python path (a SASL login takes it)
    try:

        def read(start: int, end: int) -> list[tuple[int, bytes]]:
            chunk = reader.Chunk(kafka_bootstrap, "kafka", transactional_topic, 0, start, end)
            return [(r["offset"], r["value"]) for b in reader.read_chunk(chunk) for r in b.to_pylist()]

        assert read(0, 10) == [(0, b"a0"), (1, b"a1"), (2, b"a2"), (7, b"c0"), (8, b"c1")]  # ends on a marker
        assert read(7, 10) == [(7, b"c0"), (8, b"c1")]
        assert read(3, 7) == []  # aborted records and their marker only
        assert read(9, 10) == []  # the last marker alone
    finally:
        reader.close_consumers()


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
