"""A Spark Connect server's warm-up (elasticity.local.warmup): the synthetic stateful job runs through the
engine on a throwaway session, the job's own session is readied, and the server then serves that job's
batch with every record in its output."""

from __future__ import annotations

import os

from elasticity.batch.sinks.outputs import OUTPUT_SCHEMA, read_table
from elasticity.config import load_config
from elasticity.local.warmup import DONE, WARM_BATCH, WARM_RECORDS, start_warm_up, status
from elasticity.spark.engine import MicroBatchEngine
from elasticity.spark.session import session
from elasticity.spark.target import SparkTarget
from tests.support.helpers import fresh_topic, job_props, write_properties


def test_the_warm_up_runs_the_engine_readies_the_jobs_session_and_the_server_then_serves_the_job(
    spark_connect_server, kafka_bootstrap, tmp_path
):
    topic = fresh_topic(kafka_bootstrap, "warm", 2, records=120)
    props = job_props(f"warm-{topic}", topic, tmp_path, **{"systems.kafka.consumer.bootstrap.servers": kafka_bootstrap})
    job = write_properties(tmp_path / "warm.properties", props)
    home = spark_connect_server.home / "spark-connect"

    warm = start_warm_up(spark_connect_server.remote, home, [str(job)], env=dict(os.environ), bootstrap=kafka_bootstrap)
    assert warm.wait(timeout=300) == 0, (home / "warm-up.log").read_text()
    state = status(home)
    assert state is not None and state.state == "warm", state
    assert state.jobs == [props["job.name"]]
    assert f"{WARM_RECORDS // WARM_BATCH} batches" in state.engine
    assert DONE in (home / "warm-up.log").read_text()

    config = load_config(job)
    engine = MicroBatchEngine(config, session(config, target=SparkTarget("connect", spark_connect_server.remote, "test")))
    summaries = engine.run(until_caught_up=True)
    assert sum(s.processed for s in summaries) == 120
    rows = read_table(f"{props['job.output.path']}/output", OUTPUT_SCHEMA).to_pylist()
    assert len(rows) == 120
    assert len({(r["source_partition"], r["source_offset"]) for r in rows}) == 120  # each record once
