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


def test_a_factor_4_job_exports_one_offset_per_partition_that_loses_nothing(kafka_bootstrap, store_url, tmp_path):
    """Samza reads one offset per partition: buckets at different offsets are refused (Samza would process the
    faster ones' records again) unless allowed, then written at the slowest bucket's offset; import reads them back."""
    inputs = fresh_topic(kafka_bootstrap, "samza-rt", 2, records=100)
    ours = _job(
        kafka_bootstrap,
        tmp_path / "ours",
        f"rt-{uuid.uuid4().hex[:6]}",
        inputs,
        store_url,
        **{"job.elasticity.factor": "4", "systems.kafka.default.stream.samza.offset.default": "oldest"},
    )
    offsets = {f"Partition_{p}-{b}-4": {f"kafka.{inputs}.{p}.{b}": str(3 * p + b)} for p in range(2) for b in range(4)}
    (tmp_path / "cps.json").write_text(json.dumps(offsets))
    assert ours("checkpoint-tool", "write", str(tmp_path / "cps.json")).returncode == 0

    topic = f"kafka.__samza_checkpoint_{uuid.uuid4().hex[:6]}"
    out = ours("checkpoint-tool", "export", "--to-kafka", topic)
    assert out.returncode == 2 and "stand at different offsets" in out.stderr and "--allow-reprocessing" in out.stderr
    out = ours("checkpoint-tool", "export", "--to-kafka", topic, "--allow-reprocessing")
    assert out.returncode == 0, out.stderr
    assert "exported 2 task checkpoints of generation 1 (factor 4)" in out.stdout and "4 messages, versions 1,2" in out.stdout
    written = read_log(kafka_bootstrap, topic.partition(".")[2])
    first_key, first_value = json.loads(written[0][1]), written[0][2]
    assert first_key == {
        "systemstreampartition-grouper-factory": "org.apache.samza.container.grouper.stream.GroupByPartitionFactory",
        "taskName": "Partition 0",
        "type": "checkpoint",
    }
    # Samza's bytes (CheckpointV1Serde), the slowest bucket's last processed offset: bucket 0 was to read 0 next
    assert (
        first_value
        == (
            f'{{"SystemStreamPartition [kafka, {inputs}, 0]":{{"system":"kafka","partition":"0","offset":"-1","stream":"{inputs}"}}}}'
        ).encode()
    )

    # another store (a fresh job) resumes at factor 1 from the min of each partition's buckets
    fresh = _job(kafka_bootstrap, tmp_path / "fresh", f"rt2-{uuid.uuid4().hex[:6]}", inputs, f"sqlite:///{tmp_path / 'fresh.db'}")
    out = fresh("checkpoint-tool", "import", "--from-kafka", topic)
    assert out.returncode == 0, out.stderr
    assert "generation 1 at factor 1" in out.stdout
    assert json.loads(fresh("checkpoint-tool", "read").stdout) == {
        "Partition 0": {f"kafka.{inputs}.0": "0"},
        "Partition 1": {f"kafka.{inputs}.1": "3"},
    }


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


SAMZA_CID = "1614147487244-33577"
KAFKA_FACTORY = "org.apache.samza.storage.KafkaChangelogStateBackendFactory"


def _running_totals(records):
    """The demo app's state (running total and count per user) after `records`, and the totals each record emits."""
    totals, emitted = {}, {}
    for offset, user, value in records:
        try:
            order = json.loads(value)
        except ValueError:
            continue
        if user is None or not isinstance(order, dict) or "key" not in order:
            continue
        t = totals.get(user, {"total": 0, "count": 0})
        totals[user] = emitted[offset] = {"total": round(t["total"] + order["amount"], 2), "count": t["count"] + 1}
    return totals, emitted


def _samza_v1(task_input: tuple[str, int, int], changelog: tuple[str, int, str]) -> bytes:
    """CheckpointV1 as TaskInstance writes it for a store with a Kafka changelog (tests/samza_fixtures: task_instance_v1)."""
    (stream, p, offset), (cl_stream, cl_p, cl_value) = task_input, changelog

    def entry(s, part, value):
        return {"system": "kafka", "partition": str(part), "offset": value, "stream": s}

    return json.dumps(
        {
            f"SystemStreamPartition [kafka, {cl_stream}, {cl_p}]": entry(cl_stream, cl_p, cl_value),
            f"SystemStreamPartition [kafka, {stream}, {p}]": entry(stream, p, str(offset)),
        },
        separators=(",", ":"),
    ).encode()


