"""A replay from a timestamp of a stateful job on the engine (running totals per user in a blob-store-backed
store, elasticity.apps.enrichment:build_stateful): ListOffsets by the time on the broker, a new generation
of origin replay, the stores cleared and rebuilt by the replayed records. Afterwards the committed stores
equal the totals recomputed from the records at or past the replay's start, the replayed range's outputs are
a second version told apart by their generation, and incremental data quality passes version by version;
a real duplicate within the version still fails it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from elasticity.api.stream import load_application
from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.coordinator.replayer import replay
from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, list_root, read_table
from elasticity.checkpoint.replay import OutputMode, Replay, ReplayError, ReplayFrom
from elasticity.config import validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.quality.runner import run_quality
from elasticity.quality.state_check import committed_state
from elasticity.spark.engine import MicroBatchEngine
from tests.conftest import REPO
from tests.integration.test_engine import ELASTICITY
from tests.support.helpers import read_log

STATEFUL = "elasticity.apps.enrichment:build_stateful"


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"rp-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    monkeypatch.setenv("DEMO_LOOKUP_MS", "0")
    props = {
        "job.name": f"replay-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "1",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": STATEFUL,
        "task.checkpoint.read.versions": "2,1",
        "stores.totals.backup.factories": "blobstore",
        "blob.store.uri": str(tmp_path / "blobs"),
        "job.state.dir": str(tmp_path / "state"),
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "job.report.path": str(tmp_path / "reports"),
    }
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return topic, validate(props), path


def _totals_from(topic: str, starts: dict[int, int]) -> dict[str, dict]:
    """Running (total, count) per user over the records at or past each partition's start, from the topic alone."""
    totals: dict[str, dict] = {}
    for partition, offset, key, value in read_log(os.environ["KAFKA_BOOTSTRAP_SERVERS"], topic):
        order = json.loads(value) if value else None
        if offset < starts[partition] or key is None or not isinstance(order, dict) or "key" not in order:
            continue
        t = totals.get(key.decode(), {"total": 0, "count": 0})
        totals[key.decode()] = {"total": round(t["total"] + order["amount"], 2), "count": t["count"] + 1}
    return totals


def _quality(config, engine, name):
    result, _ = run_quality(config, engine.store, engine.inputs, incremental=True, run_name=name)
    return result


def test_a_replay_from_a_timestamp_rebuilds_the_stores_and_data_quality_counts_it_as_a_version(spark, kafka_bootstrap, job):
    topic, config, _ = job
    send(kafka_bootstrap, topic, demo_records(120, keys=12, seed=41))
    time.sleep(0.05)
    at = int(time.time() * 1000)
    time.sleep(0.05)
    send(kafka_bootstrap, topic, demo_records(90, keys=12, seed=42))
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=150, until_caught_up=True)
    assert _quality(config, engine, "before").success

    coordinator = JobCoordinator(config, engine.store, engine.inputs)
    before = coordinator.current()
    plan = replay(coordinator, ReplayFrom(timestamp_ms=at), reason="totals fixed", owner="test-replay")
    starts = {s.partition: p.offset for s, p in plan.starts.items()}
    log_ends = {s.partition: p.log_end for s, p in plan.starts.items()}
    assert all(0 < starts[p] < log_ends[p] for p in starts), plan.describe()  # the time falls inside each partition
    new = coordinator.current()
    assert (new.number, new.origin, new.factor) == (before.number + 1, "replay", before.factor)
    assert Replay.from_json(new.replay).requested.timestamp_ms == at
    right_after = _quality(config, engine, "right-after")  # as the DAG runs it: no batch of the replay yet
    assert right_after.success, right_after.failure_message()

    send(kafka_bootstrap, topic, demo_records(60, keys=12, seed=43))
    engine.run(until_caught_up=True)

    app = load_application(config.app_class, config.inputs)
    gen = coordinator.current()
    assert committed_state(config, app, gen, coordinator.checkpoints(gen)) == {"totals": _totals_from(topic, starts)}

    rows = [r for r in read_table(f"{config.output_dir}/enriched", OUTPUT_SCHEMA).to_pylist() if r["source_offset"] is not None]
    replayed = {(r["source_partition"], r["source_offset"]) for r in rows if r["generation"] == new.number}
    older = {(r["source_partition"], r["source_offset"]) for r in rows if r["generation"] < new.number}
    again = {(p, o) for p, o in older if o >= starts[p]}
    assert again and again <= replayed  # the replayed range: in both versions, told apart by the generation
    latest = {}
    for r in rows:  # a reader's latest version: per input record, the rows of its highest generation
        latest[(r["source_partition"], r["source_offset"])] = max(
            r["generation"], latest.get((r["source_partition"], r["source_offset"]), 0)
        )
    assert all(g == new.number for (p, o), g in latest.items() if o >= starts[p])

    result = _quality(config, engine, "after")  # the old version's last batches, then the replay's version
    assert result.success, result.failure_message()
    checks = {c.name: c for c in result.checks}
    assert checks["state"].rows > 0 and checks["audit_unique"].rows > 0

    third = replay(coordinator, ReplayFrom(timestamp_ms=at), outputs=OutputMode.REPLACE, owner="test-replay")
    in_range = sum(r["source_offset"] >= starts[r["source_partition"]] for r in rows)  # both versions' rows
    assert third.removed_rows == in_range and f"{in_range} rows of the replayed range removed" in third.describe()
    engine.run(until_caught_up=True)
    rows = [r for r in read_table(f"{config.output_dir}/enriched", OUTPUT_SCHEMA).to_pylist() if r["source_offset"] is not None]
    ranged = [
        (r["source_partition"], r["source_offset"], r["generation"])
        for r in rows
        if r["source_offset"] >= starts[r["source_partition"]]
    ]
    assert {g for *_, g in ranged} == {third.new.number}  # replaced: the replay's rows alone, each record once
    assert len(ranged) == len({(p, o) for p, o, _ in ranged})
    gen = coordinator.current()
    assert committed_state(config, app, gen, coordinator.checkpoints(gen)) == {"totals": _totals_from(topic, starts)}
    replaced = _quality(config, engine, "replaced")
    assert replaced.success, replaced.failure_message()

    send(kafka_bootstrap, topic, demo_records(30, keys=12, seed=44))
    batch = engine.run(until_caught_up=True)[-1].batch_id
    (copied,) = [f for f in list_root(f"{config.output_dir}/enriched").live if f.first == batch and f.kind == "batch"][:1]
    shutil.copy(copied.path, copied.path.replace("-slot-", "-slot-9"))  # a real duplicate, within the version
    failed = _quality(config, engine, "duplicated")
    assert not failed.success and not {c.name: c for c in failed.checks}["sink_unique"].success


