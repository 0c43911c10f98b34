"""The Spark micro-batch engine end to end: real broker, real Spark local, real store.

Keyed records (null keys, a hot key, malformed values) on 3 partitions; batches
at factor 2, rescale to 8, more batches, rescale to 3, more batches, drain.
Everything is checked from the audit dataset and the sinks."""

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from elasticity import faults
from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, DEAD_LETTER_SCHEMA, OUTPUT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from tests.conftest import REPO
from tests.support.helpers import read_log

ELASTICITY = str(Path(sys.executable).with_name("elasticity"))
MALFORMED = [(b"user-bad", b"not json{"), (None, b'{"amount": 3}'), (b"user-1", b'{"no_key": true}')]


def feed(bootstrap, topic, n, seed):
    records = list(demo_records(n, keys=25, seed=seed))
    records[n // 3 : n // 3] = MALFORMED  # undecodable value, and two the app rejects
    return send(bootstrap, topic, records)


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"eng-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 3)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    props = {
        "job.name": f"engine-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "job.container.count": "2",
        "job.container.thread.pool.size": "64",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": "elasticity.apps.enrichment:build_async",
        "task.max.concurrency": "16",
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "batch.read.chunk.records": "150",
    }
    return topic, props, tmp_path


def committed_audit(store, job_name, audit_path):
    committed = set(store.batches_with_status(job_name, "committed"))
    rows = read_table(audit_path, AUDIT_SCHEMA).to_pylist()
    return [r for r in rows if r["batch_id"] in committed]


def assert_exactly_once_in_order(store, config, kafka_bootstrap):
    job_name = config.job_name
    audit = committed_audit(store, job_name, config.get("job.audit.path"))
    seen = {}
    for r in audit:
        k = (r["partition"], r["offset"])
        assert k not in seen, f"audited twice: {r} and {seen[k]}"
        seen[k] = r
    gen = store.generation(job_name)
    inputs = KafkaInputs(config)
    ends = inputs.offsets([s.without_key_bucket() for t in gen.job_model.tasks() for s in t.system_stream_partitions], "upcoming")
    for ssp, end in ends.items():  # drained: every offset of every partition audited
        missing = [o for o in range(end) if (ssp.partition, o) not in seen]
        assert not missing, f"lost {ssp} offsets {missing[:10]}"
    by_key = {}
    for r in sorted(audit, key=lambda r: (r["batch_id"], r["task_name"], r["seq"])):
        if r["key"] is not None:
            by_key.setdefault(r["key"], []).append((r["partition"], r["offset"]))
    for key, offs in by_key.items():
        for (p1, o1), (p2, o2) in zip(offs, offs[1:], strict=False):
            assert p1 == p2 and o2 > o1, f"key {key!r} out of order: {(p1, o1)} then {(p2, o2)}"
    committed = set(store.batches_with_status(job_name, "committed"))
    sink = [
        r
        for r in read_table(f"{config.get('job.output.path')}/enriched", OUTPUT_SCHEMA).to_pylist()
        if r["batch_id"] in committed
    ]
    sources = [(r["source_partition"], r["source_offset"]) for r in sink]
    assert len(sources) == len(set(sources)), "duplicates in the exactly-once sink"
    processed = {k for k, r in seen.items() if r["status"] == "processed"}
    assert set(sources) == processed
    return audit, sink


