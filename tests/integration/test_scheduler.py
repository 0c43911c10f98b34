"""The path users take: Airflow's own scheduler, no dag.test().

`airflow standalone` (api-server, scheduler, dag-processor, triggerer) on a free
loopback port with its own AIRFLOW_HOME, the connections of the embedded default
(a real broker, a warm Spark Connect server, a SQLite store). The scheduler runs
one job's micro-batch DAG on its schedule (`airflow.microbatch.trigger=schedule`), another's when its lag
watcher in the triggerer sees records wait (`lag`, the default), and none while nothing waits; a rescale is triggered through the
REST API as the UI's trigger form does; the real TriggerDagRunOperator starts the
data-quality DAG; a schedule rule is held by the manual rescale, then applied; a load step on a job the
autosizer sizes makes its loop in the triggerer scale it up once.
A second job, the example copying orders to a Kafka topic exactly-once, commits
through the same scheduler and passes data quality with its Kafka checks.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from types import SimpleNamespace

import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.store.attempt_token import AttemptToken
from elasticity.config.properties import parse_properties
from elasticity.kafka.producer import send
from elasticity.kafka.transactions import read_committed
from elasticity.local.daemon import free_port
from elasticity.local.standalone import AirflowStandalone, connections
from elasticity.scaling.decision import AutosizeRecord
from tests.conftest import REPO
from tests.support.airflow_runs import finished, wait_for
from tests.support.helpers import fresh_topic, job_props, write_properties


@pytest.fixture(scope="module")
def world(kafka_bootstrap, spark_connect, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scheduler")
    topic = fresh_topic(kafka_bootstrap, "sched", 2, records=400, keys=20, seed=41)
    job = f"sched{uuid.uuid4().hex[:6]}"
    (tmp / "jobs").mkdir()
    store_url = f"sqlite:///{tmp / 'store.db'}"
    props = job_props(
        job,
        topic,
        tmp,
        factor=2,
        **{
            "batch.max.records": "300",
            "job.elasticity.manual.hold.ms": "3600000",
            "airflow.microbatch.trigger": "schedule",
            "airflow.microbatch.max.seconds": "600",  # both batches in one run, however long a loaded machine takes
        },
    )
    props.pop("task.checkpoint.store.url")  # the elasticity_store connection says where the store is
    config_file = write_properties(tmp / "jobs" / f"{job}.properties", props)
    copy_topic = fresh_topic(kafka_bootstrap, "sched-copy", 2, records=300, keys=20, seed=43)
    copy_job = f"copy{uuid.uuid4().hex[:6]}"
    example = parse_properties((REPO / "include/jobs/examples/orders-copy.properties").read_text())
    copy_props = example | job_props(copy_job, copy_topic, tmp / copy_job, factor=4, **{"batch.max.records": "200"})
    copy_props.pop("task.checkpoint.store.url")
    write_properties(tmp / "jobs" / f"{copy_job}.properties", copy_props)
    lag_topic = fresh_topic(kafka_bootstrap, "sched-lag", 2)
    lag_job = f"lag{uuid.uuid4().hex[:6]}"
    lag_props = job_props(lag_job, lag_topic, tmp / lag_job)  # airflow.microbatch.trigger: lag, the default
    lag_props.pop("task.checkpoint.store.url")
    write_properties(tmp / "jobs" / f"{lag_job}.properties", lag_props)
    auto_topic = fresh_topic(kafka_bootstrap, "sched-auto", 2)
    auto_job = f"auto{uuid.uuid4().hex[:6]}"
    auto_props = job_props(
        auto_job,
        auto_topic,
        tmp / auto_job,
        factor=1,
        **{
            "app.class": "elasticity.apps.enrichment:build",  # 20 ms per record: 50 records per busy second a task
            "batch.max.records": "300",
            "job.elasticity.autosize": "true",
            "job.elasticity.autosize.max": "2",  # one step up is all there is
            "job.elasticity.autosize.target.lag.seconds": "5",
            "job.elasticity.autosize.catch.up.seconds": "5",  # the backlog alone asks for the step
            "job.elasticity.autosize.scale.up.cooldown.ms": "0",
            "job.elasticity.autosize.poll.ms": "1000",
            "job.elasticity.autosize.confirm.ms": "2000",
        },
    )
    auto_props.pop("task.checkpoint.store.url")
    write_properties(tmp / "jobs" / f"{auto_job}.properties", auto_props)
    airflow = AirflowStandalone(
        tmp / "airflow",
        free_port(),
        {
            **connections(kafka_bootstrap, spark_connect, store_url),
            "ELASTICITY_JOBS_DIR": str(tmp / "jobs"),
            "KAFKA_BOOTSTRAP_SERVERS": None,
            "ELASTICITY_CHECKPOINT_STORE_URL": None,  # the connections must be enough
        },
    )
    airflow.start()
    try:
        airflow.wait_ready()
        yield SimpleNamespace(
            job=job,
            topic=topic,
            copy_job=copy_job,
            copy_topic=copy_topic,
            copy_reports=tmp / copy_job / "report",
            lag_job=lag_job,
            lag_topic=lag_topic,
            auto_job=auto_job,
            auto_topic=auto_topic,
            bootstrap=kafka_bootstrap,
            config_file=config_file,
            airflow=airflow,
            api=airflow.api(),
            store=CheckpointStore(store_url),
        )
    finally:
        airflow.stop()


def test_scheduler_runs_the_microbatches_on_its_schedule(world):
    job, airflow, api, store = world.job, world.airflow, world.api, world.store
    assert api.wait_dag(f"elastic_microbatch__{job}")["is_paused"] is False  # nobody had to unpause it
    runs = wait_for(lambda: finished(api, f"elastic_microbatch__{job}"), 240, "no scheduled micro-batch run finished", airflow)
    run = runs[-1]
    assert run["run_type"] == "scheduled" and run["state"] == "success", airflow.tail(60)
    (ti,) = api.task_instances(f"elastic_microbatch__{job}", run["dag_run_id"])
    mine = [m for m in store.metrics(job) if AttemptToken.parse(m["owner"]).run == run["dag_run_id"]]
    assert ti["state"] == "success" and [m["batch_id"] for m in mine] == [1, 2]  # 400 records, cap 300: two batches in one run
    assert mine[-1]["lag_left"] == 0 and sum(m["processed"] for m in mine) == 400
    print(f"scheduled run {run['dag_run_id']}: task {ti['duration']:.1f} s for {len(mine)} batches")
    # its Asset event started the data-quality DAG, which validated those batches
    dq = wait_for(lambda: finished(api, f"elastic_data_quality__{job}"), 180, "no data-quality run after the batches", airflow)
    assert dq[-1]["state"] == "success" and dq[-1]["run_type"] == "asset_triggered"


def test_a_rescale_from_the_trigger_form_applies_and_data_quality_follows(world):
    job, airflow, api, store = world.job, world.airflow, world.api, world.store
    run_id = api.trigger("elastic_rescale", {"job": job, "factor": 4, "dry_run": False})
    assert api.wait_run("elastic_rescale", run_id, 240)["state"] == "success", airflow.tail(60)
    generation = store.generation(job)
    assert (generation.factor, generation.origin) == (4, "manual") and run_id in generation.reason
    after = lambda r: (r.get("conf") or {}).get("reason") == "after rescale"  # noqa: E731
    dq = wait_for(
        lambda: finished(api, f"elastic_data_quality__{job}", after), 180, "no data-quality run after the rescale", airflow
    )
    assert dq[-1]["state"] == "success"
    # the scheduler goes on at the new factor
    send(world.bootstrap, world.topic, demo_records(120, keys=20, seed=42))
    wait_for(lambda: [m for m in store.metrics(job) if m["factor"] == 4], 180, "no batch committed at factor 4", airflow)


def test_a_schedule_rule_is_held_by_the_manual_rescale_then_applied(world):
    job, config_file, airflow, api, store = world.job, world.config_file, world.airflow, world.api, world.store
    manual = store.generation(job)
    config_file.write_text(config_file.read_text() + "job.elasticity.schedule=* * * * * -> 3\n")
    held = api.trigger("elastic_scale_schedule")
    assert api.wait_run("elastic_scale_schedule", held, 180)["state"] == "success"
    assert store.generation(job).number == manual.number  # held for an hour: the manual factor stands
    # the hold is read when the task runs: with none, the same rule applies
    config_file.write_text(config_file.read_text() + "job.elasticity.manual.hold.ms=0\n")
    applied = api.trigger("elastic_scale_schedule")
    assert api.wait_run("elastic_scale_schedule", applied, 180)["state"] == "success"
    generation = store.generation(job)
    assert (generation.factor, generation.origin) == (3, "schedule")
    after = lambda r: (r.get("conf") or {}).get("reason") == "after scheduled rescale"  # noqa: E731
    dq = wait_for(
        lambda: finished(api, f"elastic_data_quality__{job}", after),
        180,
        "no data-quality run after the scheduled rescale",
        airflow,
    )
    assert dq[-1]["state"] == "success"


def test_a_job_copying_to_kafka_commits_exactly_once_and_passes_data_quality(world):
    job, airflow, api, store = world.copy_job, world.airflow, world.api, world.store
    runs = wait_for(lambda: finished(api, f"elastic_microbatch__{job}"), 240, "no micro-batch run of the copy finished", airflow)
    assert all(r["state"] == "success" for r in runs), airflow.tail(60)
    committed = sorted(store.metrics(job), key=lambda m: m["batch_id"])  # by the first run, or by the next one too
    assert [m["batch_id"] for m in committed] == [1, 2] and sum(m["processed"] for m in committed) == 300  # cap 200
    copies = read_committed(world.bootstrap, f"{world.copy_topic}-copy")
    sources = [(dict(r.headers)["elasticity.source.partition"], dict(r.headers)["elasticity.source.offset"]) for r in copies]
    assert len(copies) == 300 and len(set(sources)) == 300  # every order once, read read_committed
    dq = wait_for(lambda: finished(api, f"elastic_data_quality__{job}"), 180, "no data-quality run of the copy", airflow)
    assert dq[-1]["state"] == "success" and dq[-1]["run_type"] == "asset_triggered", airflow.tail(60)
    summary = json.loads((world.copy_reports / "summary.json").read_text())
    checks = {c["name"]: c for c in summary["checks"]}
    assert summary["success"] and {"kafka_unique", "kafka_key_order", "kafka_no_loss"} <= set(checks)
    assert checks["kafka_unique"]["rows"] == 300
    print(
        f"copy runs {[r['dag_run_id'] for r in runs]}: {len(copies)} records read read_committed, data quality {dq[-1]['dag_run_id']}"
    )


def test_records_start_a_run_through_the_lag_watcher_and_nothing_waiting_starts_none(world):
    job, airflow, api, store = world.lag_job, world.airflow, world.api, world.store
    dag = f"elastic_microbatch__{job}"
    assert api.wait_dag(dag)["is_paused"] is False
    # a new job: its watcher asks for the first run at once, which creates its generation (its topic is empty)
    first = wait_for(lambda: finished(api, dag), 240, "no first run of the lag-watched job", airflow)[-1]
    assert first["run_type"] == "asset_triggered" and first["state"] == "success", airflow.tail(60)
    wait_for(lambda: store.generation(job) is not None, 60, "no generation after the first run", airflow)
    wait_for(lambda: all(r["state"] in ("success", "failed") for r in api.runs(dag)), 240, "a run still on", airflow)
    # nothing waits: no run starts (a minute's schedule would have started one)
    before, quiet_until = {r["dag_run_id"] for r in api.runs(dag)}, time.monotonic() + 30
    while time.monotonic() < quiet_until:
        assert {r["dag_run_id"] for r in api.runs(dag)} == before, "a run started with nothing to read"
        time.sleep(3)
    fed = datetime.now().astimezone()
    send(world.bootstrap, world.lag_topic, demo_records(50, keys=10, seed=44))
    new = wait_for(lambda: [r for r in api.runs(dag) if r["dag_run_id"] not in before], 120, "no run after the records", airflow)[
        0
    ]
    run = api.wait_run(dag, new["dag_run_id"], 240)
    assert run["run_type"] == "asset_triggered" and run["state"] == "success", airflow.tail(60)
    mine = [m for m in store.metrics(job) if AttemptToken.parse(m["owner"]).run == run["dag_run_id"]]
    assert sum(m["processed"] for m in mine) == 50 and mine[-1]["lag_left"] == 0
    started = datetime.fromisoformat(run["start_date"])
    print(f"lag run {run['dag_run_id']}: started {(started - fed).total_seconds():.1f} s after 50 records were fed")


def test_a_replay_from_the_trigger_form_reprocesses_through_the_lag_watcher_and_data_quality_passes(world):
    """After the lag watcher's test: its job has processed 50 records. The replay DAG's form, filled as a person
    would (earliest, a new output version), writes a replay generation; the watcher sees the 50 records behind
    again and a run reprocesses them; the data-quality run after the replay passes, the second version no
    duplicate of the first."""
    job, airflow, api, store = world.lag_job, world.airflow, world.api, world.store
    before = store.generation(job)
    run_id = api.trigger("elastic_replay", {"job": job, "start": "earliest", "outputs": "new-version", "dry_run": False})
    assert api.wait_run("elastic_replay", run_id, 240)["state"] == "success", airflow.tail(60)
    replayed = store.generation(job)
    assert (replayed.number, replayed.origin, replayed.factor) == (before.number + 1, "replay", before.factor)
    assert run_id in replayed.reason

    def reprocessed():
        mine = [m for m in store.metrics(job) if m["generation"] == replayed.number]
        return mine if mine and sum(m["processed"] for m in mine) == 50 and mine[-1]["lag_left"] == 0 else None

    wait_for(reprocessed, 180, "the replayed records not reprocessed", airflow)
    after = lambda r: (r.get("conf") or {}).get("reason") == "after replay"  # noqa: E731
    dq = wait_for(
        lambda: finished(api, f"elastic_data_quality__{job}", after), 180, "no data-quality run after the replay", airflow
    )
    assert dq[-1]["state"] == "success", airflow.tail(60)


def test_a_load_step_makes_the_autosizer_in_the_triggerer_scale_up_once(world):
    job, airflow, api, store = world.auto_job, world.airflow, world.api, world.store
    assert api.wait_dag(f"elastic_autosize__{job}")["is_paused"] is False
    wait_for(lambda: store.generation(job) is not None, 240, "no first generation of the autosized job", airflow)
    # the load step: 3,000 records take 30 s at factor 1 (two virtual tasks of 50 records/s); the autosizer's
    # demand, the backlog over 5 s at 70 % utilisation, needs factor 2 as soon as a batch at factor 1 is measured
    send(world.bootstrap, world.auto_topic, demo_records(3000, keys=40, seed=45))
    dag = f"elastic_autosize__{job}"
    run = wait_for(lambda: finished(api, dag), 300, "no autosized rescale", airflow)[0]
    assert run["run_type"] == "asset_triggered" and run["state"] == "success", airflow.tail(60)
    generation = store.generation(job)
    assert (generation.factor, generation.origin) == (2, "autosize") and run["dag_run_id"] in generation.reason
    record = AutosizeRecord.from_json(generation.decision or "")
    assert (record.current, record.factor, record.useful) == (1, 2, 2) and record.behind > 0
    assert record.demand > dict(record.capacity)[1] and 0 < record.task_rate < 60  # the 20 ms lookup: under 50/s busy
    # the reads counted the busiest key bucket at both factors it weighs; at factor 1 a bucket is a partition, its task
    first = next(m for m in store.metrics(job) if m["factor"] == 1 and m["metrics"].get("records"))
    counted = {int(f): n for f, n in first["metrics"]["busiest-bucket-records"].items()}
    assert counted[1] == max(first["metrics"]["records"].values()) and 0 < counted[2] <= counted[1]
    # the run of batches holding the lease ended after its batch when the rescale asked for the lease: the rest
    # of the backlog is processed at factor 2
    at_2 = wait_for(lambda: [m for m in store.metrics(job) if m["factor"] == 2], 180, "no batch at factor 2", airflow)
    assert sum(m["processed"] for m in store.metrics(job)) <= 3000 and at_2[0]["records_read"] > 0
    # and only once: the bound is reached, and the scale-down cool-down (ten minutes) holds the factor
    assert [g.origin for g in store.generations(job)] == ["start", "autosize"] and len(api.runs(dag)) == 1
    print(
        f"autosized {record.current} -> {record.factor} at {record.input_rate:,.0f} records/s in, {record.behind:,} behind, "
        f"demand {record.demand:,.0f} records/s; run {run['dag_run_id']}"
    )
