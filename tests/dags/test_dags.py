"""The DAGs: integrity, and dag.test() runs against the embedded broker, Spark local
(spark-submit) and a real checkpoint store, with settings from Airflow connections."""

import json
import os
import uuid
from datetime import timedelta

import pyarrow as pa
import pytest
from sqlalchemy import event

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, read_table, write_batch_file
from elasticity.checkpoint.store.attempt_token import AttemptToken
from elasticity.checkpoint.store.pool import StorePool
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send

STORES = StorePool()  # the tests' stores, one per store URL, as the API server holds them


@pytest.fixture(scope="module")
def world(airflow_db, kafka_bootstrap, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dags")
    topic = f"af-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    send(kafka_bootstrap, topic, demo_records(400, keys=20, seed=21))
    jobs = tmp / "jobs"
    jobs.mkdir()
    job = f"af{uuid.uuid4().hex[:6]}"
    (jobs / f"{job}.properties").write_text(
        f"job.name={job}\ntask.inputs=kafka.{topic}\njob.elasticity.factor=2\nsystems.kafka.default.stream.samza.offset.default=oldest\n"
        f"job.output.path={tmp}/out\njob.audit.path={tmp}/audit\njob.dead.letter.path={tmp}/dlq\njob.report.path={tmp}/report\n"
        "batch.max.records=250\n"
        # a run's batches until caught up, whatever the machine's load: the first spark-submit's batch alone took
        # 44 s of the default 45 on a loaded machine, and the run ended with records left
        "airflow.microbatch.max.seconds=600\n"
    )
    host, port = kafka_bootstrap.split(":")
    saved = dict(os.environ)
    os.environ.update(
        {
            "ELASTICITY_JOBS_DIR": str(jobs),
            "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "generic", "host": host, "port": int(port)}),
            "AIRFLOW_CONN_ELASTICITY_STORE": json.dumps(
                {"conn_type": "generic", "extra": {"url": f"sqlite:///{tmp / 'store.db'}"}}
            ),
        }
    )
    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # the connections must be enough
    yield job, tmp
    os.environ.clear()
    os.environ.update(saved)


def kafka_bootstrap_of(job: str) -> str:
    conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"])
    return f"{conn['host']}:{conn['port']}"


def topic_of(tmp) -> str:
    text = next((tmp / "jobs").glob("*.properties")).read_text()
    return next(line.split("=", 1)[1].removeprefix("kafka.") for line in text.splitlines() if line.startswith("task.inputs="))


def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


def _of_run(metrics: dict, run_id: str) -> bool:
    """A batch committed by an attempt (any try) of the DAG run `run_id`: its owner is `<run id>#<try>#<8 hex>`."""
    return AttemptToken.parse(metrics["owner"]).run == run_id


def test_every_dag_imports_and_is_documented(world):
    job, _ = world
    bag = dagbag()
    assert bag.import_errors == {}
    assert {
        f"elastic_microbatch__{job}",
        "elastic_rescale",
        "elastic_replay",
        "elastic_scale_schedule",
        f"elastic_data_quality__{job}",
        f"elastic_maintenance__{job}",
    } <= set(bag.dag_ids)
    for dag in bag.dags.values():
        assert dag.tags and "elasticity" in dag.tags, dag.dag_id
        assert dag.doc_md and len(dag.doc_md) > 100, dag.dag_id
        assert dag.max_active_runs == 1, dag.dag_id
        for t in dag.tasks:
            assert t.retries >= 2, f"{dag.dag_id}.{t.task_id}"
    rescale = bag.dags["elastic_rescale"]
    factor = rescale.params.get_param("factor")
    assert factor.schema["maximum"] == 256 and factor.schema["minimum"] == 1
    replay = bag.dags["elastic_replay"].params
    assert replay["start"] == "earliest" and replay.get_param("outputs").schema["enum"] == ["new-version", "replace"]


def test_a_job_file_that_does_not_load_is_an_import_error_of_its_own_and_the_other_jobs_keep_their_dags(world, monkeypatch):
    job, tmp = world
    good = next((tmp / "jobs").glob("*.properties")).read_text()
    jobs = tmp / "jobs-with-bad-files"
    jobs.mkdir()
    (jobs / "good.properties").write_text(good)
    (jobs / "other.properties").write_text(good.replace(f"job.name={job}", f"job.name={job}b"))
    (jobs / "latin1.properties").write_bytes(good.replace(f"job.name={job}", "job.name=caf\xe9").encode("latin-1"))
    (jobs / "typo.properties").write_text(good.replace(f"job.name={job}", "job.name=typo").replace("factor=2", "factor=zwei"))
    for twin in ("twin-a", "twin-b"):
        (jobs / f"{twin}.properties").write_text(good.replace(f"job.name={job}", "job.name=twin"))
    monkeypatch.setenv("ELASTICITY_JOBS_DIR", str(jobs))
    bag = dagbag()
    (where, error), *others = bag.import_errors.items()
    assert not others and where.endswith("elastic_jobs_check.py"), bag.import_errors
    assert "3 job config file(s) left out" in error and f"{jobs / 'latin1.properties'}: not UTF-8 text (byte 12" in error
    assert f"{jobs / 'typo.properties'}: invalid job config:" in error and "job.elasticity.factor" in error
    assert f"job.name=twin is claimed by {jobs / 'twin-a.properties'}, {jobs / 'twin-b.properties'}" in error
    kept = {d.removeprefix("elastic_microbatch__") for d in bag.dag_ids if d.startswith("elastic_microbatch__")}
    assert kept == {job, f"{job}b"}
    assert {f"elastic_data_quality__{job}b", f"elastic_maintenance__{job}b"} <= set(bag.dag_ids)


def test_microbatch_rescale_microbatch_then_quality(world):
    from elasticity.airflow.tasks import open_job

    job, tmp = world
    bag = dagbag()
    first = bag.dags[f"elastic_microbatch__{job}"].test()
    assert first.state == "success"
    _, store, coordinator = open_job(job, STORES)
    assert coordinator.current().factor == 2
    mine = [m for m in store.metrics(job) if _of_run(m, first.run_id)]
    assert len(mine) == 2 and mine[-1]["lag_left"] == 0  # one run, batches (cap 250) until caught up

    rescale = bag.dags["elastic_rescale"].test(
        run_conf={"job": job, "factor": 8, "dry_run": False}, mark_success_pattern="trigger_data_quality"
    )
    assert rescale.state == "success"
    assert coordinator.current().factor == 8
    assert "rescale 2 -> 8 (elastic_rescale run " in coordinator.current().reason  # who asked, for the UI's history

    empty = bag.dags[f"elastic_microbatch__{job}"].test()  # nothing to read: the lag probe skips the batch
    assert empty.state == "success" and not [m for m in store.metrics(job) if _of_run(m, empty.run_id)]
    send(kafka_bootstrap_of(job), topic_of(tmp), demo_records(100, keys=20, seed=22))
    second = bag.dags[f"elastic_microbatch__{job}"].test()
    assert second.state == "success"
    assert {m["factor"] for m in store.metrics(job)} == {2, 8}

    dq = bag.dags[f"elastic_data_quality__{job}"].test()
    assert dq.state == "success"
    summary = json.loads((tmp / "report" / "summary.json").read_text())
    assert summary["success"] and {c["name"] for c in summary["checks"]} >= {"no_loss", "key_order", "routing"}
    assert (tmp / "report" / summary["folder"] / "data_docs" / "index.html").is_file()  # each run keeps its own report
    assert summary["folder"] in (tmp / "report" / "summary.html").read_text()  # linked from the rolling page
    assert store.validated_batch(job) == max(summary["batches"])  # the edge, in the store: any worker continues from it
    assert sorted(p.name for p in (tmp / "report").iterdir()) == ["runs", "summary.html", "summary.json"]  # no edge file


def test_quality_dag_fails_on_a_corrupted_audit(world):
    from elasticity.airflow.tasks import quality
    from elasticity.quality.runner import QualityFailed

    job, tmp = world
    audit = read_table(str(tmp / "audit"), AUDIT_SCHEMA).to_pylist()
    victim = sorted(audit, key=lambda r: (r["batch_id"], r["seq"]))[5]
    rows = [r for r in audit if r != victim]  # the dataset again, less one row
    assert len(rows) == len(audit) - 1
    for path in (tmp / "audit").rglob("*.parquet"):
        path.unlink()
    for b in {r["batch_id"] for r in rows}:
        write_batch_file(
            str(tmp / "audit"),
            b,
            "rewritten",
            pa.Table.from_pylist([r for r in rows if r["batch_id"] == b], schema=AUDIT_SCHEMA),
        )
    dag = dagbag().dags[f"elastic_data_quality__{job}"]
    retries = {t.task_id: t.retries for t in dag.tasks}
    assert all(r >= 2 for r in retries.values()), retries
    for t in dag.tasks:  # every retry still runs and fails; only the 20 s between attempts is not waited out
        t.retry_delay = timedelta(0)
    dq = dag.test(run_conf={"from_batch": 1})  # a manual window over every batch
    assert dq.state == "failed"
    tries = {ti.task_id: ti.try_number for ti in dq.get_task_instances()}
    assert tries == {t: r + 1 for t, r in retries.items()}, tries  # the first attempt and each retry, all failed
    with pytest.raises(QualityFailed, match=rf"no_loss .*{victim['stream']}-{victim['partition']}@{victim['offset']}"):
        quality(job, 1, None, report_dir=None)


def test_scale_schedule_applies_the_configured_factor(world):
    from elasticity.airflow.tasks import open_job

    job, tmp = world
    config_file = next((tmp / "jobs").glob("*.properties"))
    before = open_job(job, STORES)[2].current()
    assert before.origin == "manual"  # the rescale to 8 of the test above: it holds for an hour by default
    config_file.write_text(config_file.read_text() + "job.elasticity.schedule=* * * * * -> 3\n")
    held = dagbag().dags["elastic_scale_schedule"].test(mark_success_pattern="trigger_data_quality")
    assert held.state == "success" and open_job(job, STORES)[2].current().number == before.number
    config_file.write_text(config_file.read_text() + "job.elasticity.manual.hold.ms=0\n")
    run = dagbag().dags["elastic_scale_schedule"].test(mark_success_pattern="trigger_data_quality")
    assert run.state == "success"
    after = open_job(job, STORES)[2].current()
    assert (after.factor, after.origin) == (3, "schedule") and "elastic_scale_schedule run" in after.reason


def test_scheduled_rescales_go_job_by_job_a_busy_job_holds_up_none_and_a_stale_decision_is_dropped(world, monkeypatch, tmp_path):
    """Two jobs due for the schedule's factor 3: the one whose lease a batch holds waits (tried again after the
    other) while the other is rescaled at once; a person's rescale of the busy one meanwhile makes the schedule's
    decision stale, and it is dropped rather than applied over the person's."""
    import threading
    import time

    from elasticity.airflow.tasks import apply_scale_decisions, open_job
    from elasticity.checkpoint.store.attempt_token import attempt_owner

    _, tmp = world
    bootstrap = kafka_bootstrap_of("")
    topic = f"fair-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    busy, free = f"busy{uuid.uuid4().hex[:6]}", f"free{uuid.uuid4().hex[:6]}"
    for job in (busy, free):
        (jobs / f"{job}.properties").write_text(
            f"job.name={job}\ntask.inputs=kafka.{topic}\njob.elasticity.factor=2\njob.elasticity.schedule=* * * * * -> 3\n"
        )
    monkeypatch.setenv("ELASTICITY_JOBS_DIR", str(jobs))
    for job in (busy, free):
        open_job(job, STORES)[2].initialize()
    _, store, coordinator = open_job(busy, STORES)
    batch = attempt_owner("manual__a-running-batch", 1)
    store.acquire_lease(busy, batch, 60_000)

    outcome: dict = {}

    def schedule() -> None:
        try:
            outcome["rescaled"] = apply_scale_decisions("scheduled__fairness", 1, pause_s=0.5)
        except Exception as e:  # noqa: BLE001 - asserted below
            outcome["error"] = e

    running = threading.Thread(target=schedule)
    running.start()
    deadline = time.monotonic() + 60
    while open_job(free, STORES)[2].current().factor != 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_job(free, STORES)[2].current().factor == 3, "the free job waited for the busy one"
    assert running.is_alive() and coordinator.current().factor == 2  # the busy one still waits for its lease
    coordinator.rescale(5, owner=batch, trigger="a person's rescale", origin="manual")  # under the held lease
    store.release_lease(busy, batch)
    running.join(60)
    assert not running.is_alive() and "error" not in outcome, outcome
    assert outcome["rescaled"] == [f"elastic_data_quality__{free}"]
    after = coordinator.current()
    assert (after.factor, after.origin) == (5, "manual")  # the stale decision (decided on generation 1) dropped


def test_maintenance_expires_what_is_past_retention_and_the_next_batch_plans_the_next_id(world):
    """A month-old history (300 batches, their metrics and closed transactional ids, 130 data-quality runs) beside
    the recent one: the maintenance DAG removes what is past its retention, keeps the latest of each and every
    pending plan, and the next micro-batch plans the batch after the latest."""
    import dataclasses
    import time

    from elasticity.airflow.tasks import open_job
    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.quality import history
    from elasticity.quality.report_files import ReportFiles

    job, tmp = world
    config, store, coordinator = open_job(job, STORES)
    generation = coordinator.current()
    cps = coordinator.checkpoints(generation)
    recent = [p.batch_id for p in store.plans(job)]
    template = store.metrics(job, limit=1)[0]
    month_ago = int(time.time() * 1000) - 30 * 86_400_000
    old = CheckpointStore(config.checkpoint_store_url(), config.checkpoint_history_size, clock=lambda: month_ago)
    # the set-up's 1,500 commits through the store's own calls, without an fsync each (synchronous=FULL makes every
    # one wait for the disk, minutes on a busy machine): the month-old history need not survive a power loss
    event.listen(old.engine, "connect", lambda dbapi_conn, _: dbapi_conn.execute("PRAGMA synchronous=OFF"))
    old.engine.dispose()  # the connection the store's probe opened did not pass through the listener
    for _ in range(300):
        plan = old.plan_batch(job, generation.number, ())
        old.commit_batch(plan, cps.values(), config.checkpoint_write_versions)
        old.record_metrics(job, plan.batch_id, generation.number, json.dumps({**template, "batch_id": plan.batch_id}))
        old.open_transactional_id(job, f"old-{plan.batch_id}", "kafka")
        old.close_transactional_ids(job, [f"old-{plan.batch_id}"])
    old.close()
    latest = plan.batch_id
    report = tmp / "report"
    for n in range(1, 131):
        folder = f"old-{n:03d}"
        summary = {"run": folder, "window": "-", "success": n % 40 != 0, "finished_ms": month_ago, "checks": []}
        (report / "runs" / folder).mkdir(parents=True)
        (report / "runs" / folder / "summary.json").write_text(json.dumps(summary))
        history.record_run(store, job, summary, ReportFiles(str(report)).child(f"runs/{folder}"))
    runs = history.run_page(store, job, limit=10_000).runs
    keep = config.quality_retain_runs
    kept = {r["folder"] for r in runs[:keep]} | {r["folder"] for r in runs[keep:] if not r["success"]}
    assert len(runs) > len(kept) > keep  # the latest ones, and the failed runs of the earlier tests
    store.save_quality_edge(job, dataclasses.replace(store.quality_edge(job), last_batch=latest))
    assert store.checkpoints(job, 1)  # generation 1 (factor 2): two generations before the current one (3)

    run = dagbag().dags[f"elastic_maintenance__{job}"].test()
    assert run.state == "success"
    assert [p.batch_id for p in store.plans(job)] == [*recent, latest]  # the recent ones and the latest
    assert [m["batch_id"] for m in store.metrics(job, limit=1000)][-2:] == [recent[-1], latest]
    assert len(store.metrics(job, limit=1000)) == len(recent) + 1
    assert not [t for t, _ in store.open_transactional_ids(job) if t.startswith("old-")]
    assert store.checkpoints(job, 1) == {} and store.checkpoints(job, generation.number) == cps
    assert [g.number for g in store.generations(job)] == [1, 2, 3]  # a month's retention: all recent
    assert {r["folder"] for r in history.run_page(store, job, limit=10_000).runs} == kept
    assert {p.name for p in (report / "runs").iterdir()} == kept
    index = (report / "summary.html").read_text()
    assert all(f"runs/{r['folder']}/" not in index for r in runs if r["folder"] not in kept)

    send(kafka_bootstrap_of(job), topic_of(tmp), demo_records(50, keys=20, seed=23))
    after = dagbag().dags[f"elastic_microbatch__{job}"].test()
    assert after.state == "success"
    assert [m["batch_id"] for m in store.metrics(job) if _of_run(m, after.run_id)] == [latest + 1]


def test_no_silent_yarn(world, monkeypatch):
    """A spark connection whose master cannot work fails at once, naming the connection and the value;
    without a connection the job config's master (or the embedded Connect server) decides, never YARN."""
    from elasticity.airflow.operators import MicroBatchOperator
    from elasticity.config import ConfigError, validate

    job, tmp = world
    op = MicroBatchOperator(task_id="t", job=job, config_path=str(next((tmp / "jobs").glob("*.properties"))))
    config = validate(
        {"job.name": job, "task.inputs": "kafka.x", "spark.master": "local[3]", "airflow.connection.spark": "spark_yarn"}
    )
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn"}))
    with pytest.raises(ConfigError, match=r"spark master 'yarn' from connection 'spark_yarn' cannot work here"):
        op.spark_target(config)
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_YARN")
    target = op.spark_target(config)
    assert (target.kind, target.value) == ("master", "local[3]") and "spark.master" in target.source
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": 15999})
    )
    target = op.spark_target(config)
    assert (target.kind, target.value) == ("connect", "sc://127.0.0.1:15999/")


