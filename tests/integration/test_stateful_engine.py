"""A stateful job on the engine: running totals per user in a store per virtual
task (elasticity.apps.enrichment:build_stateful), on a classic local session and
on the Spark Connect server, with async commits whose uploads run in the Python
workers. After any crash and a rerun, the committed state equals a reference
computed from the input and every output is there exactly once with the right
running total."""

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest

from elasticity.api.stream import load_application
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import BLOB_STORE_FACTORY as BLOB
from elasticity.config import KAFKA_CHANGELOG_FACTORY as KAFKA
from elasticity.config import ConfigError, validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.quality.runner import run_quality
from elasticity.quality.state_check import committed_state
from elasticity.spark.engine import MicroBatchEngine
from elasticity.state import ContainerStorageManager, StorageConfig
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.views.jobview import build_view
from elasticity.views.page import render
from tests.conftest import REPO
from tests.integration.test_engine import ELASTICITY, feed
from tests.support.helpers import read_log

STATEFUL = "elasticity.apps.enrichment:build_stateful"


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"st-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    monkeypatch.setenv("DEMO_LOOKUP_MS", "0")
    props = {
        "job.name": f"stateful-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "job.container.thread.pool.size": "64",
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
        "task.commit.timeout.ms": "60000",
    }
    return topic, props, tmp_path


def reference(config):
    """Running (total, count) per user after every input record, computed from the topic alone."""
    (stream,) = config.inputs
    records = read_log(os.environ["KAFKA_BOOTSTRAP_SERVERS"], stream.stream)
    totals, emitted = {}, {}
    for partition, offset, key, value in records:
        try:
            order = json.loads(value)
        except ValueError:
            continue
        if key is None or not isinstance(order, dict) or "key" not in order:
            continue
        t = totals.get(key.decode(), {"total": 0, "count": 0})
        t = {"total": round(t["total"] + order["amount"], 2), "count": t["count"] + 1}
        totals[key.decode()] = emitted[(partition, offset)] = t
    return totals, emitted


def assert_state_and_outputs(config, store):
    """The committed stores equal the reference; each valid order was emitted exactly once with its running totals."""
    totals, emitted = reference(config)
    gen = store.generation(config.job_name)
    cps = JobCoordinator(config, store, KafkaInputs(config)).checkpoints(gen)
    app = load_application(config.app_class, config.inputs)
    assert committed_state(config, app, gen, cps) == {"totals": totals}
    committed = set(store.batches_with_status(config.job_name, "committed"))
    sink = [
        r
        for r in read_table(f"{config.get('job.output.path')}/enriched", OUTPUT_SCHEMA).to_pylist()
        if r["batch_id"] in committed
    ]
    out = {(r["source_partition"], r["source_offset"]): json.loads(r["value"]) for r in sink}
    assert len(out) == len(sink), "duplicates in the exactly-once sink"
    keyed = {k: {"total": v["total"], "count": v["count"]} for k, v in out.items() if v.get("key") is not None}
    missing = sorted(emitted.keys() - keyed.keys())
    where = {(r["source_partition"], r["source_offset"]): (r["batch_id"], r["task_name"]) for r in sink}
    wrong = [(k, where[k], keyed[k], emitted[k]) for k in sorted(emitted.keys() & keyed.keys()) if keyed[k] != emitted[k]]
    assert not missing and not wrong, (
        f"{len(missing)} orders missing from the committed batches {sorted(committed)} (first: {missing[:5]}); "
        f"{len(wrong)} with other totals (source, (batch, task), emitted, expected): {wrong[:5]}; "
        f"plans: {[(p.batch_id, [(r.ssp.partition, r.start, r.end) for r in p.ranges]) for p in store.plans(config.job_name)]}; "
        f"{_where_else(config, missing[:5])}"
    )
    assert keyed == emitted