def test_batches_and_rescales_lose_nothing_and_keep_key_order(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 900, seed=1)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    first = engine.run(max_records=400)[0]
    assert (first.generation, first.factor) == (1, 2)
    assert 400 - 3 <= first.records_read <= 400  # the cap, shared over 3 partitions in proportion to lag
    engine.run(max_records=300)

    coordinator = JobCoordinator(config, engine.store, engine.inputs)
    assert coordinator.rescale(8).migration is not None
    feed(kafka_bootstrap, topic, 600, seed=2)
    s8 = engine.run(max_records=500)[0]
    assert (s8.generation, s8.factor, s8.task_count) == (2, 8, 24)
    coordinator.rescale(3)
    engine.run(max_records=350)
    summaries = engine.run(until_caught_up=True)
    assert summaries[-1].lag_left == 0

    audit, sink = assert_exactly_once_in_order(engine.store, config, kafka_bootstrap)
    assert len(audit) == 900 + 600 + 2 * len(MALFORMED)
    dead = read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).to_pylist()
    reasons = sorted(d["error"] for d in dead)
    assert len(dead) == 2 * len(MALFORMED)
    assert sum("deserialize: value is not valid json" in r for r in reasons) == 2
    assert sum("order without a key field" in r for r in reasons) == 4
    metrics = engine.store.metrics(config.job_name)
    assert {m["factor"] for m in metrics} == {2, 8, 3}
    assert all("keyhash-compute-ns" in m["metrics"] and "lag" in m["metrics"] for m in metrics)


def test_compacted_sinks_keep_each_record_once_and_read_as_one_dataset_with_pyarrow_pandas_and_spark(spark, kafka_bootstrap, job):
    """A file per (batch, process slot), the virtual task and the batch as columns; batches, a compaction up to
    the last committed batch, more batches, another compaction: every input record's output once in the
    exactly-once sink, and the ecosystem's readers take a sink's root as it is and see what the engine's own
    reader sees."""
    import pandas as pd
    import pyarrow.parquet as pq

    from elasticity.batch.sinks.compaction import compact_sinks

    topic, props, tmp_path = job
    props["job.output.compaction.target.bytes"] = "20000"  # a few compacted files, not one
    feed(kafka_bootstrap, topic, 300, seed=5)
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=100)
    engine.run(max_records=100)
    for root in (tmp_path / "out" / "enriched", tmp_path / "audit"):
        # batch-<n>-e<the attempt's lease epoch>-slot-<i>
        assert {re.sub(r"-e\d+$", "", f.name.split("-slot-")[0]) for f in root.glob("*.parquet")} == {
            "batch-000000000001",
            "batch-000000000002",
        }
        assert all(f.name.endswith(("-slot-0.parquet", "-slot-1.parquet")) for f in root.glob("*.parquet"))  # 2 slots
    first = compact_sinks(config, through_batch=max(engine.store.batches_with_status(config.job_name, "committed")), now_ms=0)
    assert [s.batches_compacted for s in first.sinks][:2] == [2, 2]  # dead letters: those of batches with bad records
    feed(kafka_bootstrap, topic, 200, seed=6)
    engine.run(max_records=150)
    engine.run(until_caught_up=True)
    last = max(engine.store.batches_with_status(config.job_name, "committed"))
    assert last >= 4
    audit, sink = assert_exactly_once_in_order(engine.store, config, kafka_bootstrap)  # before the second compaction
    assert len(audit) == 500 + 2 * len(MALFORMED)
    report = compact_sinks(config, through_batch=last, now_ms=0)
    assert report.files_after < report.files_before and report.files_expired == 0
    assert assert_exactly_once_in_order(engine.store, config, kafka_bootstrap) == (audit, sink)
    dead = read_table(str(tmp_path / "dlq"), DEAD_LETTER_SCHEMA).to_pylist()
    assert len(dead) == 2 * len(MALFORMED)
    for root, ours in ((tmp_path / "out" / "enriched", sink), (tmp_path / "audit", audit), (tmp_path / "dlq", dead)):
        assert all(f.name.startswith("compacted-") for f in root.glob("*.parquet"))
        expected = sorted((r["batch_id"], r["task_name"], r["offset" if "offset" in r else "seq"]) for r in ours)
        for read in (
            pq.read_table(root).to_pylist(),
            pd.read_parquet(root).to_dict("records"),
            [r.asDict() for r in spark.read.parquet(str(root)).collect()],
        ):
            assert sorted((r["batch_id"], r["task_name"], r["offset" if "offset" in r else "seq"]) for r in read) == expected


