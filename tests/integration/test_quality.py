"""Data quality over a real run (engine, rescales), and proof that each check can fail:
a dropped, a swapped and a duplicated audit row each fail the right expectation.
Incremental runs read only the new batches and still catch what crosses the window's edge."""

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator import JobCoordinator
from elasticity.batch.sinks import AUDIT_SCHEMA, OUTPUT_SCHEMA, read_table, write_batch_file
from elasticity.config import validate
from elasticity.kafka.consumer import KafkaInputs
from elasticity.kafka.producer import send
from elasticity.quality.runner import run_quality
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import fresh_topic, job_props


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
    assert {c.name for c in result.checks} == {"no_loss", "key_order", "routing", "audit_unique", "sink_unique"}
    assert all(c.rows > 0 for c in result.checks)
    page = summary.read_text()
    assert "PASSED" in page and "<svg" in page and "factor 2\u21928" in page
    assert (summary.parent / "data_docs" / "index.html").is_file() and summary.parent.parent.name == "runs"
    assert summary.parent.name in (tmp / "report" / "summary.html").read_text()  # the rolling page links the run


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
    result, summary = run_quality(config, engine.store, KafkaInputs(config), incremental=True, run_name=name)
    return result, json.loads(summary.with_suffix(".json").read_text())


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

    validated = json.loads((tmp / "report" / "validated.json").read_text())
    positions_file = tmp / "report" / validated["positions"]
    positions = pd.read_parquet(positions_file)
    window_keys = set(read_table(audit, AUDIT_SCHEMA, new).column("key").to_pylist())
    victim = positions[positions["key"].isin(window_keys)].index[0]
    saved = positions.copy()
    positions.loc[victim, "offset"] = 10**9  # the key's last validated record now lies after its new ones
    positions.to_parquet(positions_file, index=False)
    result, _ = incremental(growing, "order")
    assert {c.name for c in result.checks if not c.success} == {"key_order"}
    saved.to_parquet(positions_file, index=False)

    result, doc = incremental(growing, "fixed")  # the failed runs did not move the edge: the same window passes now
    assert result.success and doc["batches"] == new
