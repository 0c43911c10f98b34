"""Data quality over a real run (engine, rescales), and proof that each check can fail:
a dropped, a swapped and a duplicated audit row each fail the right expectation.
Incremental runs read only the new batches and still catch what crosses the window's edge."""

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table, write_batch_file
from elasticity.config import validate
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import edge_table, fresh_topic, job_props, put_edge_table


@pytest.fixture(scope="module")
def run(spark, kafka_bootstrap, tmp_path_factory):
    import os

    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    tmp = tmp_path_factory.mktemp("dq")
    topic = fresh_topic(kafka_bootstrap, "dq", 2, records=600, keys=30, seed=11)
    config = validate(job_props(f"dq-{topic}", topic, tmp))
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=250)
    JobCoordinator(config, engine.store, engine.inputs).rescale(8)
    engine.run(max_records=200)
    JobCoordinator(config, engine.store, engine.inputs).rescale(3)
    engine.run(until_caught_up=True)
    return config, engine.store, tmp


def corrupt(config, tmp, name, change):
    """A copy of the audit with `change` applied, as a config pointing at it."""
    table = read_table(config.get("job.audit.path"), AUDIT_SCHEMA)
    rows = change(sorted(table.to_pylist(), key=lambda r: (r["batch_id"], r["task_name"], r["seq"])))
    path = tmp / f"audit-{name}"
    for batch_id in {r["batch_id"] for r in rows}:
        part = [r for r in rows if r["batch_id"] == batch_id]
        write_batch_file(str(path), batch_id, "corrupted", pa.Table.from_pylist(part, schema=AUDIT_SCHEMA))
    return config.with_overrides({"job.audit.path": str(path)})


def failed(config, store, tmp, name):
    result, summary = run_quality(config, store, KafkaInputs(config), report_dir=tmp / f"report-{name}")
    return {c.name: c for c in result.checks if not c.success}, result, summary


def test_a_real_run_passes_every_check_and_writes_the_report(run):
    config, store, tmp = run
    result, summary = run_quality(config, store, KafkaInputs(config), report_dir=tmp / "report")
    assert result.success, result.failure_message()
    assert {c.name for c in result.checks} == {
        "no_loss",
        "no_declared_loss",
        "key_order",
        "routing",
        "audit_unique",
        "sink_unique",
    }
    assert all(c.rows > 0 for c in result.checks if c.name != "no_declared_loss")  # no range declared lost: no row
    page = summary.read_text()
    assert "PASSED" in page and "<svg" in page and "factor 2\u21928" in page
    assert summary.files.exists("data_docs/index.html") and summary.files.location == str(
        tmp / "report" / "runs" / summary.folder
    )
    assert result.data_docs == str(tmp / "report" / "runs" / summary.folder / "data_docs" / "index.html")
    assert summary.folder in (tmp / "report" / "summary.html").read_text()  # the rolling page links the run


def test_a_dropped_audit_row_fails_no_loss_naming_the_record(run):
    config, store, tmp = run
    victim = {}

    def drop(rows):
        victim.update(rows[10])
        return rows[:10] + rows[11:]

    bad, result, _ = failed(corrupt(config, tmp, "drop", drop), store, tmp, "drop")
    assert set(bad) == {"no_loss"}
    assert f"{victim['stream']}-{victim['partition']}@{victim['offset']}" in result.failure_message()


def test_swapped_rows_of_one_key_fail_key_order(run):
    config, store, tmp = run

    def swap(rows):
        by_key = {}
        for i, r in enumerate(rows):
            by_key.setdefault((r["key"], r["task_name"], r["batch_id"]), []).append(i)
        i, j = next(ix for ix in by_key.values() if len(ix) >= 2)[:2]
        rows[i]["seq"], rows[j]["seq"] = rows[j]["seq"], rows[i]["seq"]
        return rows

    bad, result, _ = failed(corrupt(config, tmp, "swap", swap), store, tmp, "swap")
    assert set(bad) == {"key_order"} and "key=user-" in result.failure_message()


def test_a_duplicated_audit_row_fails_audit_unique(run):
    config, store, tmp = run

    def dup(rows):
        return rows + [dict(next(r for r in rows if r["key"] is None))]  # a null key: nothing to reorder

    bad, _, summary = failed(corrupt(config, tmp, "dup", dup), store, tmp, "dup")
    assert set(bad) == {"audit_unique"} and "FAILED" in summary.read_text()


