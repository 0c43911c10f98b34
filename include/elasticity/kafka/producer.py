"""Writing keyed records with Kafka's default (murmur2) partitioner."""

from __future__ import annotations

from collections.abc import Iterable

from kafka import KafkaProducer

from elasticity.kafka.admin import Kafka, probe, settings


def send(kafka: Kafka, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    """Send and flush; returns the number of records acknowledged by the broker."""
    kafka = settings(kafka)
    probe(kafka)
    producer = KafkaProducer(**kafka.kwargs(acks="all", linger_ms=20, batch_size=256 * 1024))
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in records]
        producer.flush()
        for f in futures:
            f.get(timeout=30)  # raises the broker's error instead of losing the record quietly
        return len(futures)
    finally:
        producer.close()
