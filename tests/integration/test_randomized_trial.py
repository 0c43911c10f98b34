"""A bounded randomized kill-and-rescale trial, through the CLI as a black box.

Each trial (its own topic, job and SQLite store) draws from a seeded RNG: skewed and null
keys with ~1 % malformed values, batches with random caps, rescales to any factor 1..16
(the batches a kill left planned are replayed first, by one run, or abandoned), partitions added mid-way,
and `run-batch` SIGKILLed at random moments or at a commit's fault points. `run-batch` is a
Spark Connect client of one warm server (as Airflow's batch tasks are). Then it drains and
checks from the committed sinks: nothing lost, nothing duplicated in the exactly-once sink,
per-key order within a partition, and every malformed record in the dead-letter sink with
its reason. A failure names the seed: ELASTICITY_TRIAL_SEED=<seed> replays the draws.

The Kafka trials (odd seeds: every run has one or two) copy the input to a Kafka topic exactly-once instead of a Parquet sink, and
are killed at the Kafka commit too: the copy, read read_committed, holds each processed
record once, as it was read, each key's in input order, and the data-quality run passes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka.admin import NewPartitions

from elasticity.batch.sinks.exactly_once import provenance
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.admin import admin_client, create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.kafka.transactions import read_committed
from elasticity.quality.runner import run_quality
from tests.conftest import REPO
from tests.support.helpers import job_props, write_properties

TRIALS = 3
STEPS = 6
OWNER = "trial"  # one lease owner, as an Airflow run's retries are: a killed run's lease is retaken at once
COMMIT_FAULTS = ["plan.after_commit", "commit.fenced", "commit.checkpoints_written", "commit.after_commit"]
KAFKA_FAULTS = ["commit.upload", "commit.kafka_committed"]  # before and after the Kafka commit of a Kafka trial
MALFORMED_REASON = "not valid json"
DRAIN = ("run-batch", "--owner", OWNER, "--until-caught-up", "--max-records", "100000")  # whatever the job's cap


def _records(rng: random.Random, n: int, keys: int) -> tuple[list[tuple[bytes | None, bytes]], set[bytes]]:
    """Skewed keys (a Pareto tail: a few hot keys), ~2 % null keys, ~1 % malformed values."""
    out, malformed = [], set()
    for _ in range(n):
        r = rng.random()
        key = None if r < 0.02 else f"u{min(keys - 1, int(rng.paretovariate(1.1)) - 1)}".encode()
        if rng.random() < 0.01:
            value = f"not json {{{uuid.uuid4().hex}".encode()
            malformed.add(value)
        else:
            value = json.dumps({"n": rng.randrange(10**6)}).encode()
        out.append((key, value))
    return out, malformed


@dataclass
class Trial:
    seed: int
    bootstrap: str
    remote: str
    folder: Path
    kafka: bool = False  # the output: a Kafka topic, exactly-once (else a Parquet sink)
    rng: random.Random = field(init=False)
    malformed: set[bytes] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.topic = f"trial-{self.seed}-{uuid.uuid4().hex[:6]}"
        self.partitions = self.rng.randint(1, 3)
        create_topic(self.bootstrap, self.topic, self.partitions)
        self.props = job_props(
            f"trial-{self.topic}",
            self.topic,
            self.folder,
            factor=self.rng.randint(1, 16),
            **{
                "systems.kafka.consumer.bootstrap.servers": self.bootstrap,
                "batch.max.records": str(self.rng.choice([1, 7, 50, 400])),
                "batch.read.chunk.records": str(self.rng.choice([25, 200])),
                "job.lease.ttl.ms": "60000",
                **(
                    {
                        "app.class": "elasticity.apps.identity:build_kafka",
                        "systems.kafka.producer.bootstrap.servers": self.bootstrap,
                    }
                    if self.kafka
                    else {}
                ),
            },
        )
        self.config_file = write_properties(self.folder / "job.properties", self.props)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("KAFKA_BOOTSTRAP_SERVERS", "ELASTICITY_CHECKPOINT_STORE_URL", "ELASTICITY_FAULT")
        }
        self.env |= {"SPARK_REMOTE": self.remote, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])}
        self.say(
            f"{'Kafka' if self.kafka else 'Parquet'} output, {self.partitions} partitions, factor {self.props['job.elasticity.factor']}, cap {self.props['batch.max.records']}"
        )

    def say(self, text: str) -> None:
        self.log.append(text)

    def cli(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
        env = self.env | ({"ELASTICITY_FAULT": fault} if fault else {})
        return subprocess.run(
            [sys.executable, "-m", "elasticity", *args, "--config", str(self.config_file)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def ok(self, done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
        assert done.returncode == 0, f"{done.args[3:5]} exited {done.returncode}: {done.stderr[-2000:]}"
        return done

    # --- the steps ---

    def feed(self) -> None:
        records, malformed = _records(self.rng, self.rng.randint(20, 300), keys=self.rng.choice([3, 30]))
        send(self.bootstrap, self.topic, records)
        self.malformed |= malformed
        self.say(f"fed {len(records)} ({len(malformed)} malformed)")

    def batch(self) -> None:
        args = ["run-batch", "--owner", OWNER]
        if self.rng.random() < 0.5:
            args += ["--max-records", str(self.rng.choice([1, 3, 40, 500]))]
        if self.rng.random() < 0.5:
            args.append("--until-caught-up")
        out = self.ok(self.cli(*args)).stdout.strip().splitlines()
        self.say(f"{' '.join(args[3:]) or 'run-batch'}: {len(out)} batches")

    def kill(self) -> None:
        args = ["run-batch", "--owner", OWNER, "--until-caught-up", "--max-records", str(self.rng.choice([5, 30]))]
        if self.rng.random() < 0.4:
            point = self.rng.choice(COMMIT_FAULTS + (KAFKA_FAULTS if self.kafka else []))
            done = self.cli(*args, fault=f"{point}:kill")
            assert done.returncode in (0, 137), done.stderr[-2000:]  # 0: nothing to read, the point never came
            self.say(f"killed at {point}" if done.returncode == 137 else f"not killed at {point}: nothing to read")
            return
        delay = self.rng.uniform(0.5, 5.0)
        proc = subprocess.Popen(
            [sys.executable, "-m", "elasticity", *args, "--config", str(self.config_file)],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            proc.wait(timeout=delay)
            self.say(f"finished before the kill at {delay:.1f}s")
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            self.say(f"SIGKILL at {delay:.1f}s")
        proc.communicate()

    def rescale(self) -> None:
        factor = self.rng.randint(1, 16)
        done = self.cli("rescale", "--factor", str(factor), "--owner", OWNER)
        if done.returncode == 2 and "has not committed" in done.stderr:
            if self.rng.random() < 0.5:
                self.ok(self.cli("run-batch", "--owner", OWNER))  # the operator re-runs the job: every planned batch replays
                done = self.cli("rescale", "--factor", str(factor), "--owner", OWNER)
                self.say(f"rescale to {factor} after replaying the planned batch")
            else:
                done = self.cli("rescale", "--factor", str(factor), "--owner", OWNER, "--abandon-pending")
                self.say(f"rescale to {factor} abandoning the planned batch")
        else:
            self.say(f"rescale to {factor}")
        self.ok(done)

    def add_partitions(self) -> None:
        self.partitions += self.rng.randint(1, 2)
        with admin_client(self.bootstrap) as admin:
            admin.create_partitions({self.topic: NewPartitions(self.partitions)})
        self.say(f"partitions -> {self.partitions}")

    def run(self) -> None:
        self.feed()
        steps = [self.feed, self.batch, self.kill, self.kill, self.rescale, self.add_partitions]
        for _ in range(STEPS):
            step = self.rng.choice(steps)
            if step == self.add_partitions and self.partitions >= 5:
                step = self.feed
            step()
        for _ in range(20):  # drain: a kill may have left a planned batch, which replays first
            summaries = [json.loads(line) for line in self.ok(self.cli(*DRAIN)).stdout.splitlines()]
            if summaries and summaries[-1]["lag_left"] == 0 and not summaries[-1]["replayed"]:
                break
        self.say("drained")

    # --- the checks, from the committed sinks ---

    def check(self) -> None:
        config = validate(self.props)
        store = CheckpointStore(config.checkpoint_store_url())
        committed = store.batches_with_status(config.job_name, "committed")
        audit = read_table(self.props["job.audit.path"], AUDIT_SCHEMA, committed).to_pylist()
        seen: dict[tuple[int, int], dict] = {}
        for r in audit:
            k = (r["partition"], r["offset"])
            assert k not in seen, f"audited twice: {r} and {seen[k]}"
            seen[k] = r
        ends = KafkaInputs(config).partition_counts([SystemStream("kafka", self.topic)])
        assert ends[SystemStream("kafka", self.topic)] == self.partitions
        from elasticity.jobmodel.model import SystemStreamPartition

        highs = KafkaInputs(config).offsets(
            [SystemStreamPartition("kafka", self.topic, p) for p in range(self.partitions)], "upcoming"
        )
        lost = [(s.partition, o) for s, end in highs.items() for o in range(end) if (s.partition, o) not in seen]
        assert not lost, f"lost {len(lost)}: {lost[:10]}"

        last: dict[tuple[int, bytes], tuple[int, str, int, int]] = {}
        for r in sorted(audit, key=lambda r: (r["batch_id"], r["task_name"], r["seq"])):
            if r["key"] is not None:
                k = (r["partition"], r["key"])
                assert r["offset"] > last.get(k, (0, "", 0, -1))[3], (
                    f"key {r['key']!r} of partition {r['partition']} out of order: {last[k]} then {r}"
                )
                last[k] = (r["batch_id"], r["task_name"], r["seq"], r["offset"])

        processed = {k for k, r in seen.items() if r["status"] == "processed"}
        if self.kafka:
            self.check_kafka(config, store, processed)
        else:
            sink = read_table(f"{self.props['job.output.path']}/output", OUTPUT_SCHEMA, committed).to_pylist()
            sources = [(r["source_partition"], r["source_offset"]) for r in sink]
            assert len(sources) == len(set(sources)), "duplicates in the exactly-once sink"
            assert set(sources) == processed

        dead = read_table(self.props["job.dead.letter.path"], DEAD_LETTER_SCHEMA, committed).to_pylist()
        assert len(dead) == len({(d["partition"], d["offset"]) for d in dead}), "a dead letter twice"
        assert {d["value"] for d in dead} == self.malformed
        assert all(MALFORMED_REASON in d["error"] for d in dead), [d["error"] for d in dead if MALFORMED_REASON not in d["error"]]
        assert {(d["partition"], d["offset"]) for d in dead} == {k for k, r in seen.items() if r["status"] == "dead_letter"}
        self.say(f"checked: {len(seen)} records, {len(dead)} dead letters, {len(committed)} batches")

    def check_kafka(self, config, store: CheckpointStore, processed: set[tuple[int, int]]) -> None:
        """The copy read read_committed: each processed record once, as it was read (joined by its provenance
        headers), each key's in input order; and the data-quality run over every batch passes."""
        inputs = {(r.partition, r.offset): (r.key, r.value) for r in read_committed(self.bootstrap, self.topic)}
        decoded = lambda kv: (kv[0], json.loads(kv[1]))  # noqa: E731  # the copy's JSON is written anew, compactly
        copy = read_committed(self.bootstrap, f"{self.topic}-copy")
        sources = []
        last: dict[tuple[int, int, bytes], int] = {}
        for r in copy:
            where = provenance(r.headers)
            source = (int(where["source_partition"]), int(where["source_offset"]))
            assert decoded(inputs[source]) == decoded((r.key, r.value)), (
                f"{source} copied as {r.value!r}, read as {inputs[source]}"
            )
            if r.key is not None:
                k = (r.partition, source[0], r.key)
                assert source[1] > last.get(k, -1), f"key {r.key!r} of partition {source[0]} out of order in the copy"
                last[k] = source[1]
            sources.append(source)
        assert len(sources) == len(set(sources)), f"{len(sources) - len(set(sources))} duplicates in the copy"
        assert set(sources) == processed, f"{len(processed - set(sources))} processed records missing from the copy"
        result, _ = run_quality(config, store, KafkaInputs(config), report_dir=self.folder / "quality")
        assert result.success, result.failure_message()
        assert {"kafka_unique", "kafka_key_order", "kafka_no_loss"} <= {c.name for c in result.checks}
        self.say(f"copy: {len(copy)} records read read_committed, data quality passed")


def _seeds() -> list[int]:
    fixed = os.environ.get("ELASTICITY_TRIAL_SEED")
    if fixed:
        return [int(fixed)]
    base = int(os.environ["ELASTICITY_TRIALS_BASE_SEED"])  # drawn per run by tests/conftest.py
    return [base + i for i in range(TRIALS)]


@pytest.mark.parametrize("seed", _seeds())
def test_randomized_kill_and_rescale_trial(seed, kafka_bootstrap, spark_connect, tmp_path):
    trial = Trial(seed, kafka_bootstrap, spark_connect, tmp_path, kafka=seed % 2 == 1)  # odd seeds: a Kafka trial
    started = time.monotonic()
    try:
        trial.run()
        trial.check()
    except BaseException:
        print(f"trial seed {seed} (replay: ELASTICITY_TRIAL_SEED={seed}):\n  " + "\n  ".join(trial.log), file=sys.stderr)
        raise
    print(f"trial seed {seed}: {'; '.join(trial.log)} in {time.monotonic() - started:.0f}s")
