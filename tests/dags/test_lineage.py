"""OpenLineage through Airflow's provider: the micro-batch, rescale and replay DAGs run under `dag.test()` with the
provider's file transport, and the events it wrote name the job's Kafka input (`kafka://<bootstrap>`, the topic)
and outputs (the app's Kafka topic, its Parquet datasets with their schema facets, the audit and dead letters).

The runs are in a process of their own: the provider decides at import whether it is on (a transport
configured), and caches its configuration, so it must start with the transport in its environment."""

import json
import os
import subprocess
import sys
import uuid

from elasticity.api.stream import ApplicationDescriptor
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import load_config
from elasticity.kafka.admin import create_topic
from elasticity.kafka.consumer import KafkaInputs
from elasticity.views.job_datasets import AUDIT_FIELDS, OUTPUT_FIELDS, fields_of, job_datasets, path_dataset
from tests.conftest import REPO

RUN = """
import os, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
job = sys.argv[1]
micro = bag.dags[f"elastic_microbatch__{job}"].test()
rescale = bag.dags["elastic_rescale"].test(run_conf={"job": job, "factor": 4, "dry_run": False})
replay = bag.dags["elastic_replay"].test(run_conf={"job": job, "start": "earliest", "outputs": "new-version", "dry_run": True})
print("STATES", micro.state, rescale.state, replay.state)
"""


def test_micro_batch_rescale_and_replay_report_their_datasets_through_the_provider(airflow_db, kafka_bootstrap, tmp_path):
    topic = f"lin-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    job = f"lin{uuid.uuid4().hex[:6]}"
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    path = jobs / f"{job}.properties"
    path.write_text(
        f"job.name={job}\ntask.inputs=kafka.{topic}\njob.elasticity.factor=2\n"
        "app.class=tests.support.apps:lineage_app\n"
        f"task.checkpoint.store.url=sqlite:///{tmp_path / 'store.db'}\n"
        f"job.output.path={tmp_path}/out\njob.audit.path={tmp_path}/audit\njob.dead.letter.path={tmp_path}/dlq\n"
    )
    env = {
        **os.environ,
        "ELASTICITY_JOBS_DIR": str(jobs),
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)])),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(tmp_path / "events.jsonl"), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "elasticity-test",
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "true",  # no fork of the task process for each event
    }
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap  # for this process's first generation (restored after)
    config = load_config(path)
    store = CheckpointStore(config.checkpoint_store_url())
    JobCoordinator(config, store, KafkaInputs(config)).rescale(2)  # a first generation, nothing to read: a skipped run
    store.close()

    out = subprocess.run([sys.executable, "-c", RUN, job], env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert "STATES success success success" in out.stdout, out.stdout[-3000:] + out.stderr[-5000:]
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines() if line.strip()]
    by_job = {}
    for e in events:
        if e["eventType"] == "COMPLETE" and "." in e["job"]["name"]:  # task events: <dag_id>.<task_id>
            by_job[e["job"]["name"]] = e
    micro, rescale = by_job[f"elastic_microbatch__{job}.run_batches"], by_job["elastic_rescale.rescale"]
    replay = by_job["elastic_replay.replay"]
    assert micro["job"]["namespace"] == "elasticity-test"

    kafka_ns = f"kafka://{kafka_bootstrap}"
    inputs = [(d["namespace"], d["name"]) for d in micro["inputs"]]
    assert inputs == [(kafka_ns, topic)]
    outputs = {(d["namespace"], d["name"]): d for d in micro["outputs"]}
    assert set(outputs) == {
        (kafka_ns, f"{topic}-enriched"),
        ("file", str(tmp_path / "out" / "enriched")),
        ("file", str(tmp_path / "audit")),
        ("file", str(tmp_path / "dlq")),
    }
    parquet = outputs[("file", str(tmp_path / "out" / "enriched"))]
    assert [(f["name"], f["type"]) for f in parquet["facets"]["schema"]["fields"]] == list(OUTPUT_FIELDS)
    audit = outputs[("file", str(tmp_path / "audit"))]
    assert [(f["name"], f["type"]) for f in audit["facets"]["schema"]["fields"]] == list(AUDIT_FIELDS)
    assert "schema" not in outputs[(kafka_ns, f"{topic}-enriched")].get("facets", {})

    assert [(d["namespace"], d["name"]) for d in rescale["inputs"]] == [(kafka_ns, topic)]
    assert rescale["outputs"] == []
    assert [(d["namespace"], d["name"]) for d in replay["inputs"]] == [(kafka_ns, topic)]
    assert replay["outputs"] == []


def test_dataset_names_follow_the_naming_spec():
    assert path_dataset("s3a://bucket/jobs/out/orders?endpoint_override=127.0.0.1:9000").namespace == "s3://bucket"
    assert path_dataset("s3a://bucket/jobs/out/orders?endpoint_override=x").name == "jobs/out/orders"
    assert (path_dataset("gs://b/p/q").namespace, path_dataset("gs://b/p/q").name) == ("gs://b", "p/q")
    assert (path_dataset("file:///data/out").namespace, path_dataset("file:///data/out").name) == ("file", "/data/out")
    assert (path_dataset("hdfs://nn:8020/x").namespace, path_dataset("hdfs://nn:8020/x").name) == ("hdfs://nn:8020", "/x")
    assert path_dataset("relative/out").name == os.path.abspath("relative/out")
    assert fields_of([("amount", "double"), ("customer", "string")]) == (("amount", "double"), ("customer", "string"))


def test_a_typed_output_s_declared_fields_replace_the_sink_s(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker-a:9093,broker-b:9093")
    from elasticity.config import validate

    config = validate(
        {
            "job.name": "typed",
            "task.inputs": "kafka.orders",
            "app.class": "elasticity.apps.identity:build",
            "job.output.path": str(tmp_path),
        }
    )
    app = ApplicationDescriptor(config.inputs)
    app.input("kafka.orders").send_to("parquet.orders")
    declared = fields_of([("order_id", "bigint"), ("amount", "double")])
    found = job_datasets(config, app, output_fields={"orders": declared})
    assert [(d.namespace, d.name) for d in found.inputs] == [("kafka://broker-a:9093", "orders")]
    (orders,) = [d for d in found.outputs if d.name == str(tmp_path / "orders")]
    assert orders.fields == declared