def _where_else(config, sources):
    """Where the first missing orders are, if anywhere: any output file (committed or not), audit rows, dead letters."""
    wanted = set(sources)
    found = []
    for name, root, schema, part in (
        ("output", f"{config.get('job.output.path')}/enriched", OUTPUT_SCHEMA, "source_partition"),
        ("audit", config.get("job.audit.path"), AUDIT_SCHEMA, "partition"),
        ("dead letter", config.get("job.dead.letter.path"), DEAD_LETTER_SCHEMA, "partition"),
    ):
        offset = "source_offset" if name == "output" else "offset"
        for r in read_table(root, schema).to_pylist():
            if (r[part], r[offset]) in wanted:
                found.append((name, (r[part], r[offset]), r["batch_id"], r["task_name"], r.get("status") or r.get("error")))
    return f"the first missing, wherever found: {found}"


def run_cli(props, tmp_path, *args, fault=None, command="run-batch"):
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {k: v for k, v in os.environ.items() if k != "ELASTICITY_FAULT"} | ({"ELASTICITY_FAULT": fault} if fault else {})
    return subprocess.run(
        [ELASTICITY, command, "--config", str(path), "--owner", "airflow-run-1", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_stateful_batches_on_a_classic_session(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 300, seed=11)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    first = engine.run(max_records=120)[0]  # one batch, synchronous commit
    assert first.metrics["store-metrics"]["totals"]["puts"] > 0
    stores = first.metrics["stores"]
    assert {m for s in stores.values() for m in s["totals"]["markers"]} == {BLOB} and all(
        s["totals"]["disk-usage-bytes"] > 0 for s in stores.values()
    )
    summaries = engine.run(max_records=60, until_caught_up=True)  # async commits: uploads overlap the next batch
    assert len(summaries) > 1 and summaries[-1].lag_left == 0
    assert_state_and_outputs(config, engine.store)

    # the job page lists each virtual task's store with its size and the marker of its committed checkpoint
    view = build_view(config, engine.store, engine.inputs)
    rows = {t.task: t.stores for t in view.tasks}
    assert all(
        len(s) == 1 and s[0].store == "totals" and set(s[0].markers) == {BLOB} and s[0].disk_bytes for s in rows.values()
    ), rows
    page = render(view)
    assert page.count("<td class=stores>totals ") == len(rows) and len(re.findall(r">[\d.,]+ [kM]B, blobstore: ", page)) == len(
        rows
    )
    feed(kafka_bootstrap, topic, 200, seed=12)
    engine.run(max_records=100, until_caught_up=True)
    assert_state_and_outputs(config, engine.store)

    result, _ = run_quality(config, engine.store, engine.inputs)
    state = next(c for c in result.checks if c.name == "state")
    assert state.success and state.rows > 0, result.failure_message()

    # the check reads the committed snapshots: alter one stored value there, and it fails naming the key
    tamper(config, engine.store, tmp_path)
    result, _ = run_quality(config, engine.store, engine.inputs)
    state = next(c for c in result.checks if c.name == "state")
    assert not state.success and state.unexpected == 1 and "user-" in state.examples[0]


def tamper(config, store, tmp_path):
    """Commit a snapshot in which one user's total is off by one cent (a checkpoint-tool write)."""
    from dataclasses import replace

    from elasticity.checkpoint.task_checkpoint import CheckpointId, state_of

    app = load_application(config.app_class, config.inputs)
    gen = store.generation(config.job_name)
    cps = JobCoordinator(config, store, KafkaInputs(config)).checkpoints(gen)
    task = sorted(cps)[0]
    storage = replace(StorageConfig.of(config, list(app.stores.values())), state_dir=tmp_path / "tamper")
    (model,) = [t for t in gen.job_model.tasks() if t.task_name == task]
    csm = ContainerStorageManager(storage, list(app.stores.values()), [model], len(gen.job_model.tasks()))
    try:
        csm.restore({task: state_of(cps[task])})
        totals = csm.store(task, "totals")
        key, value = next(totals.all())
        totals.put(key, {**value, "total": round(value["total"] + 0.01, 2)})
        cp_id = CheckpointId.create()
        markers = csm.upload(csm.snapshot(cp_id))[task]
    finally:
        csm.close()
    store.replace_checkpoints(
        config.job_name,
        gen.number,
        [replace(cps[task], checkpoint_id=cp_id, state_markers=markers)],
        write_versions=config.checkpoint_write_versions,
        owner=None,
    )


def test_stateful_batches_on_spark_connect(spark_connect, kafka_bootstrap, job):
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 300, seed=13)
    props |= {"spark.remote": spark_connect, "job.container.process.count": "2"}
    for args in (
        ["--max-records", "100"],
        ["--max-records", "80", "--until-caught-up"],
        "feed",
        ["--max-records", "80", "--until-caught-up"],
    ):
        if args == "feed":
            feed(kafka_bootstrap, topic, 100, seed=14)
            continue
        done = run_cli(props, tmp_path, *args)
        assert done.returncode == 0, done.stderr[-3000:]
    config = validate(props)
    store = CheckpointStore(config.checkpoint_store_url())
    assert not store.pending_plan(config.job_name)
    metrics = [m["metrics"] for m in store.metrics(config.job_name)]
    assert metrics[0]["stores"] and metrics[0]["store-metrics"]["totals"]["gets"] > 0
    assert sum(m["store-metrics"]["totals"]["upload-ns"] for m in metrics) > 0  # background uploads, counted a batch later
    sources = [s["totals"]["restored-from"] for m in metrics for s in m["stores"].values() if "restored-from" in s["totals"]]
    # on one machine a store is never downloaded: reused open by the Python worker that snapshotted it,
    # or opened as it is by another one (its live folder sealed with the checkpoint id)
    assert set(sources) <= {"empty", "open", "local"} and "open" in sources
    assert_state_and_outputs(config, store)


# each kill point, in turn on one job, with the exit codes of its killed run: a worker's death fails the Spark task
# it is running, after its snapshot always; after a background upload only if it was running the next batch's task
# by then (else the driver commits, and goes on); a driver's death is its own SIGKILL
KILLS = (
    ("state.snapshot.done:kill", {1}),  # a Python worker dies after its snapshot, before the driver hears of it
    ("state.blob.index_uploaded:kill", {0, 1}),  # a worker dies after its upload (the driver commits, it is durable)
    ("commit.upload:kill", {137}),  # the driver dies while the uploads of an async commit run
    ("commit.fenced:kill", {137}),  # the driver dies inside the checkpoint transaction
    ("commit.after_commit:kill", {137}),  # the driver dies after the checkpoint, before any cleanup
)


def test_killed_at_each_step_of_a_stateful_commit_then_rerun(spark, kafka_bootstrap, job):
    """Every kill point on one job, as a scenario: new records, a run killed at the point, the rerun (another
    driver, other Python workers) replays what was not committed, and the committed state and the outputs are
    checked; then the next point. One job for all: its set-up and first batch once, and a duplicate or a loss
    left by one kill stays in the state and the sink the next checks read."""
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 240, seed=15)
    props["spark.master"] = "local[2]"
    config = validate(props)
    MicroBatchEngine(config, spark).run(max_records=80, owner="airflow-run-1")
    for n, (fault, codes) in enumerate(KILLS):
        if n:
            feed(kafka_bootstrap, topic, 160, seed=15 + n)  # what the killed run reads: the previous rerun caught up
        killed = run_cli(props, tmp_path, "--max-records", "60", "--until-caught-up", fault=fault)
        assert killed.returncode in codes, f"{fault}: {killed.stderr[-3000:]}"
        engine = MicroBatchEngine(config, spark)
        assert engine.run(max_records=70, until_caught_up=True, owner="airflow-run-1")[-1].lag_left == 0, fault
        assert_state_and_outputs(config, engine.store)