def _samza_v2(stream: str, p: int, offset: int, store: str, cl_stream: str, cl_offset: int) -> bytes:
    """CheckpointV2 with a KafkaStateCheckpointMarker (tests/samza_fixtures: task_instance_v2)."""
    ssp = {"system": "kafka", "partition": p, "stream": cl_stream, "keyBucket": -1}
    marker = json.dumps({"version": 1, "changelog-ssp": ssp, "changelog-offset": str(cl_offset)}, separators=(",", ":"))
    doc = {
        "checkpoint-id": SAMZA_CID,
        "input-offsets": {f"kafka.{stream}.{p}": str(offset)},
        "state-checkpoint-markers": {KAFKA_FACTORY: {store: marker}},
        "version": 2,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def test_a_stateful_samza_job_hands_over_with_its_state_and_back(kafka_bootstrap, spark, tmp_path, monkeypatch):
    """A Samza job with a Kafka-changelog store processed the first 40 records of each partition: its checkpoint
    topic (task Partition 0 wrote CheckpointV1 only, Partition 1 CheckpointV2 only) and its changelog (one record
    per put, and one past the commit that a crash left) are imported; the next batches see the state (each order's
    running total continues Samza's); the export then hands the job back: Samza's reading rules find the input
    offsets and, through the markers, a changelog whose replay is the committed state."""
    from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, read_table
    from elasticity.config import validate
    from elasticity.spark.engine import MicroBatchEngine
    from tests.integration.test_engine import feed
    from tests.support import samza_rules

    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    monkeypatch.setenv("DEMO_LOOKUP_MS", "0")
    run = uuid.uuid4().hex[:6]
    inputs, changelog, checkpoints = f"sh-in-{run}", f"sh-totals-{run}", f"__samza_checkpoint_sh_{run}"
    create_topic(kafka_bootstrap, inputs, 2)
    feed(kafka_bootstrap, inputs, 160, seed=5)
    records = {p: [(o, k.decode() if k else None, v) for o, k, v, _ in read_log(kafka_bootstrap, inputs, p)] for p in (0, 1)}
    done = 40  # Samza processed offsets 0..39 of each partition

    # the Samza job's changelog: a record per put (string key serde, JSON msg serde), in its task's partition
    create_topic(kafka_bootstrap, changelog, 2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    newest = {}
    for p in (0, 1):
        _, puts = _running_totals(records[p][:done])
        user_at = {o: user for o, user, _ in records[p]}
        for offset in sorted(puts):
            sent = producer.send(
                changelog,
                key=user_at[offset].encode(),
                value=json.dumps(puts[offset], separators=(",", ":")).encode(),
                partition=p,
            )
            newest[p] = sent.get(timeout=30).offset
    crashed = producer.send(changelog, key=b"user-1", value=b'{"total":9999.0,"count":999}', partition=0)  # after the commit
    producer.flush()
    assert crashed.get(timeout=30).offset == newest[0] + 1

    create_topic(kafka_bootstrap, checkpoints, 1)
    grouper = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
    for task, kind, checkpoint in (
        ("Partition 0", "checkpoint", _samza_v1((inputs, 0, done - 1), (changelog, 0, f"{SAMZA_CID}:{newest[0]}"))),
        ("Partition 1", "checkpoint-v2", _samza_v2(inputs, 1, done - 1, "totals", changelog, newest[1])),
    ):
        log_key = json.dumps(
            {"systemstreampartition-grouper-factory": grouper, "taskName": task, "type": kind}, separators=(",", ":")
        )
        producer.send(checkpoints, key=log_key.encode(), value=checkpoint)
    producer.flush()
    producer.close()

    props = {
        "job.name": f"handover-{run}",
        "task.inputs": f"kafka.{inputs}",
        "app.class": "elasticity.apps.enrichment:build_stateful",
        "task.checkpoint.read.versions": "2,1",
        "stores.totals.changelog": changelog,  # a bare stream, as Samza configs often write it
        "job.changelog.system": "kafka",
        "job.state.dir": str(tmp_path / "state"),
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "job.container.thread.pool.size": "64",
    }
    cli = _cli(kafka_bootstrap, write_properties(tmp_path / "job.properties", props))
    out = cli("checkpoint-tool", "import", "--from-kafka", f"kafka.{checkpoints}")
    assert out.returncode == 0, out.stderr
    assert "Partition 0: CheckpointV1" in out.stderr and "Partition 1: CheckpointV2" in out.stderr

    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    summaries = engine.run(max_records=100, until_caught_up=True)
    assert summaries[-1].lag_left == 0
    sink = read_table(f"{tmp_path / 'out'}/enriched", OUTPUT_SCHEMA).to_pylist()
    for p in (0, 1):
        final, emitted = _running_totals(records[p])
        got = {r["source_offset"]: json.loads(r["value"]) for r in sink if r["source_partition"] == p}
        assert min(got) >= done  # nothing Samza processed runs again
        assert {o: {"total": v["total"], "count": v["count"]} for o, v in got.items() if v.get("key")} == {
            o: t for o, t in emitted.items() if o >= done
        }  # each running total continues the one Samza's store held (and not the write past its commit)

    # hand it back: Samza's rules read the input offsets and restore each store from the changelog up to its marker
    back = f"__samza_checkpoint_back_{run}"
    out = cli("checkpoint-tool", "export", "--to-kafka", f"kafka.{back}")
    assert out.returncode == 0, out.stderr
    written = read_log(kafka_bootstrap, back)
    changelogs = {"totals": ("kafka", changelog)}
    for _, written_key, value, _ in written:
        k = samza_rules.log_key(written_key)
        p = int(k["taskName"].split()[-1])
        version = 1 if k["type"] == "checkpoint" else 2
        offsets = samza_rules.checkpoint_v1(value) if version == 1 else samza_rules.checkpoint_v2(value)[1]
        assert offsets[samza_rules.SSP("kafka", inputs, p)] == str(records[p][-1][0])  # last processed
        ((ssp, marker),) = samza_rules.changelog_offsets(value, version, changelogs, p).values()
        assert (ssp.stream, ssp.partition) == (changelog, p)
        replayed = {}
        for offset, ckey, cvalue, _ in read_log(kafka_bootstrap, changelog, p):
            if offset <= int(marker):  # Samza's transactional restore: up to the marker, inclusive
                replayed[ckey.decode()] = json.loads(cvalue) if cvalue is not None else None
        assert {k: v for k, v in replayed.items() if v is not None} == _running_totals(records[p])[0]
