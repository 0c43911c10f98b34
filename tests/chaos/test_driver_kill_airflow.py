"""The driver (the cluster's Spark Connect server) SIGKILLed in the middle of a scheduled micro-batch run of
Airflow on the local cluster, with the supervisor `elasticity cluster start` runs: the run's attempt fails fast
naming the server, the supervisor starts the server again on its address (spark_default stays valid), and the
next attempt or scheduled run commits within 2 minutes of the kill, with no command run. Afterwards every
order is in the sink once, in per-key order (the data-quality run over every batch passes)."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import parse_properties
from elasticity.kafka.producer import send
from elasticity.local.daemon import free_port
from elasticity.local.standalone import AirflowStandalone, connections
from elasticity.local.supervisor import SupervisorStatus, status_file, supervise
from tests.integration.test_cluster import CLUSTER_JOB, cluster  # noqa: F401 (a fixture)
from tests.support.airflow_runs import finished, wait_for
from tests.support.helpers import fresh_topic, write_properties

pytestmark = pytest.mark.chaos

HEAL_TARGET_S = 120
FIRST, MORE = 3000, 6000


def test_the_driver_killed_mid_run_through_airflow_heals_without_a_person(cluster, kafka_bootstrap, tmp_path, capsys):  # noqa: F811
    local, _ = cluster
    supervise(local, workers=2, cores=1, memory="1g")
    state = local.status()
    assert state is not None and state.connect
    topic = fresh_topic(kafka_bootstrap, "drv", 2, records=FIRST, keys=50, seed=61)
    name = f"drv{uuid.uuid4().hex[:6]}"
    props = parse_properties(CLUSTER_JOB.read_text()) | {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "batch.max.records": "300",
        "airflow.microbatch.trigger": "schedule",  # a scheduled run, and the next one after the kill
    }
    props |= {k: v for k, v in state.job_settings(name).items() if k != "spark.remote"}  # spark_default says where
    props["job.report.path"] = str(tmp_path / "reports")
    (tmp_path / "jobs").mkdir()
    write_properties(tmp_path / "jobs" / f"{name}.properties", props)
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    home = tmp_path / "home"
    airflow = AirflowStandalone(
        tmp_path / "airflow",
        free_port(),
        {
            **connections(kafka_bootstrap, state.connect, store_url),
            **state.env(),
            "ELASTICITY_HOME": str(home),
            "ELASTICITY_JOBS_DIR": str(tmp_path / "jobs"),
            "KAFKA_BOOTSTRAP_SERVERS": None,
            "ELASTICITY_CHECKPOINT_STORE_URL": None,
        },
    ).start()
    try:
        airflow.wait_ready()
        api, store = airflow.api(), CheckpointStore(store_url)
        batches = f"elastic_microbatch__{name}"
        assert api.wait_dag(batches)["is_paused"] is False
        wait_for(lambda: [r for r in finished(api, batches) if r["state"] == "success"], 300, "no run succeeded", airflow)
        committed = len(store.metrics(name, limit=1000))
        send(kafka_bootstrap, topic, demo_records(MORE, keys=50, seed=62))
        # a run is under way on the new orders: one of its batches has committed
        wait_for(lambda: len(store.metrics(name, limit=1000)) > committed, 180, "no batch of the new orders", airflow)
        server = local.connect.status()
        assert server is not None
        os.killpg(server.pid, signal.SIGKILL)
        killed_ms = int(time.time() * 1000)
        after = wait_for(
            lambda: [m for m in store.metrics(name, limit=1000) if (m.get("finished_ms") or 0) > killed_ms + 1000],
            HEAL_TARGET_S + 60,
            "no batch committed after the driver was killed",
            airflow,
        )
        heal_s = (min(m["finished_ms"] for m in after) - killed_ms) / 1000
        restarted = local.connect.status()
        assert restarted is not None and restarted.port == server.port  # on its address: spark_default still valid
        failure = {"error": latest_failure(store, name)}  # recorded in the store by the worker that ran the attempt
        assert failure["error"].startswith(f"Spark Connect server {state.connect} unreachable"), failure
        with capsys.disabled():
            restarts = SupervisorStatus.read(status_file(local))
            print(
                f"\n[chaos] driver SIGKILLed mid-run through Airflow: next commit {heal_s:.1f} s after the kill "
                f"(the killed attempt failed with: {failure['error'][:120]}...; supervisor {restarts.line() if restarts else '?'})"
            )
        assert heal_s <= HEAL_TARGET_S
        # caught up: every order once, in per-key order, over every batch
        wait_for(
            lambda: sum(m["processed"] for m in store.metrics(name, limit=1000)) >= FIRST + MORE,
            600,
            "the orders not all processed",
            airflow,
        )
        api.wait_idle(batches, 600)
        last = max(m["batch_id"] for m in store.metrics(name, limit=1000))
        dq = api.trigger(f"elastic_data_quality__{name}", {"from_batch": 1, "to_batch": last})
        assert api.wait_run(f"elastic_data_quality__{name}", dq, 300)["state"] == "success", airflow.tail(60)
        (report,) = [
            d for p in (tmp_path / "reports").glob("runs/*/summary.json") if (d := json.loads(p.read_text()))["run"] == dq
        ]
        rows = {c["name"]: c["rows"] for c in report["checks"]}
        assert report["success"] and rows["no_loss"] == rows["sink_unique"] == FIRST + MORE, report
    finally:
        airflow.stop()
        local.supervisor.stop()


def latest_failure(store, job: str) -> str:
    """The job's latest failed task attempt, in one line, as the job page reads it (from the store)."""
    from sqlalchemy import select

    from elasticity.checkpoint.store.store_schema import attempt_failures

    t = attempt_failures.c
    with store.engine.connect() as conn:
        return conn.execute(select(t.error).where(t.job_name == job).order_by(t.created_ms.desc()).limit(1)).scalar_one()