def test_every_task_of_a_job_uses_the_connections_its_config_names_and_no_environment_changes(world, monkeypatch):
    """A job whose config names its own connections (`airflow.connection.kafka`, `.store`) runs its micro-batches,
    a rescale and its data quality through them, while the default connections point at a dead broker and another
    store; nothing is exported to the process environment (the API server and the triggerer serve every job)."""
    from airflow.sdk.exceptions import AirflowException

    from elasticity.airflow.operators import MicroBatchOperator
    from elasticity.airflow.tasks import open_job
    from elasticity.airflow.ui import job_view
    from elasticity.checkpoint.store import CheckpointStore

    job, tmp = world
    first = next((tmp / "jobs").glob(f"{job}.properties"))
    mine, own_store = f"{job}c", f"sqlite:///{tmp / 'own-store.db'}"
    config_file = tmp / "jobs" / f"{mine}.properties"
    config_file.write_text(
        first.read_text().replace(f"job.name={job}", f"job.name={mine}").replace(f"{tmp}/", f"{tmp}/{mine}-")
        + "airflow.connection.kafka=kafka_own\nairflow.connection.store=store_own\n"
    )
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_OWN", os.environ["AIRFLOW_CONN_KAFKA_DEFAULT"])
    monkeypatch.setenv("AIRFLOW_CONN_STORE_OWN", json.dumps({"conn_type": "generic", "extra": {"url": own_store}}))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "generic", "host": "127.0.0.1", "port": 1}))
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "KAFKA_CLIENT_PROPERTIES", "ELASTICITY_CHECKPOINT_STORE_URL"):
        monkeypatch.delenv(name, raising=False)
    environ = dict(os.environ)
    try:
        bag = dagbag()
        run = bag.dags[f"elastic_microbatch__{mine}"].test()
        assert run.state == "success"
        rescale = bag.dags["elastic_rescale"].test(
            run_conf={"job": mine, "factor": 4, "dry_run": False}, mark_success_pattern="trigger_data_quality"
        )
        assert rescale.state == "success"
        assert bag.dags[f"elastic_data_quality__{mine}"].test().state == "success"
        changed = {k for k in os.environ.keys() | environ.keys() if os.environ.get(k) != environ.get(k)}
        assert {k for k in changed if not k.startswith("AIRFLOW_CTX_")} == set()  # dag.test's context: Airflow's own
        own = CheckpointStore(own_store)
        assert own.generation(mine).factor == 4 and own.metrics(mine)
        assert open_job(mine, STORES)[0].checkpoint_store_url() == own_store
        opened = []  # the job page, as the API server serves it: one store for every request, no engine each
        real_init = CheckpointStore.__init__
        monkeypatch.setattr(CheckpointStore, "__init__", lambda self, *a, **kw: opened.append(a[0]) or real_init(self, *a, **kw))
        with StorePool() as page_stores:
            views = [job_view(mine, page_stores) for _ in range(3)]
        assert opened == [own_store] and views[-1].factor == 4
        assert CheckpointStore(f"sqlite:///{tmp / 'store.db'}").generation(mine) is None
        op = MicroBatchOperator(task_id="t", job=mine, config_path=str(config_file), kafka_conn_id="kafka_default")
        with pytest.raises(
            AirflowException, match="kafka_conn_id='kafka_default' but the job's airflow.connection.kafka is 'kafka_own'"
        ):
            op.execute({})
    finally:
        config_file.unlink()


