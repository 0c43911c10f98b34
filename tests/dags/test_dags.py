"""The DAGs: integrity, and dag.test() runs against the embedded broker, Spark local
(spark-submit) and a real checkpoint store, with settings from Airflow connections."""

import json
import os
import uuid

import pyarrow as pa
import pytest

from elasticity.demo import demo_records
from elasticity.kafka.admin import create_topic
from elasticity.kafka.producer import send
from elasticity.model import TaskName
from elasticity.sinks import AUDIT_SCHEMA, read_table, write_task_file


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
        f"job.name={job}\ntask.inputs=kafka.{topic}\njob.elasticity.factor=2\nsystems.kafka.default.stream.offset.default=oldest\n"
        f"job.output.path={tmp}/out\njob.audit.path={tmp}/audit\njob.dead.letter.path={tmp}/dlq\njob.report.path={tmp}/report\n"
        "batch.max.records=250\n"
    )
    host, port = kafka_bootstrap.split(":")
    saved = dict(os.environ)
    os.environ.update({
        "ELASTICITY_JOBS_DIR": str(jobs),
        "AIRFLOW_CONN_KAFKA_DEFAULT": json.dumps({"conn_type": "generic", "host": host, "port": int(port)}),
        "AIRFLOW_CONN_ELASTICITY_STORE": json.dumps({"conn_type": "generic", "extra": {"url": f"sqlite:///{tmp / 'store.db'}"}}),
    })
    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # the connections must be enough
    yield job, tmp
    os.environ.clear()
    os.environ.update(saved)


def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


def test_every_dag_imports_and_is_documented(world):
    job, _ = world
    bag = dagbag()
    assert bag.import_errors == {}
    assert {f"elastic_microbatch__{job}", "elastic_rescale", "elastic_scale_schedule", f"elastic_data_quality__{job}"} <= set(bag.dag_ids)
    for dag in bag.dags.values():
        assert dag.tags and "elasticity" in dag.tags, dag.dag_id
        assert dag.doc_md and len(dag.doc_md) > 100, dag.dag_id
        assert dag.max_active_runs == 1, dag.dag_id
        for t in dag.tasks:
            assert t.retries >= 2, f"{dag.dag_id}.{t.task_id}"
    rescale = bag.dags["elastic_rescale"]
    factor = rescale.params.get_param("factor")
    assert factor.schema["maximum"] == 256 and factor.schema["minimum"] == 1


def test_microbatch_rescale_microbatch_then_quality(world):
    from elasticity.airflow.tasks import open_job

    job, tmp = world
    bag = dagbag()
    first = bag.dags[f"elastic_microbatch__{job}"].test()
    assert first.state == "success"
    _, store, coordinator = open_job(job)
    assert coordinator.current().factor == 2 and store.plans(job, "committed")

    rescale = bag.dags["elastic_rescale"].test(run_conf={"job": job, "factor": 8, "dry_run": False}, mark_success_pattern="trigger_data_quality")
    assert rescale.state == "success"
    assert coordinator.current().factor == 8
    assert "rescale 2 -> 8 (elastic_rescale run " in coordinator.current().reason  # who asked, for the UI's history

    second = bag.dags[f"elastic_microbatch__{job}"].test()
    assert second.state == "success"
    assert {m["factor"] for m in store.metrics(job)} == {2, 8}

    dq = bag.dags[f"elastic_data_quality__{job}"].test()
    assert dq.state == "success"
    summary = json.loads((tmp / "report" / "summary.json").read_text())
    assert summary["success"] and {c["name"] for c in summary["checks"]} >= {"no_loss", "key_order", "routing"}
    assert (tmp / "report" / "data_docs" / "index.html").is_file()


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
        write_task_file(str(tmp / "audit"), b, TaskName("rewritten"), pa.Table.from_pylist([r for r in rows if r["batch_id"] == b], schema=AUDIT_SCHEMA))
    dq = dagbag().dags[f"elastic_data_quality__{job}"].test()
    assert dq.state == "failed"
    with pytest.raises(QualityFailed, match=rf"no_loss .*{victim['stream']}-{victim['partition']}@{victim['offset']}"):
        quality(job, None, None, None)


def test_scale_schedule_applies_the_configured_factor(world):
    from elasticity.airflow.tasks import open_job

    job, tmp = world
    config_file = next((tmp / "jobs").glob("*.properties"))
    config_file.write_text(config_file.read_text() + "job.elasticity.schedule=* * * * * -> 3\n")
    run = dagbag().dags["elastic_scale_schedule"].test()
    assert run.state == "success"
    assert open_job(job)[2].current().factor == 3