def test_dual_commit_restores_from_each_backend_and_a_missing_marker_falls_back(spark, kafka_bootstrap, job, s3_server):
    from dataclasses import replace

    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 200, seed=16)
    props |= {
        "stores.totals.backup.factories": "kafka,blobstore",
        "stores.totals.changelog": f"kafka.{topic}-totals-changelog",
        "blob.store.uri": s3_server.uri(f"dual-{uuid.uuid4().hex[:8]}"),
    }
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=70, until_caught_up=True)
    cps = engine.coordinator.checkpoints(engine.coordinator.current())
    assert all(set(cp.state_markers) == {KAFKA, BLOB} for cp in cps.values())  # dual commit: both markers in one CheckpointV2
    assert_state_and_outputs(config, engine.store)
    for factory in (KAFKA, BLOB):  # each backend alone restores the committed state
        alone = validate({**props, "stores.totals.restore.factories": factory})
        assert_state_and_outputs(alone, engine.store)

    # a new host (no local state), and checkpoints without the blob marker: the next batch restores from the changelog
    gen = engine.coordinator.current()
    engine.store.replace_checkpoints(
        config.job_name,
        gen.number,
        [replace(cp, state_markers={KAFKA: cp.state_markers[KAFKA]}) for cp in cps.values()],
        write_versions=config.checkpoint_write_versions,
        owner=None,
    )
    shutil.rmtree(tmp_path / "state")
    props["stores.totals.restore.factories"] = "blobstore,kafka"
    config = validate(props)
    feed(kafka_bootstrap, topic, 100, seed=17)
    MicroBatchEngine(config, spark).run(max_records=70, until_caught_up=True)
    assert_state_and_outputs(config, CheckpointStore(config.checkpoint_store_url()))