def test_parsing_the_dags_opens_no_checkpoint_store(tmp_path, monkeypatch):
    """Airflow parses the DAG files on every dag-processor pass: no database or network at top level. The store
    is a PostgreSQL port that accepts and never answers (each open would wait for its connect timeout), and any
    store opened while parsing is recorded."""
    import socket
    import time

    from elasticity.checkpoint.store import CheckpointStore

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"postgresql+psycopg://u:p@127.0.0.1:{silent.getsockname()[1]}/db"
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for job, factor in (("parsed_a", 4), ("parsed_b", 1)):
        (jobs / f"{job}.properties").write_text(f"job.name={job}\ntask.inputs=kafka.t\njob.elasticity.factor={factor}\n")
    monkeypatch.setenv("ELASTICITY_JOBS_DIR", str(jobs))
    monkeypatch.setenv("AIRFLOW_CONN_ELASTICITY_STORE", json.dumps({"conn_type": "generic", "extra": {"url": url}}))
    monkeypatch.setenv("ELASTICITY_CHECKPOINT_STORE_URL", url)
    opened = []
    real_init = CheckpointStore.__init__
    monkeypatch.setattr(CheckpointStore, "__init__", lambda self, *a, **kw: opened.append(a) or real_init(self, *a, **kw))
    try:
        start = time.monotonic()
        bag = dagbag()
        took = time.monotonic() - start
    finally:
        silent.close()
    assert bag.import_errors == {}
    assert {"elastic_microbatch__parsed_a", "elastic_microbatch__parsed_b", "elastic_rescale"} <= set(bag.dag_ids)
    assert opened == []
    print(f"parsed {len(bag.dag_ids)} DAGs in {took:.1f} s")
    assert took < 60
    form = bag.dags["elastic_rescale"].params
    assert form.get_param("job").schema["enum"] == ["parsed_a", "parsed_b"]
    assert form["factor"] == 4  # the first job's configured factor: cheap, from its file