def test_a_replay_past_the_input_retention_is_refused_naming_the_store(spark, kafka_bootstrap, job):
    """From the earliest offset of a log whose start retention moved: the stores would miss what it removed. The
    command line's replay exits with 2 and the reason."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, config, path = job
    send(kafka_bootstrap, topic, demo_records(40, keys=5, seed=45))
    engine = MicroBatchEngine(config, spark)
    engine.run(until_caught_up=True)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, 5)]).values():
        f.result()
    coordinator = JobCoordinator(config, engine.store, engine.inputs)
    before = coordinator.current()
    with pytest.raises(ReplayError, match=r"stores 'totals': the input's retention no longer holds the earliest offsets needed"):
        replay(coordinator, ReplayFrom(timestamp_ms=None), owner="test-replay")
    assert coordinator.current() == before

    command = [ELASTICITY, "replay", "--config", str(path), "--from-earliest"]
    refused = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "replay refused, nothing was changed: stores 'totals'" in refused.stderr
    assert f"{topic}-0 starts at 5" in refused.stderr
    assert coordinator.current() == before


@pytest.mark.parametrize("backups", ["kafka", "kafka,blobstore"])
def test_cleared_changelog_stores_restore_empty_from_each_backend(tmp_path, kafka_bootstrap, backups):
    """A replay's clearing of a changelog-backed store (alone, or with the blob store): a tombstone for each of the
    task's keys in its changelog partition, so a restore from either backend, on a fresh host or on the one that
    held the state, gives the empty store."""
    from elasticity.checkpoint.task_checkpoint import CheckpointV2
    from elasticity.jobmodel.model import ContainerModel, JobModel, TaskModel
    from elasticity.state import StorageConfig
    from elasticity.state.replay_state import clear_state
    from tests.integration.test_state_backends import props
    from tests.support.state_job import COUNTS, TASKS, manager, reference, run, state

    p = props(tmp_path, kafka_bootstrap, backups=backups)
    assert run(tmp_path / "job", 3, p) == reference(3) != {}
    config = validate({"job.name": "statejob", "task.inputs": "kafka.in", "task.checkpoint.read.versions": "2,1", **p})
    model = JobModel.of({}, [ContainerModel("0", tuple(TaskModel(t, frozenset(), i) for i, t in enumerate(TASKS)))])
    cleared = clear_state(StorageConfig.of(config, [COUNTS]), [COUNTS], model, factor=2, from_generation=1)
    cps = {t: CheckpointV2(cleared.checkpoint_id, {}, cleared.markers[t]) for t in TASKS}
    for restore in backups.split(","):
        csm = manager({**p, "stores.counts.restore.factories": restore, "job.state.dir": str(tmp_path / f"fresh-{restore}")})
        try:
            csm.restore(cps)
            assert state(csm) == {}, restore
        finally:
            csm.close()
    csm = manager(p)  # the host whose live stores hold the old state
    try:
        csm.restore(cps)
        assert state(csm) == {}
    finally:
        csm.close()