def test_a_stateful_app_needs_checkpoint_v2(job):
    _, props, _ = job
    app = load_application(STATEFUL, validate(props).inputs)
    for versions in ("1", "1,2"):
        with pytest.raises(ConfigError, match=r"task.checkpoint.read.versions=.*'totals'"):
            StorageConfig.of(validate({**props, "task.checkpoint.read.versions": versions}), list(app.stores.values()))
    with pytest.raises(ConfigError, match="task.checkpoint.write.versions=1"):
        StorageConfig.of(validate({**props, "task.checkpoint.write.versions": "1"}), list(app.stores.values()))


def state_check_passes(config, store, inputs):
    result, _ = run_quality(config, store, inputs)
    state = next(c for c in result.checks if c.name == "state")
    assert state.success and state.rows > 0, result.failure_message()


def test_state_moves_with_its_keys_2_to_8_to_3_on_s3(spark, kafka_bootstrap, job, s3_server):
    """Rescales mid-stream (lag left): each new task gets exactly the entries of its keys, the batches
    after it continue the running totals, and the state check passes after every step."""
    topic, props, tmp_path = job
    props["blob.store.uri"] = s3_server.uri(f"rescale-{uuid.uuid4().hex[:8]}")
    feed(kafka_bootstrap, topic, 300, seed=21)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=100, until_caught_up=True)
    feed(kafka_bootstrap, topic, 120, seed=22)
    engine.run(max_records=50)  # lag left: the tasks' offsets differ when the rescale comes
    state_check_passes(config, engine.store, engine.inputs)

    dry = run_cli(props, tmp_path, "--factor", "8", "--dry-run", command="rescale")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "state: would move" in dry.stdout and "Partition_1-7-8 <- Partition_1-1-2: totals " in dry.stdout, dry.stdout
    assert "state-move-ns=" in dry.stderr and "checkpoint-compute-ns=" in dry.stderr
    killed = run_cli(props, tmp_path, "--factor", "8", command="rescale", fault="rescale.state.uploaded:kill")
    assert killed.returncode == 137, killed.stderr[-3000:]
    assert engine.coordinator.current().factor == 2  # the old generation, usable as it was
    state_check_passes(config, engine.store, engine.inputs)

    for factor in (8, 3):
        coordinator = JobCoordinator(config, engine.store, engine.inputs)
        coordinator.store.release_lease(config.job_name, "airflow-run-1")  # the killed CLI's lease
        plan = coordinator.rescale(factor)
        assert plan.state is not None and plan.metrics["state-move-ns"] > 0 and "checkpoint-compute-ns" in plan.metrics
        moved = [t for t in plan.state.transfers if t.how == "moved"]
        assert len(moved) == 2 * factor and sum(t.keys for t in moved) > 0
        state_check_passes(config, engine.store, engine.inputs)
        feed(kafka_bootstrap, topic, 150, seed=23 + factor)
        assert engine.run(max_records=80, until_caught_up=True)[-1].lag_left == 0
        assert_state_and_outputs(config, engine.store)
        state_check_passes(config, engine.store, engine.inputs)
    assert (
        BlobStoreManager(props["blob.store.uri"]).list(f"{config.job_name}-1/rescale/") == []
    )  # the killed attempt's journal handled


