"""Data quality over a real run (engine, rescales), and proof that each check can fail:
a dropped, a swapped and a duplicated audit row each fail the right expectation."""


import pyarrow as pa
import pytest

from elasticity.config import validate
from elasticity.coordinator import JobCoordinator
from elasticity.kafka.consumer import KafkaInputs
from elasticity.model import TaskName
from elasticity.quality.runner import run_quality
from elasticity.sinks import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table, write_task_file
from elasticity.spark.engine import MicroBatchEngine
from tests.helpers import fresh_topic, job_props


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
        write_task_file(str(path), batch_id, TaskName("corrupted"), pa.Table.from_pylist(part, schema=AUDIT_SCHEMA))
    return config.with_overrides({"job.audit.path": str(path)})


def failed(config, store, tmp, name):
    result, summary = run_quality(config, store, KafkaInputs(config), report_dir=tmp / f"report-{name}")
    return {c.name: c for c in result.checks if not c.success}, result, summary


def test_a_real_run_passes_every_check_and_writes_the_report(run):
    config, store, tmp = run
    result, summary = run_quality(config, store, KafkaInputs(config), report_dir=tmp / "report")
    assert result.success, result.failure_message()
    assert {c.name for c in result.checks} == {"no_loss", "key_order", "routing", "audit_unique", "sink_unique"}
    assert all(c.rows > 0 for c in result.checks)
    page = summary.read_text()
    assert "PASSED" in page and "<svg" in page and "factor 2-&gt;8" in page
    assert (tmp / "report" / "data_docs" / "index.html").is_file()


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
    write_task_file(str(path / "output"), out[0]["batch_id"], TaskName("extra"), pa.Table.from_pylist(out[:1], schema=OUTPUT_SCHEMA))
    for b in {r["batch_id"] for r in out}:
        write_task_file(str(path / "output"), b, TaskName("copy"), pa.Table.from_pylist([r for r in out if r["batch_id"] == b], schema=OUTPUT_SCHEMA))
    bad, _, _ = failed(config.with_overrides({"job.output.path": str(path)}), store, tmp, "sinkdup")
    assert set(bad) == {"sink_unique"}
