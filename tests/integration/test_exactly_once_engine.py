"""Exactly-once Kafka outputs through the engine (real broker, real Spark, real store): a job relaying its
input to a Kafka topic is killed or fails at each step of its commit, runs again until caught up, and a
read_committed consumer of the output topic sees every input record once, each key's in input order."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from elasticity import faults
from elasticity.apps.demo_feed import demo_records
from elasticity.config import validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from tests.conftest import REPO
from tests.support.helpers import read_committed

ELASTICITY = str(Path(sys.executable).with_name("elasticity"))
RECORDS = 400
COMMIT_POINTS = [
    "plan.after_commit",
    "commit.upload",
    "commit.kafka_committed",
    "commit.fenced",
    "commit.checkpoints_written",
    "commit.before_commit",
    "commit.after_commit",
]


@pytest.fixture
def relay_job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"eo-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 3)
    send(kafka_bootstrap, topic, list(demo_records(RECORDS, keys=20, seed=7)))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    props = {
        "job.name": f"eo-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "4",
        "systems.kafka.default.stream.offset.default": "oldest",
        "app.class": "tests.support.apps:relay",
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
    }
    return topic, props, tmp_path


def assert_relayed_once_in_key_order(bootstrap: str, topic: str) -> None:
    """Read read_committed from the start of every partition of `<topic>-relay`."""
    seen = [(k, v) for _, k, v in read_committed(bootstrap, f"{topic}-relay")]
    sources = [(json.loads(v)["partition"], json.loads(v)["offset"]) for _, v in seen]
    assert len(sources) == len(set(sources)), f"{len(sources) - len(set(sources))} duplicates"
    assert sorted(sources) == sorted((p, o) for p in range(3) for o in range(_count(bootstrap, topic, p))), "missing"
    by_key: dict[tuple, list[int]] = {}
    for (key, _), (p, o) in zip(seen, sources, strict=True):
        if key is not None:  # a null key's records go to any partition: no order to keep
            by_key.setdefault((key, p), []).append(o)
    assert all(os_ == sorted(os_) for os_ in by_key.values()), "a key's outputs went backwards"


def _count(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dq"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[1]
    finally:
        c.close()


@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_a_failure_at_any_commit_step_leaves_every_output_once(spark, kafka_bootstrap, relay_job, point):
    topic, props, _ = relay_job
    config = validate(props)
    with faults.raise_at(point) as seen, pytest.raises(faults.InjectedFault):
        MicroBatchEngine(config, spark).run(max_records=150, until_caught_up=True)
    assert point in seen
    MicroBatchEngine(config, spark).run(max_records=150, until_caught_up=True)
    assert_relayed_once_in_key_order(kafka_bootstrap, topic)


@pytest.mark.parametrize("point", ["commit.upload", "commit.kafka_committed"])
def test_a_run_killed_on_either_side_of_the_kafka_commit_leaves_every_output_once(kafka_bootstrap, relay_job, point):
    """A real crash (the process exits at once: no abort, no cleanup) before and right after the Kafka commit;
    the next run fences the dead one's transactional.id, rolls a committed transaction forward, and goes on."""
    topic, props, tmp_path = relay_job
    props["spark.master"] = "local[2]"
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "ELASTICITY_FAULT": f"{point}:kill"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    args = [ELASTICITY, "run-batch", "--config", str(path), "--max-records", "150", "--until-caught-up", "--owner", "run-1"]
    killed = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == 137, killed.stderr[-2000:]
    env.pop("ELASTICITY_FAULT")
    rerun = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert_relayed_once_in_key_order(kafka_bootstrap, topic)


def test_at_least_once_stays_available(spark, kafka_bootstrap, relay_job):
    """processing.guarantee=at_least_once: the slots send as they go, and a replay sends again."""
    topic, props, _ = relay_job
    props["processing.guarantee"] = "at_least_once"
    config = validate(props)
    with faults.raise_at("commit.before_commit"), pytest.raises(faults.InjectedFault):
        MicroBatchEngine(config, spark).run(max_records=150)
    MicroBatchEngine(config, spark).run(max_records=150, until_caught_up=True)
    with pytest.raises(AssertionError, match="duplicates"):
        assert_relayed_once_in_key_order(kafka_bootstrap, topic)
