"""Writing keyed records with Kafka's default (murmur2) partitioner."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from elasticity.kafka import clients
from elasticity.kafka.admin import probe
from elasticity.kafka.clients import Kafka, settings

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer


def produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None, **kw: object) -> None:
    """Queue one record; a full local queue waits for deliveries to drain (librdkafka's produce never blocks)."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, **kw)  # type: ignore[arg-type]
            return
        except BufferError:
            producer.poll(0.05)


def send(kafka: Kafka, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    """Send and flush; returns the number of records acknowledged by the broker."""
    from confluent_kafka import KafkaException

    kafka = settings(kafka)
    probe(kafka)
    producer = clients.producer(kafka, **{"acks": "all", "linger.ms": 20, "batch.size": 256 * 1024})
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _: Message) -> None:
        if err is not None:
            failed.append(err)

    sent = 0
    for k, v in records:
        produce(producer, topic, k, v, on_delivery=delivered)
        sent += 1
    producer.flush()  # every record delivered, or failed by delivery.timeout.ms
    if failed:  # the broker's error instead of losing the record quietly
        raise KafkaException(failed[0])
    return sent
