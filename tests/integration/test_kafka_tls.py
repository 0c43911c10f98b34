"""A job against a broker reachable only over TLS: the embedded broker in a network namespace of the test's
own, behind a TLS-terminating proxy on the address the broker advertises (tests/support/tls_proxy.py).
Every client the job opens (admin, producer, the read tasks on Spark's workers, the changelog, the lag probe)
is given `security.protocol=SSL` and a PEM truststore by the job config alone."""

from __future__ import annotations

import uuid

import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.lag import lag_report
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, read_table
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from elasticity.kafka.admin import BrokerUnreachable, client_settings, create_topic, partition_counts, probe
from elasticity.kafka.consumer import KafkaInputs, read_log
from elasticity.kafka.producer import send
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import job_props
from tests.support.tls_proxy import TlsBroker, make_certificates


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls-broker")
    broker = TlsBroker(folder, make_certificates(folder / "certs")).start()
    try:
        yield broker
    finally:
        broker.stop()


def tls(bootstrap: str, ca) -> dict[str, str]:
    props = {"systems.kafka.consumer.bootstrap.servers": bootstrap}
    for role in ("consumer", "producer"):
        props |= {
            f"systems.kafka.{role}.security.protocol": "SSL",
            f"systems.kafka.{role}.ssl.truststore.type": "PEM",
            f"systems.kafka.{role}.ssl.truststore.location": str(ca),
        }
    return props


@pytest.fixture
def no_overrides(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_PROPERTIES", raising=False)
    monkeypatch.setenv("DEMO_LOOKUP_MS", "0")


def test_a_stateful_job_runs_a_batch_over_tls(tls_broker, spark, tmp_path, no_overrides):
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    props = job_props(f"tls-{topic}", topic, tmp_path, factor=2) | tls(tls_broker.bootstrap, tls_broker.certificates.ca)
    props |= {
        "app.class": "elasticity.apps.enrichment:build_stateful",
        "task.checkpoint.read.versions": "2,1",
        "stores.totals.changelog": f"kafka.{topic}-changelog",  # the Kafka changelog backend: its clients too
        "job.state.dir": str(tmp_path / "state"),
    }
    config = validate(props)
    with pytest.raises(BrokerUnreachable, match=f"unreachable at {tls_broker.bootstrap}"):
        probe(tls_broker.bootstrap)  # a plaintext client is not answered: TLS is real
    assert create_topic(client_settings(config, "kafka", "admin"), topic, 2)
    assert send(client_settings(config, "kafka", "producer"), topic, demo_records(150, keys=30, seed=3)) == 150
    inputs = KafkaInputs(config)
    assert lag_report(config, _store(config), inputs).has_work  # the lag probe, before the job's first batch

    engine = MicroBatchEngine(config, spark)
    (summary,) = engine.run(max_records=1000)  # one micro-batch: read on Spark's workers, processed, committed
    assert (summary.records_read, summary.processed + summary.dead_lettered, summary.lag_left) == (150, 150, 0)
    audit = [r for r in read_table(props["job.audit.path"], AUDIT_SCHEMA).to_pylist() if r["batch_id"] == summary.batch_id]
    assert len(audit) == 150
    report = lag_report(config, engine.store, inputs)
    assert (report.generation, report.total, report.has_work) == (1, 0, False)
    log = SystemStream("kafka", f"{topic}-changelog")
    (width,) = partition_counts(client_settings(config, "kafka", "admin"), [log]).values()  # one per task
    changelog = [m for p in range(width) for m in read_log(client_settings(config), log.stream, p)]
    assert len({key for _, key, _, _ in changelog}) == 30  # every user's running total, written over TLS
    assert tls_broker.connections > 0


def test_a_broker_signed_by_another_ca_is_refused_naming_the_address(tls_broker, tmp_path, no_overrides):
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    config = validate(job_props("tls-wrong-ca", topic, tmp_path) | tls(tls_broker.bootstrap, tls_broker.certificates.other_ca))
    expected = rf"Kafka broker unreachable at {tls_broker.bootstrap} within 3s \({tls_broker.bootstrap}: TLS handshake failed: CERTIFICATE_VERIFY_FAILED"
    for attempt in (
        lambda: KafkaInputs(config).partition_counts(config.inputs),  # admin
        lambda: KafkaInputs(config).offsets([], "upcoming") or probe(client_settings(config)),  # consumer
        lambda: send(client_settings(config, "kafka", "producer"), topic, [(b"k", b"v")]),  # producer
        lambda: lag_report(config, _store(config), KafkaInputs(config)),  # the lag probe
    ):
        with pytest.raises(BrokerUnreachable, match=expected):
            attempt()


def _store(config):
    from elasticity.checkpoint.store import CheckpointStore

    return CheckpointStore(config.checkpoint_store_url())