def test_a_duplicate_in_the_sink_fails_sink_unique(run):
    config, store, tmp = run
    out = read_table(f"{config.get('job.output.path')}/output", OUTPUT_SCHEMA).to_pylist()
    path = tmp / "out-dup"
    write_batch_file(str(path / "output"), out[0]["batch_id"], "extra", pa.Table.from_pylist(out[:1], schema=OUTPUT_SCHEMA))
    for b in {r["batch_id"] for r in out}:
        write_batch_file(
            str(path / "output"),
            b,
            "copy",
            pa.Table.from_pylist([r for r in out if r["batch_id"] == b], schema=OUTPUT_SCHEMA),
        )
    bad, _, _ = failed(config.with_overrides({"job.output.path": str(path)}), store, tmp, "sinkdup")
    assert set(bad) == {"sink_unique"}


@pytest.fixture(scope="module")
def growing(spark, kafka_bootstrap, tmp_path_factory):
    import os

    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    tmp = tmp_path_factory.mktemp("dq-incremental")
    topic = fresh_topic(kafka_bootstrap, "dqi", 2, records=300, keys=20, seed=12)
    config = validate(job_props(f"dqi-{topic}", topic, tmp))
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=200, until_caught_up=True)
    return config, engine, topic, kafka_bootstrap, tmp


def more(growing, records: int, seed: int, factor: int | None = None) -> list[int]:
    config, engine, topic, bootstrap, _ = growing
    send(bootstrap, topic, demo_records(records, keys=20, seed=seed))
    if factor:
        JobCoordinator(config, engine.store, engine.inputs).rescale(factor)
    return [s.batch_id for s in engine.run(max_records=70, until_caught_up=True)]


def incremental(growing, name):
    config, engine, *_ = growing
    result, report = run_quality(config, engine.store, KafkaInputs(config), incremental=True, run_name=name)
    return result, json.loads(report.read_text("summary.json"))


def test_incremental_runs_validate_only_the_new_batches(growing):
    first, doc = incremental(growing, "first")
    assert first.success and doc["window"].endswith("(the first validation)")
    assert {c.name: c.rows for c in first.checks}["no_loss"] == 300
    new = more(growing, 120, seed=13, factor=4)  # across a rescale too
    second, doc = incremental(growing, "second")
    assert second.success, second.failure_message()
    rows = {c.name: c.rows for c in second.checks}
    assert rows["no_loss"] == 120 and rows["audit_unique"] == 120 and doc["batches"] == new  # the new batches, not the job's age
    assert doc["window"] == f"batches {new[0]}..{new[-1]} (new since batch {new[0] - 1})"
    index = (growing[4] / "report" / "summary.html").read_text()
    assert "runs/first/summary.html" in index and "runs/second/summary.html" in index


def test_the_edge_catches_a_record_processed_again_and_a_key_out_of_order(growing):
    config, engine, *_, tmp = growing
    new = more(growing, 60, seed=14)
    audit = config.get("job.audit.path")
    earlier = read_table(audit, AUDIT_SCHEMA, [1]).to_pylist()[0]  # validated already
    extra = write_batch_file(audit, new[0], "again", pa.Table.from_pylist([{**earlier, "batch_id": new[0]}], schema=AUDIT_SCHEMA))
    result, _ = incremental(growing, "again")
    assert not next(c for c in result.checks if c.name == "audit_unique").success  # (its key's order and routing break too)
    assert f"{earlier['stream']}-{earlier['partition']}@{earlier['offset']}" in result.failure_message()
    Path(extra).unlink()

    job = config.job_name
    positions = edge_table(engine.store, job, "positions")
    window_keys = set(read_table(audit, AUDIT_SCHEMA, new).column("key").to_pylist())
    victim = positions[positions["key"].isin(window_keys)].index[0]
    saved = positions.copy()
    positions.loc[victim, "offset"] = 10**9  # the key's last validated record now lies after its new ones
    put_edge_table(engine.store, job, "positions", positions)
    result, _ = incremental(growing, "order")
    assert {c.name for c in result.checks if not c.success} == {"key_order"}
    put_edge_table(engine.store, job, "positions", saved)

    result, doc = incremental(growing, "fixed")  # the failed runs did not move the edge: the same window passes now
    assert result.success and doc["batches"] == new


