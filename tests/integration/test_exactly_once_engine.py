"""Exactly-once Kafka outputs through the engine (real broker, real Spark, real store): a job relaying its
input to a Kafka topic is killed or fails at each step of its commit, runs again until caught up, and a
read_committed consumer of the output topic sees every input record once, each key's in input order."""

import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
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
from tests.support.helpers import fresh_topic, job_props, read_committed, write_properties

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
        "systems.kafka.default.stream.samza.offset.default": "oldest",
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


def test_a_run_killed_on_either_side_of_the_kafka_commit_leaves_every_output_once(kafka_bootstrap, relay_job):
    """A real crash (the process exits at once: no abort, no cleanup) before the Kafka commit, then the next run
    crashed right after it; the run after each fences the dead one's transactional.id (the first's transaction
    open, the second's committed: rolled forward), and goes on. One job through both crashes: each Spark start
    of a classic session costs seconds, and a duplicate or a loss from either crash stays in the output topic."""
    topic, props, tmp_path = relay_job
    props["spark.master"] = "local[2]"
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    args = [ELASTICITY, "run-batch", "--config", str(path), "--max-records", "150", "--until-caught-up", "--owner", "run-1"]
    for point in ("commit.upload", "commit.kafka_committed"):
        killed = subprocess.run(
            args, cwd=REPO, env={**env, "ELASTICITY_FAULT": f"{point}:kill"}, capture_output=True, text=True, timeout=300
        )
        assert killed.returncode == 137, f"not killed at {point}: {killed.stderr[-2000:]}"
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


def copy_faults(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> dict[str, int]:
    """Read `<topic>-copy` read_committed from the start of every partition and count against the demo records
    the input got (each names its key and its place in that key's sequence): outputs, duplicates, missing, and
    order violations (a key's record that comes after a later one of that key)."""
    expected = {(json.loads(v)["key"], json.loads(v)["seq"]) for _, v in records}
    seen = [(json.loads(v)["key"], json.loads(v)["seq"]) for _, _, v in read_committed(bootstrap, f"{topic}-copy")]
    last: dict[str, int] = {}
    backwards = 0
    for key, seq in seen:
        if key is not None:  # a null key's records go to any partition: no order to keep
            backwards += seq < last.get(key, -1)
            last[key] = max(seq, last.get(key, -1))
    return {
        "inputs": len(expected),
        "outputs": len(seen),
        "duplicates": len(seen) - len(set(seen)),
        "missing": len(expected - set(seen)),
        "order_violations": backwards,
    }


KILLS = [  # the commit path in the order of a batch's life, both sides of the Kafka commit included
    "commit.before_commit",
    "commit.checkpoints_written",
    "commit.after_commit",
    "commit.upload",
    "plan.after_commit",
    "commit.kafka_committed",
    "commit.fenced",
]


@dataclass
class CopyJob:
    """A job copying a 4-partition topic of 3,000 demo records to `<topic>-copy` (factor 4, batches of 300), run
    through the CLI as a Spark Connect client of one warm server, as Airflow's tasks run it."""

    bootstrap: str
    remote: str
    folder: Path
    owner: str = "eo-run"

    def __post_init__(self) -> None:
        self.records = list(demo_records(3000, keys=50, seed=11))
        self.topic = fresh_topic(self.bootstrap, "eo-run", 4)
        send(self.bootstrap, self.topic, self.records)
        props = job_props(
            f"eo-{self.topic}",
            self.topic,
            self.folder,
            factor=4,
            **{
                "app.class": "elasticity.apps.identity:build_kafka",
                "batch.max.records": "300",
                "systems.kafka.consumer.bootstrap.servers": self.bootstrap,
                "systems.kafka.producer.bootstrap.servers": self.bootstrap,
            },
        )
        self.config_file = write_properties(self.folder / "job.properties", props)
        env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "ELASTICITY_FAULT")}
        self.env = env | {"SPARK_REMOTE": self.remote, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])}

    def cli(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
        """`elasticity <args>`; with `fault`, SIGKILLed at that fault point."""
        return subprocess.run(
            [sys.executable, "-m", "elasticity", *args, "--owner", self.owner, "--config", str(self.config_file)],
            cwd=REPO,
            env=self.env | ({"ELASTICITY_FAULT": f"{fault}:sigkill"} if fault else {}),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def killed(self, *args: str, at: str) -> None:
        done = self.cli(*args, fault=at)
        assert done.returncode == -signal.SIGKILL, f"not killed at {at}: exit {done.returncode}: {done.stderr[-2000:]}"

    def ok(self, *args: str) -> str:
        done = self.cli(*args)
        assert done.returncode == 0, f"{args} exited {done.returncode}: {done.stderr[-2000:]}"
        return done.stdout

    def drain(self) -> None:
        assert json.loads(self.ok("run-batch", "--until-caught-up").splitlines()[-1])["lag_left"] == 0

    def faults(self) -> dict[str, int]:
        return copy_faults(self.bootstrap, self.topic, self.records)


@pytest.fixture
def copy_job(kafka_bootstrap, spark_connect, tmp_path) -> CopyJob:
    return CopyJob(kafka_bootstrap, spark_connect, tmp_path)


CLEAN = {"inputs": 3000, "outputs": 3000, "duplicates": 0, "missing": 0, "order_violations": 0}


def test_a_copy_killed_at_every_commit_step_and_across_a_rescale_outputs_every_record_once(copy_job):
    """The copy is SIGKILLed at each step of its commit in turn, rescaled to 6 by a process SIGKILLed mid-way
    and retried, SIGKILLed once more at factor 6, then run until caught up: its output topic, read read_committed,
    has every input record once, each key's in input order."""
    for point in KILLS:
        copy_job.killed("run-batch", "--until-caught-up", at=point)
    copy_job.ok("run-batch")  # what the last kill left planned replays: no batch is pending at the rescale
    copy_job.killed("rescale", "--factor", "6", at="rescale.checkpoints_written")
    copy_job.ok("rescale", "--factor", "6")
    copy_job.killed("run-batch", "--until-caught-up", at="commit.before_commit")
    copy_job.drain()
    found = copy_job.faults()
    print(f"3,000 records, {len(KILLS) + 2} kills, a rescale to 6: {found}")
    assert found == CLEAN


def test_a_rescale_abandoning_a_batch_whose_kafka_transaction_committed_rolls_it_forward_first(copy_job):
    """A run dies right after its Kafka commit; the operator rescales under the same lease owner (as an Airflow
    run's retry does), abandoning the pending batch: its outputs are visible, so the rescale writes its
    checkpoints first and the new generation does not read its records again."""
    copy_job.killed("run-batch", at="commit.kafka_committed")
    copy_job.ok("rescale", "--factor", "3", "--abandon-pending")
    copy_job.drain()
    assert copy_job.faults() == CLEAN
