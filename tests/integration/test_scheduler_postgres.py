"""Airflow as production runs it: the metadata on PostgreSQL (the server on
127.0.0.1:5432) with the LocalExecutor, and the settings docker-compose.yaml
carries: the cluster's job config (include/jobs/cluster/demo.properties: the demo
app, its sinks, audit, dead letters and blobs on the S3-protocol server, reached
through AWS_* variables), the checkpoint store on PostgreSQL (elasticity_store),
the warm engine as spark_default.

`airflow standalone` runs the real scheduler, dag-processor and api-server on a
fresh pair of databases that the set-up (`elasticity airflow --db postgres`'s
AirflowDb) creates and the teardown drops. The story: the job's lag watcher (in
the triggerer, reading the checkpoints on PostgreSQL) starts the micro-batch DAG
when records wait, a rescale comes through the REST API as the trigger form
sends it, the data-quality DAG follows each.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from sqlalchemy import create_engine, text

from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, read_table
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.store.attempt_token import AttemptToken
from elasticity.config import parse_properties
from elasticity.local.connect_server import SparkConnectServer
from elasticity.local.daemon import free_port
from elasticity.local.s3server import ACCESS_KEY, SECRET_KEY
from elasticity.local.standalone import (
    EXECUTOR,
    LOCAL_POSTGRES,
    AirflowDb,
    AirflowStandalone,
    MetadataDbError,
    connections,
)
from tests.conftest import REPO
from tests.support.airflow_runs import finished, wait_for
from tests.support.helpers import fresh_topic, write_properties

CLUSTER_JOB = REPO / "include" / "jobs" / "cluster" / "demo.properties"


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """The variables docker-compose.yaml gives every container, for this process and what it starts."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def databases(db: AirflowDb) -> set[str]:
    engine = create_engine(f"{db.server}/postgres")
    try:
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(text("SELECT datname FROM pg_database"))}
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def world(kafka_bootstrap, s3_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scheduler-postgres")
    suffix = uuid.uuid4().hex[:8]
    db = AirflowDb(LOCAL_POSTGRES, f"elasticity_airflow_t{suffix}", f"elasticity_t{suffix}")
    assert not {db.metadata_database, db.store_database} & databases(db)
    db.create()
    assert {db.metadata_database, db.store_database} <= databases(db)
    shared = {
        "AWS_ENDPOINT_URL": f"http://{s3_server.endpoint}",
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": "us-east-1",
        "ELASTICITY_HOME": str(tmp / "home"),
    }
    server = SparkConnectServer(tmp / "spark")
    airflow = None
    try:
        with environment(shared):
            remote = server.start(port=free_port(), master="local[2]").remote
            # the compose's job config, for a job and topic of this test's own
            topic = fresh_topic(kafka_bootstrap, "pgsched", 2, records=400, keys=20, seed=43)
            job = f"pgsched{suffix}"
            props = parse_properties(CLUSTER_JOB.read_text())
            props = {k: v.replace("s3://state/demo/", f"s3://state/{job}/") for k, v in props.items()}
            props.update({"job.name": job, "task.inputs": f"kafka.{topic}", "batch.max.records": "300"})  # trigger: lag
            assert all(props[k].startswith("s3://") for k in ("blob.store.uri", "job.output.path", "job.audit.path"))
            (tmp / "jobs").mkdir()
            write_properties(tmp / "jobs" / f"{job}.properties", props)
            airflow = AirflowStandalone(
                tmp / "airflow",
                free_port(),
                {
                    **connections(kafka_bootstrap, remote, str(db.store_url)),
                    **db.env(),
                    "ELASTICITY_JOBS_DIR": str(tmp / "jobs"),
                    "KAFKA_BOOTSTRAP_SERVERS": None,
                    "ELASTICITY_CHECKPOINT_STORE_URL": None,  # the connections must be enough
                },
            ).start()
            airflow.wait_ready()
            yield SimpleNamespace(
                db=db,
                job=job,
                audit=props["job.audit.path"],
                airflow=airflow,
                api=airflow.api(),
                store=CheckpointStore(str(db.store_url)),
            )
    finally:
        if airflow is not None:
            airflow.stop()
        server.stop()
        db.drop()
        assert not {db.metadata_database, db.store_database} & databases(db)


def _metadata(db: AirflowDb, sql: str, **params) -> list[tuple]:
    engine = create_engine(str(db.metadata_url))
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def test_the_scheduler_on_postgres_runs_the_microbatches_with_the_local_executor(world):
    job, airflow, api, store = world.job, world.airflow, world.api, world.store
    dag_id = f"elastic_microbatch__{job}"
    assert api.wait_dag(dag_id)["is_paused"] is False
    runs = wait_for(lambda: finished(api, dag_id), 240, "no lag-triggered micro-batch run finished", airflow)
    run = runs[-1]
    assert run["run_type"] == "asset_triggered" and run["state"] == "success", airflow.tail(60)  # the lag watcher's
    # Airflow's metadata is in PostgreSQL, written by a scheduler running the LocalExecutor
    assert _metadata(world.db, "SELECT state FROM dag_run WHERE dag_id = :d AND run_id = :r", d=dag_id, r=run["dag_run_id"]) == [
        ("success",)
    ]
    assert f"for executor: {EXECUTOR}(" in airflow.log_file.read_text()  # the scheduler's own words
    mine = [m for m in store.metrics(job) if AttemptToken.parse(m["owner"]).run == run["dag_run_id"]]
    assert [m["batch_id"] for m in mine] == [1, 2] and sum(m["processed"] for m in mine) == 400
    # the executors wrote the audit on the shared S3 storage: every record once
    audit = read_table(world.audit, AUDIT_SCHEMA).to_pandas()
    assert len(audit) == 400 and not audit.duplicated(["partition", "offset"]).any()
    dq = wait_for(lambda: finished(api, f"elastic_data_quality__{job}"), 180, "no data-quality run after the batches", airflow)
    assert dq[-1]["state"] == "success" and dq[-1]["run_type"] == "asset_triggered"


def test_a_rescale_through_the_rest_api_applies_and_data_quality_follows(world):
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


def test_a_missing_server_is_one_line_naming_it():
    port = free_port()  # nothing listens there
    with pytest.raises(MetadataDbError) as e:
        AirflowDb(f"postgresql+psycopg://elasticity:secret@127.0.0.1:{port}").create()
    message = str(e.value)
    assert f"127.0.0.1:{port}" in message and "secret" not in message and "\n" not in message
    assert "--db sqlite" in message