def test_replay_dag_dry_run_then_from_the_earliest(world):
    """Last in the module: the job's later batches reprocess its input. The form's dry run writes nothing; the
    replay writes a generation of origin replay, who asked in its reason, and data quality is triggered."""
    from elasticity.airflow.tasks import open_job
    from elasticity.checkpoint.replay import Replay

    job, _ = world
    bag = dagbag()
    _, _, coordinator = open_job(job, STORES)
    if coordinator.current() is None:
        assert bag.dags[f"elastic_microbatch__{job}"].test().state == "success"
    before = coordinator.current()
    conf = {"job": job, "start": "earliest", "outputs": "new-version", "dry_run": True}
    dry = bag.dags["elastic_replay"].test(run_conf=conf, mark_success_pattern="trigger_data_quality")
    assert dry.state == "success" and coordinator.current() == before
    run = bag.dags["elastic_replay"].test(run_conf={**conf, "dry_run": False}, mark_success_pattern="trigger_data_quality")
    assert run.state == "success"
    new = coordinator.current()
    assert (new.number, new.origin, new.factor) == (before.number + 1, "replay", before.factor)
    assert "elastic_replay run " in new.reason and Replay.from_json(new.replay).requested.timestamp_ms is None
    assert all(o == 0 for cp in coordinator.checkpoints(new).values() for o in cp.offsets.values())
