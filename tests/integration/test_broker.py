"""Against a real Kafka-protocol broker: the embedded one, or KAFKA_BOOTSTRAP_SERVERS."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from elasticity.batch.container import reader
from elasticity.batch.container.container_process import container_process
from elasticity.cli import main
from elasticity.config import validate
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.admin import BrokerUnreachable, TopicError, create_topic, partition_counts, probe
from elasticity.local.broker import EmbeddedBroker, free_port

ELASTICITY = str(Path(sys.executable).with_name("elasticity"))


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _config_file(tmp_path, topic, **extra):
    lines = [f"job.name=it-{topic}", f"task.inputs=kafka.{topic}", *[f"{k}={v}" for k, v in extra.items()]]
    path = tmp_path / "job.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_job_model_from_topic_metadata(kafka_bootstrap, tmp_path):
    topic = _topic()
    assert create_topic(kafka_bootstrap, topic, 3) is True
    assert create_topic(kafka_bootstrap, topic, 3) is False
    ss = SystemStream("kafka", topic)
    assert partition_counts(kafka_bootstrap, [ss]) == {ss: 3}

    config = _config_file(tmp_path, topic, **{"job.elasticity.factor": "4", "job.container.count": "3"})
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    out = subprocess.run([ELASTICITY, "job-model", "--config", str(config)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    model = json.loads(out.stdout)
    assert set(model["containers"]) == {"0", "1", "2"}
    tasks = {name: t for c in model["containers"].values() for name, t in c["tasks"].items()}
    assert len(tasks) == 12
    assert tasks["Partition_2-3-4"]["system-stream-partitions"] == [
        {"system": "kafka", "stream": topic, "partition": 2, "keyBucket": 3}
    ]
    assert tasks["Partition_2-3-4"]["task-mode"] == "Active"
    # each container reads exactly one partition: the virtual tasks of an SSP stay together
    for c in model["containers"].values():
        assert len({s["partition"] for t in c["tasks"].values() for s in t["system-stream-partitions"]}) == 1


def test_a_chunk_reads_exactly_its_offsets_with_librdkafka_on_a_reused_consumer(kafka_bootstrap):
    """The slots' reader (confluent-kafka for these settings): each chunk's records exactly, in offset order, with
    their keys and values, whether it starts mid-partition, ends at the high watermark or holds one record; the
    worker's one consumer goes from partition to partition."""
    topic = _topic()
    create_topic(kafka_bootstrap, topic, 3)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for p in range(3):
        for i in range(40):
            producer.send(topic, key=f"k{p}-{i}".encode() if i % 7 else None, value=f"{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()
    chunks = [
        reader.Chunk(bootstrap=kafka_bootstrap, system="kafka", stream=topic, partition=1, start=5, end=17),
        reader.Chunk(
            bootstrap=kafka_bootstrap, system="kafka", stream=topic, partition=0, start=0, end=40
        ),  # up to the high watermark
        reader.Chunk(
            bootstrap=kafka_bootstrap, system="kafka", stream=topic, partition=2, start=39, end=40
        ),  # its last record alone
        reader.Chunk(
            bootstrap=kafka_bootstrap, system="kafka", stream=topic, partition=1, start=17, end=30
        ),  # back to a partition read before
    ]
    try:
        for c in chunks:
            rows = [r for b in reader.read_chunk(c) for r in b.to_pylist()]
            assert [(r["offset"], r["key"], r["value"]) for r in rows] == [
                (o, f"k{c.partition}-{o}".encode() if o % 7 else None, f"{c.partition}-{o}".encode())
                for o in range(c.start, c.end)
            ]
        assert list(container_process().consumers) == [kafka_bootstrap]  # one consumer read them all
    finally:
        container_process().close_consumers()


def test_missing_topic_is_named(kafka_bootstrap):
    with pytest.raises(TopicError, match="no-such-topic"):
        partition_counts(kafka_bootstrap, [SystemStream("kafka", "no-such-topic")])


def test_feed_writes_keyed_records_that_spread_over_partitions(kafka_bootstrap, tmp_path, monkeypatch):
    topic = _topic()
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    config = _config_file(tmp_path, topic)
    assert main(["feed", "--config", str(config), "--records", "600", "--keys", "20", "--partitions", "3"]) == 0
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        ends = consumer.end_offsets(tps)
    finally:
        consumer.close()
    assert sum(ends.values()) == 600
    assert all(n > 0 for n in ends.values())
    # the model built from the broker matches the model built from the given counts
    cfg = validate({"job.name": "x", "task.inputs": f"kafka.{topic}", "job.elasticity.factor": "2"})
    assert build_job_model(cfg, partition_counts(kafka_bootstrap, cfg.inputs)) == build_job_model(cfg, {cfg.inputs[0]: 3})


def test_unreachable_broker_fails_fast_naming_the_address(tmp_path, monkeypatch):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(BrokerUnreachable, match=address) as refused:
        probe(address)
    assert "Connection refused" in str(refused.value)  # the probe's one connect, not a client's retry loop
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", address)
    config = _config_file(tmp_path, "orders")
    out = subprocess.run([ELASTICITY, "job-model", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"Kafka broker unreachable at {address}" in out.stderr
    # failed at the probe's refused connection, before kafka-python's own client (which retries for about 30 s) was made
    assert "Connection refused" in out.stderr and "NoBrokersAvailable" not in out.stderr


def test_broker_cli_lifecycle_keeps_data_across_restart(tmp_path):
    env = {**os.environ, "ELASTICITY_HOME": str(tmp_path / "home")}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    port = free_port()

    def cli(*args):
        return subprocess.run([ELASTICITY, *args], env=env, capture_output=True, text=True, timeout=60)

    assert cli("broker", "status").returncode == 3
    started = cli("broker", "start", "--port", str(port))
    assert started.returncode == 0, started.stderr
    bootstrap = started.stdout.strip()
    assert bootstrap == f"127.0.0.1:{port}"
    try:
        assert cli("broker", "status").stdout.strip() == bootstrap
        assert cli("broker", "start").stdout.strip() == bootstrap  # idempotent
        assert cli("topic", "create", "kept", "--partitions", "2").returncode == 0
        time.sleep(1.5)  # the broker saves about a second after a change
        assert cli("broker", "stop").stdout.strip() == "stopped"
        assert cli("broker", "status").returncode == 3
        assert cli("broker", "start", "--port", str(port)).returncode == 0
        ss = SystemStream("kafka", "kept")
        assert partition_counts(bootstrap, [ss]) == {ss: 2}
        assert (tmp_path / "home" / "broker" / "data").is_dir()
    finally:
        EmbeddedBroker(tmp_path / "home").stop()
    assert cli("broker", "stop").stdout.strip() == "not running"
