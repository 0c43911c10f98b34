"""Hand-over with Samza through its checkpoint topic, on a real broker, through the CLI."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kafka import KafkaProducer

from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import read_log
from tests.support.helpers import fresh_topic, write_properties
from tests.unit.test_samza_topic import key, v1, v2

ELASTICITY = str(Path(sys.executable).with_name("elasticity"))


def _cli(kafka_bootstrap, config):
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    env.pop("ELASTICITY_CHECKPOINT_STORE_URL", None)

    def run(*args):
        return subprocess.run([ELASTICITY, *args, "--config", str(config)], env=env, capture_output=True, text=True, timeout=120)

    return run


def _job(kafka_bootstrap, folder: Path, name: str, topic: str, store_url: str, **extra: str):
    folder.mkdir(parents=True, exist_ok=True)
    props = {"job.name": name, "task.inputs": f"kafka.{topic}", "task.checkpoint.store.url": store_url, **extra}
    return _cli(kafka_bootstrap, write_properties(folder / "job.properties", props))


def test_import_a_samza_checkpoint_topic(kafka_bootstrap, store_url, tmp_path):
    """A topic as a Samza job at factor 1 leaves it: V1 and V2 per commit, older commits first, other jobs' noise."""
    inputs = fresh_topic(kafka_bootstrap, "samza-in", 3, records=60)
    checkpoints = f"__samza_checkpoint_ver_1_for_{inputs}_1"
    create_topic(kafka_bootstrap, checkpoints, 1)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    hour_ago = int(time.time() * 1000) - 3_600_000  # recent: a broker's retention would drop records from 1970
    commits = [  # (task, partition, last processed, append time)
        ("Partition 0", 0, "3", hour_ago),
        ("Partition 1", 1, "4", hour_ago),
        ("Partition 2", 2, "0", hour_ago),
        ("Partition 0", 0, "12", hour_ago + 60_000),
        ("Partition 1", 1, "15", hour_ago + 60_000),
    ]
    for task, p, offset, ts in commits:
        producer.send(checkpoints, key=key(task, "checkpoint"), value=v1(p, offset, inputs), timestamp_ms=ts)
        producer.send(checkpoints, key=key(task, "checkpoint-v2"), value=v2(p, offset, stream=inputs), timestamp_ms=ts)
    producer.send(checkpoints, key=key("Partition 0", "checkpoint-v3"), value=b"from the future", timestamp_ms=hour_ago + 61_000)
    producer.flush()
    producer.close()

    cli = _job(
        kafka_bootstrap,
        tmp_path / "job",
        f"adopt-{uuid.uuid4().hex[:6]}",
        inputs,
        store_url,
        **{"task.checkpoint.read.versions": "2,1"},
    )
    out = cli("checkpoint-tool", "import", "--from-kafka", f"kafka.{checkpoints}")
    assert out.returncode == 0, out.stderr
    assert "imported 3 task checkpoints" in out.stdout and "generation 1 at factor 1" in out.stdout
    assert "Partition 0: CheckpointV2 at topic offset 7" in out.stderr
    read = json.loads(cli("checkpoint-tool", "read").stdout)
    assert read == {  # next to process = last processed + 1
        "Partition 0": {f"kafka.{inputs}.0": "13"},
        "Partition 1": {f"kafka.{inputs}.1": "16"},
        "Partition 2": {f"kafka.{inputs}.2": "1"},
    }


def test_a_factor_4_job_exports_and_imports_back_unchanged(kafka_bootstrap, store_url, tmp_path):
    inputs = fresh_topic(kafka_bootstrap, "samza-rt", 2, records=100)
    ours = _job(
        kafka_bootstrap,
        tmp_path / "ours",
        f"rt-{uuid.uuid4().hex[:6]}",
        inputs,
        store_url,
        **{"job.elasticity.factor": "4", "systems.kafka.default.stream.offset.default": "oldest"},
    )
    offsets = {f"Partition_{p}-{b}-4": {f"kafka.{inputs}.{p}.{b}": str(3 * p + b)} for p in range(2) for b in range(4)}
    (tmp_path / "cps.json").write_text(json.dumps(offsets))
    assert ours("checkpoint-tool", "write", str(tmp_path / "cps.json")).returncode == 0

    topic = f"kafka.__samza_checkpoint_{uuid.uuid4().hex[:6]}"
    out = ours("checkpoint-tool", "export", "--to-kafka", topic)
    assert out.returncode == 0, out.stderr
    assert "exported 8 task checkpoints of generation 1 (factor 4)" in out.stdout and "16 messages, versions 1,2" in out.stdout
    written = read_log(kafka_bootstrap, topic.partition(".")[2])
    first_key, first_value = json.loads(written[0][1]), json.loads(written[0][2])
    assert first_key == {
        "systemstreampartition-grouper-factory": "org.apache.samza.container.grouper.stream.GroupByPartitionFactory",
        "taskName": "Partition_0-0-4",
        "type": "checkpoint",
    }
    assert first_value == {
        f"SystemStreamPartition [kafka, {inputs}, 0, 0]": {
            "system": "kafka",
            "stream": inputs,
            "partition": "0",
            "keyBucket": "0",
            "offset": "-1",
        }
    }  # last processed

    # another store (a fresh job) and the same job (a new generation) both resume exactly there
    fresh = _job(kafka_bootstrap, tmp_path / "fresh", f"rt2-{uuid.uuid4().hex[:6]}", inputs, f"sqlite:///{tmp_path / 'fresh.db'}")
    for cli, generation in ((fresh, 1), (ours, 2)):
        out = cli("checkpoint-tool", "import", "--from-kafka", topic)
        assert out.returncode == 0, out.stderr
        assert f"generation {generation} at factor 4" in out.stdout
        assert json.loads(cli("checkpoint-tool", "read").stdout) == offsets


def test_handover_errors_are_clear(kafka_bootstrap, tmp_path):
    inputs = fresh_topic(kafka_bootstrap, "samza-err", 1)
    cli = _job(kafka_bootstrap, tmp_path, f"err-{uuid.uuid4().hex[:6]}", inputs, f"sqlite:///{tmp_path / 's.db'}")
    out = cli("checkpoint-tool", "import")
    assert out.returncode == 2 and "needs --from-kafka SYSTEM.TOPIC" in out.stderr
    empty = fresh_topic(kafka_bootstrap, "samza-empty", 1)
    out = cli("checkpoint-tool", "import", "--from-kafka", f"kafka.{empty}")
    assert out.returncode == 2 and "no checkpoints for job" in out.stderr and empty in out.stderr
    out = cli("checkpoint-tool", "export", "--to-kafka", f"kafka.{empty}")
    assert out.returncode == 2 and "no checkpoints yet" in out.stderr
