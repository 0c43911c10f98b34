"""The demo, through Airflow on the embedded default: feed a topic, scheduled
micro-batches, a scale-up and a scale-down from the rescale DAG, a data-quality
run with its report. Each DAG run goes through Airflow (`dag.test()`, SQLite
metadata database), so the UI shows them afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..config import load_config
from ..demo import demo_records
from ..kafka.admin import create_topic
from ..kafka.broker import BrokerError, EmbeddedBroker, free_port
from ..kafka.producer import send

REPO = Path(__file__).resolve().parents[3]  # not from .hooks: Airflow must not load its config before the env below


def _say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def run_story(records: int = 3000) -> int:
    home = Path(os.environ.setdefault("ELASTICITY_HOME", str(REPO / ".elasticity"))).resolve()
    os.environ.setdefault("AIRFLOW_HOME", str(home / "airflow"))
    os.environ.update({
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PARALLELISM": "4",
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    })
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    _say(f"Airflow metadata database in {os.environ['AIRFLOW_HOME']}")
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], check=True, capture_output=True)

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = EmbeddedBroker(home)
        try:
            bootstrap = broker.start().bootstrap
        except BrokerError:  # 9092 is taken by something else: any free port will do
            bootstrap = broker.start(port=free_port()).bootstrap
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    os.environ.setdefault("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "generic", "host": host, "port": int(port)}))
    os.environ.setdefault("AIRFLOW_CONN_ELASTICITY_STORE", json.dumps({"conn_type": "generic", "extra": {"url": f"sqlite:///{home / 'checkpoints.db'}"}}))
    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # from here on, Airflow connections tell where things are
    config = load_config(REPO / "include" / "jobs" / "demo.properties")
    topic = config.inputs[0].stream

    from airflow.dag_processing.dagbag import DagBag

    from .tasks import open_job

    bag = DagBag(dag_folder=str(REPO / "dags"))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    microbatch, rescale = bag.dags["elastic_microbatch__demo"], bag.dags["elastic_rescale"]
    quality = bag.dags["elastic_data_quality__demo"]
    _, store, coordinator = open_job("demo")

    def batches(n: int) -> None:
        for _ in range(n):
            run = microbatch.test()
            if run.state != "success":
                raise RuntimeError("a micro-batch failed; see its log above")
            mine = [m for m in store.metrics("demo", limit=5) if m.get("owner") == run.run_id]
            if not mine:
                print("   elastic_microbatch__demo success: nothing to read", flush=True)
            for m in mine:
                print(f"   elastic_microbatch__demo success: batch {m['batch_id']} at factor {m['factor']} ({m['task_count']} virtual tasks): "
                      f"{m['processed']} processed, {m['skipped']} skipped, {m['dead_lettered']} dead letters, lag left {m['lag_left']}", flush=True)

    def scale(factor: int) -> None:
        run = rescale.test(run_conf={"job": "demo", "factor": factor, "dry_run": False}, mark_success_pattern="trigger_data_quality")
        current = coordinator.current()
        print(f"   elastic_rescale {run.state}: generation {current.number}, factor {current.factor}", flush=True)

    _say(f"feeding {records} orders to {topic} on {host}:{port}")
    create_topic(f"{host}:{port}", topic, 4)
    send(f"{host}:{port}", topic, demo_records(records, keys=300))
    _say("scheduled micro-batches at factor 2")
    batches(2)
    _say("scale up to 8 (elastic_rescale)")
    scale(8)
    send(f"{host}:{port}", topic, demo_records(records // 2, keys=300, seed=8))
    batches(2)
    _say("scale down to 3 (elastic_rescale)")
    scale(3)
    send(f"{host}:{port}", topic, demo_records(records // 2, keys=300, seed=9))
    batches(2)
    _say("data quality (elastic_data_quality__demo)")
    run = quality.test()
    report = config.path("job.report.path", "reports")
    summary = json.loads((Path(report) / "summary.json").read_text())
    for c in summary["checks"]:
        print(f"   {'PASS' if c['success'] else 'FAIL'} {c['name']:13s} {c['rows']:>6} rows, {c['unexpected']} unexpected  {c['describe']}")
    print(f"\nData quality {run.state}. Report: {report}/summary.html  (Great Expectations Data Docs: {report}/data_docs/index.html)")
    print(f"Airflow UI: `make ui` starts it on http://127.0.0.1:8080 with these runs (AIRFLOW_HOME={os.environ['AIRFLOW_HOME']});"
          " the admin password is printed there.")
    return 0 if run.state == "success" else 1