def test_killed_between_sink_and_commit_rerun_has_no_duplicates(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 600, seed=3)
    props["spark.master"] = "local[2]"
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "ELASTICITY_FAULT": "commit.fenced:kill"}
    args = [ELASTICITY, "run-batch", "--config", str(path), "--max-records", "300", "--owner", "airflow-run-1"]
    killed = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == 137, killed.stderr[-2000:]
    config = validate(props)
    store = CheckpointStore(config.checkpoint_store_url())
    assert store.pending_plan(config.job_name).batch_id == 1  # sinks written, commit never happened
    assert read_table(str(tmp_path / "audit"), AUDIT_SCHEMA).num_rows > 0

    env.pop("ELASTICITY_FAULT")
    rerun = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary["replayed"] is True and summary["batch_id"] == 1
    MicroBatchEngine(config, spark, store).run(until_caught_up=True)
    assert_exactly_once_in_order(store, config, kafka_bootstrap)


def test_an_upload_that_fails_behind_a_later_batch_commits_nothing_after_it(spark, kafka_bootstrap, job):
    """Batch 1's commit upload fails after batch 2 ran on its snapshot and handed its own commit over: batch 2
    must not commit (its checkpoints are past batch 1's ranges, whose replay would then process nothing after
    removing batch 1's outputs). One run replays both, in order, and nothing is lost."""
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 600, seed=5)
    props["task.commit.max.delay.ms"] = "600000"  # batch 2's commit is deferred behind batch 1's upload
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    uploads = []

    def first_upload_lost(point: str) -> None:
        if point != "commit.upload":
            return
        uploads.append(point)
        if len(uploads) > 1:
            return
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not read_table(str(tmp_path / "audit"), AUDIT_SCHEMA, [2]).num_rows:
            time.sleep(0.2)  # batch 2 runs on batch 1's snapshot meanwhile
        time.sleep(1.0)  # and hands its commit over
        raise faults.InjectedFault("batch 1's upload was lost")

    with faults.hook(first_upload_lost), pytest.raises(faults.InjectedFault):
        engine.run(max_records=400, until_caught_up=True)
    assert [p.batch_id for p in engine.store.plans(config.job_name, "planned")] == [1, 2]
    assert engine.store.batches_with_status(config.job_name, "committed") == []

    replayed = MicroBatchEngine(config, spark).run()  # one run, as before a rescale: the whole chain replays
    assert [(s.batch_id, s.replayed) for s in replayed] == [(1, True), (2, True)]
    assert engine.store.pending_plan(config.job_name) is None
    assert_exactly_once_in_order(engine.store, config, kafka_bootstrap)


def test_kafka_sink_relays_every_record_with_its_key(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 300, seed=4)
    props["app.class"] = "tests.support.apps:relay"
    config = validate(props)
    summary = MicroBatchEngine(config, spark).run(until_caught_up=True)[-1]
    assert summary.lag_left == 0
    relayed = [json.loads(v) | {"key": k} for _, _, k, v in read_log(kafka_bootstrap, f"{topic}-relay")]
    assert len(relayed) == 300 + 2  # the undecodable record went to the dead letters
    assert len({(r["partition"], r["offset"]) for r in relayed}) == len(relayed)


def test_fail_policy_commits_the_others_and_stops_the_failing_task(spark, kafka_bootstrap, job):
    from elasticity.spark.engine import BatchFailed

    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 60, seed=5)
    props |= {"app.class": "tests.support.apps:broken", "task.dead.letter.policy": "fail"}
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    with pytest.raises(BatchFailed, match="cannot handle offset"):
        engine.run()
    cps = engine.coordinator.checkpoints(engine.coordinator.current())
    stopped = [o for cp in cps.values() for o in cp.offsets.values()]
    assert min(stopped) <= 2 < max(stopped)  # the failing tasks stopped early; the others moved on
    assert not engine.store.pending_plan(config.job_name)