def test_data_quality_reads_newer_checkpoints_when_commits_delete_the_snapshots_it_pinned(spark, kafka_bootstrap, job, caplog):
    """Batches go on committing while data quality runs, and each commit deletes the snapshots beyond
    stores.<store>.blob.retain: the state check's snapshots vanish under it, and it reads the newer ones."""
    from elasticity import faults

    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 200, seed=21)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=100, until_caught_up=True)
    pinned = []

    def meanwhile(point: str) -> None:
        if point == "quality.state.pinned" and not pinned:
            pinned.append(max(engine.store.batches_with_status(config.job_name, "committed")))
            for seed in (22, 23, 24):  # three more commits, each with records for every virtual task
                feed(kafka_bootstrap, topic, 200, seed=seed)
                engine.run(max_records=1000)

    caplog.set_level("INFO", logger="elasticity.quality.pinned_state")
    with faults.hook(meanwhile):
        result, _ = run_quality(config, engine.store, engine.inputs)
    assert pinned and any("superseded while data quality restored it" in r.getMessage() for r in caplog.records)
    state = next(c for c in result.checks if c.name == "state")
    assert result.success and state.rows > 0, result.failure_message()
    assert max(engine.store.batches_with_status(config.job_name, "committed")) > pinned[0]


def test_incremental_state_check_folds_only_the_new_batches_into_the_edge(spark, kafka_bootstrap, job):
    """An incremental run compares the stores with the edge's expected values folded over the new batches alone: it
    passes across a rescale with the validated batches' audit gone (as retention leaves it), and fails on an edge
    value the new batches never touch and on a wrong stored value, naming the key."""
    from elasticity.batch.sinks.outputs import delete_batches
    from tests.support.helpers import edge_table, put_edge_table

    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 200, seed=31)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=100, until_caught_up=True)

    def incremental(name: str) -> dict:
        result, _ = run_quality(config, engine.store, engine.inputs, incremental=True, run_name=name)
        return {c.name: c for c in result.checks} | {"success": result.success, "message": result.failure_message()}

    first = incremental("first")
    assert first["success"] and first["state"].rows > 0, first["message"]
    validated = engine.store.batches_with_status(config.job_name, "committed")
    delete_batches(config.get("job.audit.path"), validated)  # a recomputation from the first batch is impossible now

    feed(kafka_bootstrap, topic, 150, seed=32)
    JobCoordinator(config, engine.store, engine.inputs).rescale(3)
    engine.run(max_records=60, until_caught_up=True)
    second = incremental("second")
    assert second["success"] and second["state"].rows == first["state"].rows, second["message"]

    edge = edge_table(engine.store, config.job_name, "state")
    feed(kafka_bootstrap, topic, 40, seed=33)
    new = [s.batch_id for s in engine.run(max_records=60, until_caught_up=True)]
    touched = set(read_table(config.get("job.audit.path"), AUDIT_SCHEMA, new).column("key").to_pylist())
    victim = edge.index[~edge["key"].isin(touched)][0]
    wrong = edge.copy()
    value = json.loads(wrong.loc[victim, "value"])
    wrong.loc[victim, "value"] = json.dumps({**value, "count": value["count"] + 1}).encode()
    put_edge_table(engine.store, config.job_name, "state", wrong)
    across = incremental("edge")
    assert not across["state"].success and across["state"].unexpected == 1, across["message"]
    assert wrong.loc[victim, "key"].decode() in across["state"].examples[0]
    put_edge_table(engine.store, config.job_name, "state", edge)
    assert incremental("fixed")["success"]  # the failed run left the edge where it was

    feed(kafka_bootstrap, topic, 40, seed=34)
    engine.run(max_records=60, until_caught_up=True)
    tamper(config, engine.store, tmp_path)
    stored = incremental("tampered")
    assert not stored["state"].success and stored["state"].unexpected == 1 and "user-" in stored["state"].examples[0]