@pytest.fixture(scope="module")
def kafka_run(spark, kafka_bootstrap, tmp_path_factory):
    """A job copying a topic to the Kafka topic `<input>-copy` exactly-once, across a rescale."""
    import os

    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    tmp = tmp_path_factory.mktemp("dq-kafka")
    topic = fresh_topic(kafka_bootstrap, "dqk", 2, records=400, keys=20, seed=15)
    config = validate(job_props(f"dqk-{topic}", topic, tmp, **{"app.class": "elasticity.apps.identity:build_kafka"}))
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=150)
    JobCoordinator(config, engine.store, engine.inputs).rescale(5)
    engine.run(max_records=100, until_caught_up=True)
    return config, engine.store, tmp, f"{topic}-copy", kafka_bootstrap


def rewrite(bootstrap: str, topic: str, records: list) -> None:
    """The topic deleted and made again holding `records` (each to the partition it names, in list order)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    from elasticity.kafka.admin import create_topic

    partitions = max(r.partition for r in records) + 1
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: its futures fail once it is collected
    for f in admin.delete_topics([topic]).values():
        f.result(30)
    for _ in range(50):  # the deletion lands asynchronously: make it again once it has
        if create_topic(bootstrap, topic, partitions):
            break
        time.sleep(0.2)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for r in records:
        p.produce(topic, key=r.key, value=r.value, partition=r.partition, headers=list(r.headers))
    assert p.flush(30) == 0


def kafka_checks(config, store, tmp, name) -> tuple[dict, str]:
    result, _ = run_quality(config, store, KafkaInputs(config), report_dir=tmp / f"report-{name}")
    return {c.name: c for c in result.checks}, result.failure_message()


def test_a_kafka_output_read_committed_passes_and_each_of_its_checks_fails_on_its_fault(kafka_run):
    """The Kafka sink checks join the output topic, read read_committed, to its input by the provenance headers:
    a correct run passes; a duplicated, a missing and a reordered record each fail the check meant for it."""
    from elasticity.kafka.transactions import read_committed

    config, store, tmp, out, bootstrap = kafka_run
    good, message = kafka_checks(config, store, tmp, "good")
    assert all(c.success for c in good.values()), message
    assert {"kafka_unique", "kafka_key_order", "kafka_no_loss"} <= set(good)
    assert good["kafka_unique"].rows == 400 and good["kafka_key_order"].rows == 400 - 400 // 50  # null keys: no order
    records = read_committed(bootstrap, out)
    assert len(records) == 400

    null_key = next(i for i, r in enumerate(records) if r.key is None)
    rewrite(bootstrap, out, [*records, records[null_key]])  # a record twice: an input relayed twice
    checks, message = kafka_checks(config, store, tmp, "dup")
    assert {n for n, c in checks.items() if not c.success} == {"kafka_unique", "kafka_no_loss"}, message

    rewrite(bootstrap, out, records[:7] + records[8:])  # a record missing
    checks, message = kafka_checks(config, store, tmp, "missing")
    assert {n for n, c in checks.items() if not c.success} == {"kafka_no_loss"}, message
    assert "sent" in message

    i = next(  # two neighbours of one key swapped
        i for i in range(len(records) - 1) if records[i].key is not None and records[i].key == records[i + 1].key
    )
    rewrite(bootstrap, out, [*records[:i], records[i + 1], records[i], *records[i + 2 :]])
    checks, message = kafka_checks(config, store, tmp, "swap")
    assert {n for n, c in checks.items() if not c.success} == {"kafka_key_order"}, message
    assert f"key={records[i].key.decode()}" in message

    rewrite(bootstrap, out, records)
    checks, message = kafka_checks(config, store, tmp, "again")
    assert all(c.success for c in checks.values()), message


def test_incremental_kafka_checks_read_from_the_edge_and_catch_what_crosses_it(spark, kafka_bootstrap, tmp_path):
    """An incremental run reads the Kafka output and commit topics from where the last one stopped: its checks
    count the new batches' outputs only, a key's order continues from its last validated output, and an output of
    a validated batch written again past the edge fails kafka_unique."""
    import os

    from confluent_kafka import Producer

    from elasticity.batch.sinks.exactly_once import provenance
    from elasticity.kafka.transactions import read_committed

    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    topic = fresh_topic(kafka_bootstrap, "dqke", 2, records=200, keys=20, seed=16)
    config = validate(job_props(f"dqke-{topic}", topic, tmp_path, **{"app.class": "elasticity.apps.identity:build_kafka"}))
    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=100, until_caught_up=True)

    def incremental(name):
        result, _ = run_quality(config, engine.store, KafkaInputs(config), incremental=True, run_name=name)
        return {c.name: c for c in result.checks}, result.failure_message()

    first, message = incremental("first")
    assert all(c.success for c in first.values()) and first["kafka_unique"].rows == 200, message
    send(kafka_bootstrap, topic, demo_records(90, keys=20, seed=17))
    JobCoordinator(config, engine.store, engine.inputs).rescale(3)
    engine.run(max_records=50, until_caught_up=True)
    second, message = incremental("second")
    assert all(c.success for c in second.values()), message
    assert second["kafka_unique"].rows == 90 and second["kafka_no_loss"].rows == len(engine.store.plans(config.job_name)) - 2

    positions = edge_table(engine.store, config.job_name, "kafka_positions")
    send(kafka_bootstrap, topic, demo_records(60, keys=20, seed=18))
    new = [s.batch_id for s in engine.run(max_records=50, until_caught_up=True)]
    copies = [r for r in read_committed(kafka_bootstrap, f"{topic}-copy") if r.key is not None]
    keys_in_new = {r.key for r in copies if int(provenance(r.headers)["batch_id"]) in new}
    victim = positions.index[positions["key"].isin(keys_in_new)][0]
    moved = positions.copy()
    moved.loc[victim, "source_offset"] = 10**9  # the key's last validated output now comes from a later input
    put_edge_table(engine.store, config.job_name, "kafka_positions", moved)
    checks, message = incremental("order")
    assert {n for n, c in checks.items() if not c.success} == {"kafka_key_order"}, message
    put_edge_table(engine.store, config.job_name, "kafka_positions", positions)
    checks, message = incremental("fixed")
    assert all(c.success for c in checks.values()) and checks["kafka_unique"].rows == 60, message

    old = copies[0]  # an output of the first, validated batch, written again
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(f"{topic}-copy", key=old.key, value=old.value, partition=old.partition, headers=list(old.headers))
    assert p.flush(30) == 0
    send(kafka_bootstrap, topic, demo_records(30, keys=20, seed=19))
    engine.run(max_records=50, until_caught_up=True)
    checks, message = incremental("again")
    assert {n for n, c in checks.items() if not c.success} == {"kafka_unique", "kafka_key_order"}, (
        message
    )  # late, so out of order
    source = provenance(old.headers)
    assert (
        f"key={old.key.decode()} from {topic}-{source['source_partition']}@{source['source_offset']}"
        in checks["kafka_unique"].examples[0]
    )


API_SERVER = """
import json, sys
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import load_config
from elasticity.quality.history import run_page
from elasticity.views.jobview import QUALITY_RUNS
from elasticity.views.report_serving import report_file