def test_each_batch_records_how_old_its_records_were_at_its_commit(spark, kafka_bootstrap, job):
    """Records sent with explicit timestamps (a second apart, from ten minutes ago), batches of at most 150 with
    their commits overlapping the next batch: each batch's freshness is its commit time minus the lowest and
    highest timestamp of the records it audited, its commit time within the run, and the store keeps it."""
    from kafka import KafkaProducer

    topic, props, tmp_path = job
    props["app.class"] = "elasticity.apps.identity:build"
    base = int(time.time() * 1000) - 600_000
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    futures = [
        (base + 1000 * i, producer.send(topic, key=b"k%d" % (i % 7), value=b'{"i": %d}' % i, timestamp_ms=base + 1000 * i))
        for i in range(300)
    ]
    producer.flush()
    stamp = {(m.partition, m.offset): ts for ts, m in ((ts, f.get(timeout=30)) for ts, f in futures)}
    producer.close()
    config = validate(props)
    engine = MicroBatchEngine(config, spark)
    before = int(time.time() * 1000)
    summaries = [s for s in engine.run(max_records=150, until_caught_up=True) if s.batch_id is not None]
    after = int(time.time() * 1000)

    assert len(summaries) >= 2 and summaries[-1].lag_left == 0
    audit = committed_audit(engine.store, config.job_name, str(tmp_path / "audit"))
    assert len(audit) == 300
    for s in summaries:
        times = [stamp[(r["partition"], r["offset"])] for r in audit if r["batch_id"] == s.batch_id]
        assert s.committed_ms is not None and before <= s.committed_ms <= after
        assert (s.oldest_timestamp_ms, s.newest_timestamp_ms) == (min(times), max(times))
        assert s.freshness_ms == {"oldest": s.committed_ms - min(times), "newest": s.committed_ms - max(times)}
        assert before - max(times) <= s.freshness_ms["newest"] <= s.freshness_ms["oldest"] <= after - base
    stored = {m["batch_id"]: m["freshness_ms"] for m in engine.store.metrics(config.job_name)}
    assert stored == {s.batch_id: s.freshness_ms for s in summaries}
    assert engine.store.freshness(config.job_name, since_ms=before - 1000) == [
        (s.freshness_ms["oldest"], s.freshness_ms["newest"]) for s in summaries
    ]


def test_after_a_merge_the_records_behind_are_the_records_the_batches_then_process(spark, kafka_bootstrap, job):
    """Tasks stopped early (the fail policy) leave their siblings ahead; the merge to factor 1 starts at the slowest
    and watermarks the rest. The lag probe's records behind, before any batch, equal the records the batches then
    process, as the audit counts them; SEP-32's figure (end minus the slowest task) counts the skipped ones too."""
    from elasticity.batch.coordinator.lag import lag_report
    from elasticity.spark.engine import BatchFailed

    topic, props, tmp_path = job
    feed(kafka_bootstrap, topic, 60, seed=6)
    config = validate(props | {"app.class": "tests.support.apps:broken", "task.dead.letter.policy": "fail"})
    engine = MicroBatchEngine(config, spark)
    with pytest.raises(BatchFailed):
        engine.run()
    JobCoordinator(config, engine.store, engine.inputs).rescale(1)
    report = lag_report(config, engine.store, KafkaInputs(config))
    assert report.exact and report.apart and report.done_ahead > 0
    assert report.total < sum(report.per_ssp.values())

    config = validate(props | {"app.class": "elasticity.apps.identity:build"})
    summaries = [s for s in MicroBatchEngine(config, spark).run(until_caught_up=True) if s.batch_id is not None]
    assert summaries[-1].lag_left == 0 and summaries[-1].lag_left_exact
    after_merge = {s.batch_id for s in summaries}
    audited = [r for r in committed_audit(engine.store, config.job_name, str(tmp_path / "audit")) if r["batch_id"] in after_merge]
    assert report.total == len(audited) == sum(s.kept for s in summaries)
    assert lag_report(config, engine.store, KafkaInputs(config)).total == 0
