"""The product on a Spark standalone cluster of two workers on this machine (`elasticity cluster start`): each
worker its own host (work dir, ELASTICITY_HOME), the S3-protocol server as the storage they share, the Spark
Connect server attached to the master as the driver. A stateful job runs there through a rescale and an
executor SIGKILLed mid-batch, checked key by key; its slots stay on their executors; a default path that
executors would write under one host's ELASTICITY_HOME is refused (the master down and back is in tests/chaos).
Windows and a stream-table join through a rescale 2 -> 3, checked pane by pane; data quality over that job's
outputs on S3; Airflow's scheduler driving the cluster job config, a rescale and data quality through its REST
API, and the job page; sinks on S3 moved aside by --reset-sinks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
import requests

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, OUTPUT_SCHEMA, output_roots, read_table, write_batch_file
from elasticity.batch.sinks.sink_identity import IdentityMismatch, guard_sinks
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.store.attempt_token import AttemptToken
from elasticity.config import ConfigError, parse_properties, validate
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.local.cluster import LocalCluster
from elasticity.local.daemon import free_port
from elasticity.local.standalone import AirflowStandalone, connections
from elasticity.local.supervisor import SupervisorStatus, status_file, supervise
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import MicroBatchEngine
from elasticity.spark.session import session
from elasticity.state.backends.blob_manager import BlobNotFound, UploadFailed
from tests.conftest import REPO
from tests.integration import test_shipping as shipping
from tests.integration import test_windows_rescale as windows
from tests.integration.test_engine import feed
from tests.integration.test_shipping import forget_app_modules  # noqa: F401 (a fixture)
from tests.integration.test_stateful_engine import assert_state_and_outputs, job, state_check_passes  # noqa: F401 (job: a fixture)
from tests.support.airflow_runs import finished, wait_for
from tests.support.helpers import fresh_topic, job_props, write_properties
from tests.support.memory import MemoryInputs

CLUSTER_JOB = REPO / "include" / "jobs" / "cluster" / "demo.properties"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    local = LocalCluster(tmp_path_factory.mktemp("cluster-home"))
    with pytest.MonkeyPatch.context() as mp:
        # executors inherit their worker's environment: the test apps (tests/support/apps.py) on their path,
        # as a user's workers have the user's app on theirs
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        try:
            state = local.start(workers=2, cores=1, memory="1g", warm_up=[])  # as `elasticity cluster start` does
            warm = local.connect.warm_up_status()  # done before start returned: no job meets it on the executors
            assert warm is not None and warm.state == "warm", warm
            yield local, state
        finally:
            local.stop()


@pytest.fixture
def on_cluster(cluster, job, monkeypatch):  # noqa: F811 (the stateful job fixture, imported)
    """The stateful job of test_stateful_engine with every executor-written path on the shared S3 storage,
    its stores on each executor's own disk (no job.state.dir), run through the cluster's Connect server."""
    local, _ = cluster
    state = local.status()  # now: a fault test may have started the Connect server again, on another port
    assert state is not None
    topic, props, tmp_path = job
    for k, v in state.env().items():
        monkeypatch.setenv(k, v)  # the driver side reads the blob store and the sinks too
    props.pop("job.state.dir")
    props.update(state.job_settings(f"{props['job.name']}-{uuid.uuid4().hex[:6]}"))
    return local, state, topic, props


def executors(cluster_root: Path) -> list[int]:
    """Our cluster's executor JVMs (their working directory is under a worker's work dir)."""
    pids = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True).stdout.split()
    ours = []
    for pid in pids:
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(cluster_root):
                ours.append(int(pid))
        except OSError:
            continue
    return ours


def test_a_stateful_job_on_two_workers_through_a_rescale_and_an_executor_kill(on_cluster, kafka_bootstrap):
    local, state, topic, props = on_cluster
    config = validate(props)
    engine = MicroBatchEngine(config, session(config))
    feed(kafka_bootstrap, topic, 300, seed=31)
    first = engine.run(max_records=60, until_caught_up=True)
    assert len(first) >= 4 and first[-1].lag_left == 0
    homes = {f"{h}" for h in state.workers}
    used = [{e.split(":", 1)[1] for e in s.metrics["executors"]} for s in first]
    assert used[-1] == homes, used  # both workers ran slots: each its own host
    assert [s.metrics["state-restores"]["count"] for s in first[1:]] == [0] * (len(first) - 1)  # the slots stayed
    state_check_passes(config, engine.store, engine.inputs)

    JobCoordinator(config, engine.store, engine.inputs).rescale(4)
    feed(kafka_bootstrap, topic, 200, seed=32)
    engine.run(max_records=80, until_caught_up=True)
    assert_state_and_outputs(config, engine.store)

    feed(kafka_bootstrap, topic, 300, seed=33)
    victims = executors(local.root)
    assert len(victims) == 2

    def kill_one() -> None:
        time.sleep(1.0)  # mid-batch: lookups of 20 ms per record keep a batch running for seconds
        os.kill(victims[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one)
    killer.start()
    failed = False
    try:
        after = engine.run(max_records=150, until_caught_up=True)
    except (BlobNotFound, UploadFailed):  # the executor took a snapshot's upload with it (UploadStalled): not committed
        after, failed = [], True  # the moved slot's restores may have been in the batch cancelled behind it
    killer.join()
    after += engine.run(max_records=150, until_caught_up=True)  # the next run replays it, as the next scheduled run does
    assert after[-1].lag_left == 0
    # the killed executor's slot ran in a new process: its stores came from S3 (the slot moved to the other worker)
    # or from the local checkpoint on its own worker (a new executor there), never from an open store
    sources = {
        st.get("restored-from") for s in after for stores in s.metrics.get("stores", {}).values() for st in stores.values()
    }
    assert sources - {"open", None} or failed, sources
    assert_state_and_outputs(config, engine.store)  # every order once, in order, every user's totals exact
    state_check_passes(config, engine.store, engine.inputs)


def test_a_default_path_under_one_hosts_home_is_refused_on_the_cluster(on_cluster, kafka_bootstrap):
    _, _, topic, props = on_cluster
    props.pop("job.audit.path")
    config = validate(props)
    feed(kafka_bootstrap, topic, 10, seed=34)
    with pytest.raises(ConfigError, match=r"job.audit.path is unset: on the cluster spark://127.0.0.1:\d+ executors write it"):
        MicroBatchEngine(config, session(config)).run()


@pytest.fixture(scope="module")
def sessions_on_cluster(cluster, kafka_bootstrap, tmp_path_factory):
    """The windows and stream-table join app of test_windows_rescale on the cluster, its paths on the shared
    storage: batches at factor 2, a rescale to 3 with lag left (a factor that is not a multiple: every
    window store is split and merged into new snapshots on S3), a profile update, batches at 3."""
    local, _ = cluster
    state = local.status()
    assert state is not None
    tmp_path = tmp_path_factory.mktemp("sessions-on-cluster")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in state.env().items():
            mp.setenv(k, v)
        clicks_topic = f"wc-{uuid.uuid4().hex[:8]}"
        users_topic = f"{clicks_topic}-users"
        props = windows.job_props(kafka_bootstrap, mp, clicks_topic, tmp_path) | {"app.class": windows.APP}
        for key in ("job.state.dir", "spark.master"):
            props.pop(key)
        props.update(state.job_settings(f"{props['job.name']}-{uuid.uuid4().hex[:6]}"))
        props["job.report.path"] = str(tmp_path / "reports")
        config = validate(props)
        engine = MicroBatchEngine(config, session(config))

        windows.profiles(kafka_bootstrap, users_topic, 1)
        t = windows.clicks(kafka_bootstrap, clicks_topic, 200, 1_700_000_000_000, seed=41)
        at2 = engine.run(max_records=100, until_caught_up=True)
        t = windows.clicks(kafka_bootstrap, clicks_topic, 100, t, seed=42)
        at2 += engine.run(max_records=50)
        assert at2[-1].lag_left > 0  # the rescale comes with lag left
        plan = JobCoordinator(config, engine.store, engine.inputs).rescale(3)
        windows.profiles(kafka_bootstrap, users_topic, 2)  # the batches at 3 see the update
        windows.clicks(kafka_bootstrap, clicks_topic, 120, t, seed=43)
        at3 = engine.run(max_records=100, until_caught_up=True)
        assert at3[-1].lag_left == 0
        yield SimpleNamespace(
            config=config,
            store=engine.store,
            inputs=engine.inputs,
            plan=plan,
            batches=at2 + at3,
            at3=at3,
            topics=(clicks_topic, users_topic),
            state=state,
            tmp_path=tmp_path,
        )


def test_windows_and_a_stream_table_join_through_a_rescale_2_to_3_on_the_cluster(sessions_on_cluster, kafka_bootstrap):
    run = sessions_on_cluster
    moved = {(tr.task.name, tr.store): tr.keys for tr in run.plan.state.transfers if tr.how == "moved"}
    assert len(moved) == 2 * 2 * 3 and sum(moved.values()) > 0, moved  # every new task of each window store, moved
    homes = set(run.state.workers)
    assert {e.split(":", 1)[1] for s in run.batches for e in s.metrics["executors"]} == homes  # both workers ran slots
    restores = [s.metrics["state-restores"]["count"] for s in run.batches]
    print(
        "batches:",
        [(s.factor, round(s.durations_ms["spark"]), s.metrics["state-restores"]["count"]) for s in run.batches],
        "state-move-ns:",
        run.plan.metrics["state-move-ns"],
    )
    # each slot restores its moved snapshots from S3 once, in the first batch at 3; then they stay on its executor
    assert restores[len(run.batches) - len(run.at3)] > 0 and restores[len(run.batches) - len(run.at3) + 1 :] == [0] * (
        len(run.at3) - 1
    )
    clicks_topic, users_topic = run.topics
    counts, tables = windows.assert_windows_and_join(run.config, run.store, clicks_topic, users_topic, kafka_bootstrap, factor=3)
    print("panes emitted, open:", counts)
    assert all(closed > 20 and still > 0 for closed, still in counts.values()), counts
    assert {t["u1"]["tier"] for t in tables.values()} == {"tier-1-v1", "tier-1-v2"}


def test_data_quality_over_the_cluster_jobs_outputs_on_s3_passes_and_catches_a_dropped_and_a_swapped_row(
    sessions_on_cluster,
):
    run = sessions_on_cluster
    config, store = run.config, run.store
    result, summary = run_quality(config, store, KafkaInputs(config), incremental=True, run_name="cluster")
    assert result.success, result.failure_message()
    rows = {c.name: c.rows for c in result.checks}
    assert set(rows) == {"no_loss", "no_declared_loss", "key_order", "routing", "audit_unique", "sink_unique"}, rows
    assert all(rows[c] for c in rows if c != "no_declared_loss"), rows
    processed = len(read_table(config.get("job.audit.path"), AUDIT_SCHEMA))
    assert rows["no_loss"] == processed  # every click the checkpoints passed, read back from S3
    outputs = ("clicks-per-minute", "joined", "sessions")
    written = sum(len(read_table(f"{config.get('job.output.path')}/{o}", OUTPUT_SCHEMA)) for o in outputs)
    assert rows["sink_unique"] == written  # every output folder on S3, listed and read
    assert "PASSED" in summary.read_text()

    audit = sorted(
        read_table(config.get("job.audit.path"), AUDIT_SCHEMA).to_pylist(),
        key=lambda r: (r["batch_id"], r["task_name"], r["seq"]),
    )
    victim = audit[10]
    by_key: dict[tuple, list[int]] = {}
    for i, r in enumerate(audit):
        by_key.setdefault((r["key"], r["task_name"], r["batch_id"]), []).append(i)
    i, j = next(ix for ix in by_key.values() if len(ix) >= 2)[:2]
    swapped = [dict(r) for r in audit]
    swapped[i]["seq"], swapped[j]["seq"] = swapped[j]["seq"], swapped[i]["seq"]
    for name, rows_, failing, named in (
        ("drop", audit[:10] + audit[11:], "no_loss", f"{victim['stream']}-{victim['partition']}@{victim['offset']}"),
        ("swap", swapped, "key_order", f"key={audit[i]['key'].decode()}"),
    ):
        copy = f"{config.get('job.audit.path')}-{name}"  # beside the audit, on the shared storage
        for b in sorted({r["batch_id"] for r in rows_}):
            part = pa.Table.from_pylist([r for r in rows_ if r["batch_id"] == b], schema=AUDIT_SCHEMA)
            write_batch_file(copy, b, "corrupted", part)
        bad, _ = run_quality(
            config.with_overrides({"job.audit.path": copy}), store, KafkaInputs(config), report_dir=run.tmp_path / name
        )
        assert {c.name for c in bad.checks if not c.success} == {failing}, bad.failure_message()
        assert named in bad.failure_message()


def test_airflows_scheduler_drives_the_cluster_job_a_rescale_and_data_quality_and_the_job_page_shows_it(
    cluster, kafka_bootstrap, tmp_path
):
    """`elasticity airflow --spark-remote <the cluster's Connect URL>` with the cluster's job config (compose's
    include/jobs/cluster/demo.properties, on a topic and S3 paths of its own): the micro-batch run its lag watcher starts,
    a rescale 2 -> 3 through the REST API as the trigger form sends it, the data-quality runs after both,
    and the job page's batches with the cluster's executors and the moved stores restored once."""
    local, _ = cluster
    state = local.status()
    assert state is not None and state.connect
    topic = fresh_topic(kafka_bootstrap, "acl", 2, records=400, keys=20, seed=51)
    name = f"acl{uuid.uuid4().hex[:6]}"
    props = parse_properties(CLUSTER_JOB.read_text()) | {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "batch.max.records": "300",  # airflow.microbatch.trigger: lag, compose's (and the default)
    }
    props |= {k: v for k, v in state.job_settings(name).items() if k != "spark.remote"}  # spark_default says where
    props["job.report.path"] = str(tmp_path / "reports")
    (tmp_path / "jobs").mkdir()
    write_properties(tmp_path / "jobs" / f"{name}.properties", props)
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    airflow = AirflowStandalone(
        tmp_path / "airflow",
        free_port(),
        {
            **connections(kafka_bootstrap, state.connect, store_url),
            **state.env(),  # what `elasticity cluster start` prints for a client to export
            "ELASTICITY_JOBS_DIR": str(tmp_path / "jobs"),
            "KAFKA_BOOTSTRAP_SERVERS": None,
            "ELASTICITY_CHECKPOINT_STORE_URL": None,  # the connections must be enough
        },
    ).start()
    try:
        airflow.wait_ready()
        api, store = airflow.api(), CheckpointStore(store_url)
        batches = f"elastic_microbatch__{name}"
        assert api.wait_dag(batches)["is_paused"] is False
        run = wait_for(lambda: finished(api, batches), 240, "no lag-triggered micro-batch run finished", airflow)[-1]
        assert run["run_type"] == "asset_triggered" and run["state"] == "success", airflow.tail(60)  # the lag watcher's
        mine = [m for m in store.metrics(name) if AttemptToken.parse(m["owner"]).run == run["dag_run_id"]]
        assert [m["batch_id"] for m in mine] == [1, 2] and sum(m["processed"] for m in mine) == 400
        homes = set(state.workers)
        assert {e.split(":", 1)[1] for m in mine for e in m["metrics"]["executors"]} == homes  # both workers ran slots
        dq = wait_for(
            lambda: finished(api, f"elastic_data_quality__{name}"), 180, "no data-quality run after the batches", airflow
        )
        assert dq[-1]["state"] == "success" and dq[-1]["run_type"] == "asset_triggered"

        rescale = api.trigger("elastic_rescale", {"job": name, "factor": 3, "dry_run": False})
        assert api.wait_run("elastic_rescale", rescale, 240)["state"] == "success", airflow.tail(60)
        assert (store.generation(name).factor, store.generation(name).origin) == (3, "manual")
        send(kafka_bootstrap, topic, demo_records(120, keys=20, seed=52))
        # the batches at 3 now, as Airflow's trigger button asks, not when the lag watcher's cool-down lets it fire
        # again: a run it starts meanwhile waits its turn (max_active_runs=1)
        api.trigger(batches)
        at3 = wait_for(lambda: [m for m in store.metrics(name) if m["factor"] == 3], 180, "no batch committed at 3", airflow)
        assert at3[0]["metrics"]["state-restores"]["count"] > 0  # the moved stores, restored from S3 once
        after = lambda r: (r.get("conf") or {}).get("reason") == "after rescale"  # noqa: E731
        dq = wait_for(
            lambda: finished(api, f"elastic_data_quality__{name}", after), 180, "no data-quality run after the rescale", airflow
        )
        assert dq[-1]["state"] == "success"
        # a data-quality run over every batch, triggered as its form does: every check read rows from S3
        last = at3[-1]["batch_id"]
        manual = api.trigger(f"elastic_data_quality__{name}", {"from_batch": 1, "to_batch": last})
        assert api.wait_run(f"elastic_data_quality__{name}", manual, 240)["state"] == "success", airflow.tail(60)
        (report,) = [
            d for p in (tmp_path / "reports").glob("runs/*/summary.json") if (d := json.loads(p.read_text()))["run"] == manual
        ]
        rows = {c["name"]: c["rows"] for c in report["checks"]}
        assert report["success"] and report["batches"] == list(range(1, last + 1)), report
        assert all(rows[c] for c in rows if c != "no_declared_loss") and rows["no_declared_loss"] == 0, report
        assert rows["no_loss"] == rows["sink_unique"] == 520  # 400 + 120 orders, each once in the audit and the sink

        page = requests.get(
            f"{airflow.base}/elasticity/api/jobs/{name}", headers={"Authorization": f"Bearer {api.token}"}, timeout=60
        )
        view = page.json()
        assert (view["generation"], view["factor"], view["lag_error"]) == (2, 3, None)
        shown = {b["batch_id"]: b["metrics"] for b in view["batches"]}
        assert {e.split(":", 1)[1] for e in shown[1]["executors"]} == homes
        assert shown[at3[0]["batch_id"]]["state-restores"] == at3[0]["metrics"]["state-restores"]
        html = requests.get(
            f"{airflow.base}/elasticity/jobs/{name}", headers={"Authorization": f"Bearer {api.token}"}, timeout=60
        )
        assert html.status_code == 200 and "store restores" in html.text and all(h in html.text for h in homes)
        print(
            "batches:",
            [
                (
                    m["batch_id"],
                    m["factor"],
                    m["processed"],
                    round(m["durations_ms"]["total"]),
                    m["metrics"]["state-restores"]["count"],
                )
                for m in store.metrics(name)
            ],
        )
    finally:
        airflow.stop()


@pytest.mark.usefixtures("forget_app_modules")
def test_an_app_only_on_the_drivers_path_runs_on_both_workers(cluster, kafka_bootstrap, tmp_path, monkeypatch):
    """The workers' PYTHONPATH has this checkout, not tmp_path: the app (and its wheel, spark.submit.pyFiles)
    reach the executors as the driver's artifacts, and a changed app is the next run's code."""
    state = cluster[0].status()
    assert state is not None
    for k, v in state.env().items():
        monkeypatch.setenv(k, v)
    module = f"orders_app_{uuid.uuid4().hex[:8]}"
    shipping.write_app(tmp_path / "code", 1, module)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    topic = fresh_topic(kafka_bootstrap, "ship-cluster", 2, records=60)
    props = shipping.shipped_job(tmp_path, kafka_bootstrap, topic, module, **{"job.container.count": "2"})
    config = validate(props | state.job_settings(f"ship-{uuid.uuid4().hex[:6]}"))
    first = MicroBatchEngine(config, session(config)).run()
    assert first[-1].processed == 60 and first[-1].dead_lettered == 0
    assert {e.split(":", 1)[1] for e in first[-1].metrics["executors"]} == set(state.workers)  # both hosts
    shipping.write_app(tmp_path / "code", 2, module)
    send(kafka_bootstrap, topic, [(b"k", b"{}")] * 10)
    second = MicroBatchEngine(config, session(config)).run()
    assert shipping.outputs(config) == {first[-1].batch_id: {(1, "tag-")}, second[-1].batch_id: {(2, "tag-")}}


def test_reset_sinks_moves_old_outputs_on_the_shared_storage_aside(cluster, tmp_path, monkeypatch):
    """`run-batch --reset-sinks` under a new checkpoint store, the sinks on S3 (which renames no folder)."""
    state = cluster[0].status()
    assert state is not None
    for k, v in state.env().items():
        monkeypatch.setenv(k, v)
    inputs = MemoryInputs()
    inputs.create(SystemStream("kafka", "orders"), 2)
    props = job_props("j", "orders", tmp_path) | state.job_settings(f"reset-{uuid.uuid4().hex[:6]}")

    def start(store_file: str, reset: bool = False):
        config = validate({**props, "task.checkpoint.store.url": f"sqlite:///{tmp_path / store_file}"})
        store = CheckpointStore(config.checkpoint_store_url())
        return guard_sinks(config, store, JobCoordinator(config, store, inputs).initialize, reset=reset), config

    _, config = start("a.db")
    old = pa.Table.from_pylist([{"key": b"k", "value": b"{}", "batch_id": 1}], schema=OUTPUT_SCHEMA)
    write_batch_file(f"{config.get('job.output.path')}/orders", 1, "Partition 0", old)
    with pytest.raises(IdentityMismatch, match="--reset-sinks"):
        start("b.db")
    moved, config = start("b.db", reset=True)
    assert sorted(m.rsplit("/", 1)[1].split(".reset-")[0] for m in moved) == ["audit", "dead-letter", "output"]
    aside = next(m for m in moved if m.rsplit("/", 1)[1].startswith("output."))
    assert read_table(f"{aside}/orders", OUTPUT_SCHEMA).column("key").to_pylist() == [b"k"]
    assert output_roots(config.get("job.output.path")) == []  # the new store's outputs start empty
    assert start("b.db")[0] == []  # and the new store owns them


def test_a_restarted_master_connect_server_and_s3_server_come_back_on_their_addresses(cluster, tmp_path):
    """Each service SIGKILLed (and, after `cluster stop`, stopped): started again, it listens where it did, so
    spark_default and every client's S3 endpoint stay valid; a session through the old URL works."""
    local, _ = cluster
    before = local.status()
    assert before is not None and before.connect and before.s3_endpoint
    for daemon in (local.master, local.connect.daemon, local.s3):
        running = daemon.status()
        assert running is not None
        os.killpg(running.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while daemon.status() is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert daemon.status() is None, daemon.name
    after = local.start(workers=2)
    assert (after.master, after.connect, after.s3_endpoint) == (before.master, before.connect, before.s3_endpoint)
    config = validate(job_props("addr", "orders", tmp_path, **{"spark.remote": before.connect}))
    assert session(config).range(5).count() == 5
    local.stop()
    assert not local.recovery_dir.exists()  # nothing to recover: the next driver gets its executors at once
    again = local.start(workers=2)
    assert (again.master, again.connect, again.s3_endpoint) == (before.master, before.connect, before.s3_endpoint)


def test_the_supervisor_starts_a_dead_driver_and_worker_again_on_their_addresses(cluster):
    """What `elasticity cluster start` runs beside the cluster: the Connect server (the driver) and a worker
    SIGKILLed come back without a person, on the addresses they had; `cluster status` shows the restarts."""
    local, _ = cluster
    before = local.status()
    assert before is not None
    supervise(local, workers=2, cores=1, memory="1g")
    try:
        killed = [local.connect.daemon, local.worker(1)]
        for daemon in killed:
            running = daemon.status()
            assert running is not None
            os.killpg(running.pid, signal.SIGKILL)
        struck = time.monotonic()
        # a SIGKILLed JVM's threads hold its port a while, and its restart is a JVM's start: on the suite's most
        # loaded minutes (the Celery topology and the DAG tests beside the cluster) the Connect server took over 180 s
        deadline = struck + 300

        def healed() -> bool:
            # right after SIGKILL a daemon can still look alive (its port not yet closed): it counts as
            # healed once the supervisor has restarted it and it listens again
            restarts = SupervisorStatus.read(status_file(local))
            return (
                restarts is not None
                and all(restarts.services.get(s) and restarts.services[s].restarts >= 1 for s in ("spark-connect", "worker-1"))
                and all(d.status() is not None for d in killed)
            )

        while time.monotonic() < deadline and not healed():
            time.sleep(0.5)
        assert healed(), local.supervisor.log_file.read_text()[-2000:]
        print(f"\n[supervisor] the driver and a worker SIGKILLed: both listening again in {time.monotonic() - struck:.1f} s")
        after = local.status()
        assert after is not None and after.connect == before.connect and after.master == before.master
        env = {**os.environ, "ELASTICITY_HOME": str(local.root.parent), "PYTHONPATH": str(REPO / "include")}
        shown = subprocess.run(
            [sys.executable, "-m", "elasticity", "cluster", "status"], env=env, capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("supervisor  pid ") and "spark-connect 1" in shown.stdout, shown.stdout
    finally:
        local.supervisor.stop()
