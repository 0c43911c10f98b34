"""The operator's tools on a real broker: checkpoint-tool read/write and rescale."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send

ELASTICITY = str(Path(sys.executable).with_name("elasticity"))


@pytest.fixture
def job(kafka_bootstrap, store_url, tmp_path):
    topic = f"cp-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    send(kafka_bootstrap, topic, demo_records(200, 10))
    config = tmp_path / "job.properties"
    config.write_text(
        f"job.name=cli-{topic}\ntask.inputs=kafka.{topic}\njob.elasticity.factor=2\n"
        "systems.kafka.default.stream.samza.offset.default=oldest\ntask.checkpoint.read.versions=2,1\n"
        f"task.checkpoint.store.url={store_url}\n"
    )
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    env.pop("ELASTICITY_CHECKPOINT_STORE_URL", None)

    def cli(*args):
        return subprocess.run([ELASTICITY, *args, "--config", str(config)], env=env, capture_output=True, text=True, timeout=120)

    return topic, cli, tmp_path


def test_write_read_rescale_dry_run_and_apply(job):
    topic, cli, tmp_path = job
    missing = cli("checkpoint-tool", "read")
    assert missing.returncode == 2 and "no checkpoints yet" in missing.stderr

    offsets = {
        "Partition_0-0-2": {f"kafka.{topic}.0.0": "10"},
        "Partition_0-1-2": {f"kafka.{topic}.0.1": "30"},
        "Partition_1-0-2": {f"kafka.{topic}.1.0": "5"},
        "Partition_1-1-2": {f"kafka.{topic}.1.1": "5"},
    }
    path = tmp_path / "cps.json"
    path.write_text(json.dumps(offsets))
    wrote = cli("checkpoint-tool", "write", str(path))
    assert wrote.returncode == 0, wrote.stderr
    read = cli("checkpoint-tool", "read")
    assert json.loads(read.stdout) == offsets

    dry = cli("rescale", "--factor", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "factor 2 -> 1" in dry.stdout and "Partition_0-0-2 + Partition_0-1-2" in dry.stdout
    assert "dry run: nothing written" in dry.stdout
    assert json.loads(cli("checkpoint-tool", "read").stdout) == offsets

    applied = cli("rescale", "--factor", "1")
    assert applied.returncode == 0, applied.stderr
    assert "applied: generation 2 at factor 1" in applied.stdout
    after = json.loads(cli("checkpoint-tool", "read").stdout)
    assert after["Partition 0"] == {f"kafka.{topic}.0": "10"}  # the min of the merged buckets
    assert after["watermarks"]["Partition 0"][f"kafka.{topic}.0"] == [{"factor": 2, "bucket": 1, "offset": "30"}]
    again = cli("rescale", "--factor", "1")
    assert "already runs at factor 1" in again.stdout


def test_bad_inputs_fail_clearly(job):
    topic, cli, tmp_path = job
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"Partition_0-0-2": {f"kafka.{topic}.1.0": "1"}}))
    out = cli("checkpoint-tool", "write", str(bad))
    assert out.returncode == 2 and "does not read" in out.stderr
    out = cli("rescale", "--factor", "0")
    assert out.returncode == 2 and "job.elasticity.factor" in out.stderr
