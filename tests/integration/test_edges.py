"""Reliability edges through the Spark engine on the real broker: partitions added between
batches under the default offset, a batch cap of 1, and a checkpoint store reset under old sinks."""

import uuid

import pytest
from kafka.admin import NewPartitions

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, read_table
from elasticity.batch.sinks.sink_identity import IdentityMismatch
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.kafka.admin import admin_client, create_topic
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import job_props


@pytest.fixture
def job(kafka_bootstrap, tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    topic = f"edge-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    props = job_props(f"edge-{topic}", topic, tmp_path)
    del props["systems.kafka.default.stream.samza.offset.default"]  # the default: upcoming
    return topic, props, tmp_path


def _engine(spark, props):
    config = validate(props)
    return MicroBatchEngine(config, spark, CheckpointStore(config.checkpoint_store_url()))


def _audited(props):
    return sorted((r["partition"], r["offset"]) for r in read_table(props["job.audit.path"], AUDIT_SCHEMA).to_pylist())


def test_partitions_added_between_batches_lose_nothing_under_the_default(spark, kafka_bootstrap, job):
    topic, props, _ = job
    engine = _engine(spark, props)
    assert engine.run()[0].batch_id is None  # the job starts (at the end: upcoming) on an empty topic
    send(kafka_bootstrap, topic, demo_records(60, keys=12, seed=1))
    engine.run(until_caught_up=True)
    with admin_client(kafka_bootstrap) as admin:
        admin.create_partitions({topic: NewPartitions(4)})
    send(kafka_bootstrap, topic, demo_records(120, keys=12, seed=2))  # before the job discovers the new partitions
    summaries = engine.run(until_caught_up=True)
    assert summaries[-1].lag_left == 0
    audited = _audited(props)
    assert len(audited) == len(set(audited)) == 180
    assert {p for p, _ in audited} == {0, 1, 2, 3}


def test_a_batch_cap_of_1_moves_every_lagging_partition_in_turn(spark, kafka_bootstrap, job):
    topic, props, _ = job
    props["systems.kafka.default.stream.samza.offset.default"] = "oldest"
    send(kafka_bootstrap, topic, [(b"a", b"{}"), (b"b", b"{}"), (b"c", b"{}"), (b"d", b"{}"), (b"e", b"{}"), (b"f", b"{}")])
    engine = _engine(spark, props)
    for _ in range(2):
        (s,) = engine.run(max_records=1)
        assert s.records_read == 1
    assert {p for p, _ in _audited(props)} == {0, 1}  # took turns
    with pytest.raises(ValueError, match="expected an integer >= 1"):
        engine.run(max_records=0)


def test_a_reset_store_under_old_sinks_fails_unless_reset_sinks(spark, kafka_bootstrap, job):
    topic, props, tmp_path = job
    props["systems.kafka.default.stream.samza.offset.default"] = "oldest"
    send(kafka_bootstrap, topic, demo_records(50, keys=10, seed=3))
    _engine(spark, props).run(until_caught_up=True)
    (tmp_path / "store.db").unlink()  # the store is lost between batches
    with pytest.raises(IdentityMismatch, match="--reset-sinks"):
        _engine(spark, props).run()
    engine = _engine(spark, props)
    assert engine.store.generation(engine.job) is None  # the failed start created nothing
    engine.run(until_caught_up=True, reset_sinks=True)
    audited = _audited(props)
    assert len(audited) == len(set(audited)) == 50  # the old outputs were moved aside, not duplicated
