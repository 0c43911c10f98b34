"""SEP-32's metrics leave the job as StatsD lines: a real batch on Spark and a real
rescale, read from the embedded broker, received on a real loopback UDP socket; and
Airflow's own [metrics] section (airflow.cfg) turning the export on."""

import json
import subprocess
import sys
import uuid

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.config import validate
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.metrics.reporters import StatsdTarget, statsd_targets
from elasticity.spark.engine import MicroBatchEngine
from tests.conftest import REPO
from tests.support.statsd import StatsdListener


def test_a_batch_and_a_rescale_reach_a_statsd_socket_as_the_store_has_them(spark, kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"met-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    send(kafka_bootstrap, topic, demo_records(400, keys=20, seed=5))
    listener = StatsdListener()
    job = f"metrics-{topic}"
    config = validate(
        {
            "job.name": job,
            "task.inputs": f"kafka.{topic}",
            "job.elasticity.factor": "2",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            "app.class": "elasticity.apps.enrichment:build",
            "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
            "job.output.path": str(tmp_path / "out"),
            "job.audit.path": str(tmp_path / "audit"),
            "job.dead.letter.path": str(tmp_path / "dlq"),
            "metrics.reporters": "statsd",
            "metrics.reporter.statsd.host": "127.0.0.1",
            "metrics.reporter.statsd.port": str(listener.port),
            "metrics.reporter.statsd.prefix": "test.elasticity",
        }
    )
    try:
        engine = MicroBatchEngine(config, spark)
        (batch,) = engine.run(max_records=200)
        JobCoordinator(config, engine.store, engine.inputs).rescale(4)
        lines = listener.until(lambda ls: sum(".rescales:" in line for line in ls) == 2)
    finally:
        listener.close()

    p = f"test.elasticity.{job}"
    stored = engine.store.metrics(job)[-1]["metrics"]
    n = batch.records_read
    assert 0 < n <= 200 and stored["keyhash-compute-ns"] > 0  # the cap is shared over the partitions in proportion to lag
    for name in ("keyhash-compute-ns", "process-ns-per-message", "total-input-consumption-ns", "commit-ns"):
        assert listener.values(f"{p}.{name}") == [f"{stored[name]}|g"], name
    assert listener.values(f"{p}.records-read") == [f"{n}|c"]
    fresh = engine.store.metrics(job)[-1]["freshness_ms"]  # records sent just now: timestamped by the producer
    assert fresh == batch.freshness_ms and 0 <= fresh["newest"] <= fresh["oldest"]
    assert listener.values(f"{p}.batch-freshness-oldest-ms") == [f"{fresh['oldest']}|g"]
    assert listener.values(f"{p}.batch-freshness-newest-ms") == [f"{fresh['newest']}|g"]
    assert listener.values(f"{p}.task-count") == ["4|g", "4|g", "8|g"]  # first generation, the batch, the rescale
    tasks = stored["process-ns"]
    assert len(tasks) == 4 and sum(stored["records"].values()) == n
    for task, ns in tasks.items():
        assert listener.values(f"{p}.task.{task}.process-ns") == [f"{ns}|g"]
        assert listener.values(f"{p}.task.{task}.process-ns-per-message") == [f"{round(ns / stored['records'][task])}|g"]
    rescales = engine.store.rescale_metrics(job)
    assert [(r["old-factor"], r["factor"]) for r in rescales] == [(None, 2), (2, 4)]
    assert listener.values(f"{p}.job-model-generation-ns") == [f"{r['job-model-generation-ns']}|g" for r in rescales]
    assert listener.values(f"{p}.checkpoint-compute-ns") == [f"{r['checkpoint-compute-ns']}|g" for r in rescales]
    assert "job-model-generation-ns" not in stored and "checkpoint-compute-ns" not in stored  # a rescale's, not a batch's
    print(
        f"\nmeasured: keyhash-compute-ns={stored['keyhash-compute-ns']} process-ns-per-message={stored['process-ns-per-message']} "
        f"rescale 2->4: job-model-generation-ns={rescales[1]['job-model-generation-ns']} "
        f"checkpoint-compute-ns={rescales[1]['checkpoint-compute-ns']}; {len(lines)} StatsD lines"
    )


def test_airflows_metrics_section_in_airflow_cfg_turns_the_export_on(tmp_path):
    """The hook exports Airflow's effective [metrics] StatsD options; the core reads them as Airflow's env overrides."""
    (tmp_path / "airflow.cfg").write_text(
        "[metrics]\nstatsd_on = True\nstatsd_host = 127.0.0.1\nstatsd_port = 9125\nstatsd_prefix = prod\n"
    )
    code = "import json; from elasticity.airflow.hooks import metrics_env; print(json.dumps(metrics_env()))"
    env = {"AIRFLOW_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO / 'include'}:{REPO}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=True)
    exported = json.loads(out.stdout.strip().splitlines()[-1])
    assert exported == {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": "9125",
        "AIRFLOW__METRICS__STATSD_PREFIX": "prod",
    }
    config = validate({"job.name": "j", "task.inputs": "kafka.orders"})
    assert statsd_targets(config, exported) == (StatsdTarget("airflow", "127.0.0.1", 9125, "prod.elasticity"),)


def test_rescale_metrics_are_kept_per_generation_on_both_stores(store_url, job_name):
    """The rescale table on SQLite and PostgreSQL: one row per generation, a re-record replaces it, oldest first."""
    from elasticity.checkpoint.store import CheckpointStore

    store = CheckpointStore(store_url)
    try:
        store.record_rescale_metrics(job_name, 1, json.dumps({"generation": 1, "checkpoint-compute-ns": 5}))
        store.record_rescale_metrics(job_name, 2, json.dumps({"generation": 2, "checkpoint-compute-ns": 7}))
        store.record_rescale_metrics(job_name, 2, json.dumps({"generation": 2, "checkpoint-compute-ns": 9}))
        assert store.rescale_metrics(job_name) == [
            {"generation": 1, "checkpoint-compute-ns": 5},
            {"generation": 2, "checkpoint-compute-ns": 9},
        ]
        assert store.rescale_metrics(job_name, limit=1) == [{"generation": 2, "checkpoint-compute-ns": 9}]
        assert store.rescale_metrics("another-job") == []
    finally:
        store.close()


def test_batch_freshness_is_kept_beside_the_summary_on_both_stores(store_url, job_name):
    """The columns the job page's percentiles read, on SQLite and PostgreSQL: a re-record replaces them, a batch
    without timestamped records has none, and `since_ms` leaves out what was recorded before it."""
    from elasticity.checkpoint.store import CheckpointStore

    clock = [1_000]
    store = CheckpointStore(store_url, clock=lambda: clock[0])
    try:
        store.record_metrics(job_name, 1, 1, json.dumps({"batch_id": 1}), freshness={"oldest": 90, "newest": 80})
        clock[0] = 2_000
        store.record_metrics(job_name, 2, 1, json.dumps({"batch_id": 2}), freshness={"oldest": 70, "newest": 60})
        store.record_metrics(job_name, 2, 1, json.dumps({"batch_id": 2}), freshness={"oldest": 50, "newest": 40})
        store.record_metrics(job_name, 3, 1, json.dumps({"batch_id": 3}))
        assert store.freshness(job_name, since_ms=0) == [(90, 80), (50, 40)]
        assert store.freshness(job_name, since_ms=1_500) == [(50, 40)]
        assert [m["batch_id"] for m in store.metrics(job_name)] == [1, 2, 3]
    finally:
        store.close()