config = load_config(sys.argv[1])
store = CheckpointStore(config.checkpoint_store_url())
page = run_page(store, config.job_name, limit=QUALITY_RUNS)  # what build_view lists
found = {p: report_file(config, store, p) for p in sys.argv[2:]}  # what /reports/<job>/<path> serves
print(json.dumps({
    "runs": [r["run"] for r in page.runs],
    "files": {p: [f.media_type, f.body.decode(errors="replace")] for p, f in found.items()},
}))
"""


def test_quality_and_maintenance_on_other_workers_continue_from_the_store_and_the_page_reads_s3(
    spark, kafka_bootstrap, s3_server, tmp_path, monkeypatch
):
    """Production Airflow runs each task on whichever worker takes it, sharing only the databases and object
    storage. A data-quality run with ELASTICITY_HOME=A, then maintenance and the next run with ELASTICITY_HOME=B
    (A gone, nothing copied): the edge continues (only the new batches are validated), maintenance compacts and
    expires up to the validated batch; and the job page's code, in a process with a third ELASTICITY_HOME, serves
    the reports from the S3 server."""
    import shutil
    import subprocess
    import sys

    from elasticity.checkpoint.store import CheckpointStore
    from elasticity.maintenance import maintain
    from elasticity.quality.report_files import ReportFiles
    from tests.conftest import REPO
    from tests.support.helpers import write_properties

    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    shared = tmp_path / "shared"  # the store and the sinks: what every worker reaches (a database, object storage)
    topic = fresh_topic(kafka_bootstrap, "dqw", 2, records=240, keys=20, seed=21)
    job = f"dqw-{topic}"
    props = {k: v for k, v in job_props(job, topic, shared).items() if k != "job.report.path"}
    props |= {"blob.store.uri": s3_server.uri(job), "job.batches.retention.ms": "0"}
    config = validate(props)
    assert config.report_location.startswith("s3://")  # the job's object store: no worker's folder

    home_a, home_b = tmp_path / "worker-a", tmp_path / "worker-b"
    home_a.mkdir()
    monkeypatch.setenv("ELASTICITY_HOME", str(home_a))
    engine = MicroBatchEngine(config, spark)
    first = [s.batch_id for s in engine.run(max_records=50, until_caught_up=True)]
    result, report = run_quality(config, engine.store, KafkaInputs(config), incremental=True, run_name="on-a")
    assert result.success, result.failure_message()
    assert report.summary["window"].endswith("(the first validation)") and report.summary["batches"] == first
    engine.store.close()
    shutil.rmtree(home_a)  # worker A is gone, and its disk with it

    monkeypatch.setenv("ELASTICITY_HOME", str(home_b))
    store = CheckpointStore(config.checkpoint_store_url())
    audit_files = {p.name for p in (shared / "audit").rglob("*.parquet")}
    done = maintain(config, store, now_ms=int(time.time() * 1000) + 1_000)
    assert done.validated_batch == first[-1]
    assert done.removed["sink_files"] > 0 and done.removed["batch_plans"] == len(first) - 1  # the latest plan stays
    assert [p.batch_id for p in store.plans(job)] == [first[-1]]
    assert {p.name for p in (shared / "audit").rglob("*.parquet")} != audit_files

    send(kafka_bootstrap, topic, demo_records(90, keys=20, seed=22))
    engine = MicroBatchEngine(config, spark, store)
    new = [s.batch_id for s in engine.run(max_records=50, until_caught_up=True)]
    result, report = run_quality(config, store, KafkaInputs(config), incremental=True, run_name="on-b")
    assert result.success, result.failure_message()
    assert report.summary["batches"] == new and {c.name: c.rows for c in result.checks}["no_loss"] == 90  # not from batch 1
    assert report.summary["window"] == f"batches {new[0]}..{new[-1]} (new since batch {first[-1]})"
    assert store.validated_batch(job) == new[-1]
    assert not (home_b / job / "reports").exists() and result.data_docs.startswith("s3://") and "secret" not in result.data_docs
    assert ReportFiles(config.report_location).exists("runs/on-a/data_docs/index.html")

    api_home = tmp_path / "api-server"
    api_home.mkdir()
    paths = ["runs/on-a/summary.html", "runs/on-a/data_docs/index.html", "summary.html", "runs/on-b/summary.json"]
    out = subprocess.run(
        [sys.executable, "-c", API_SERVER, str(write_properties(tmp_path / "job.properties", props)), *paths],
        env={**os.environ, "ELASTICITY_HOME": str(api_home), "PYTHONPATH": f"{REPO / 'include'}:{REPO}"},
        capture_output=True,
        text=True,
        cwd=api_home,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    served = json.loads(out.stdout)
    assert served["runs"] == ["on-b", "on-a"]
    files = served["files"]
    assert files["runs/on-a/summary.html"][0] == "text/html" and "PASSED" in files["runs/on-a/summary.html"][1]
    assert "<html" in files["runs/on-a/data_docs/index.html"][1].lower()
    assert "runs/on-a/summary.html" in files["summary.html"][1] and "runs/on-b/summary.html" in files["summary.html"][1]
    assert json.loads(files["runs/on-b/summary.json"][1])["batches"] == new
    assert [p.name for p in api_home.iterdir()] == []  # the page read nothing from, and wrote nothing to, its disk
