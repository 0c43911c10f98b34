"""A job against a broker that requires a SASL login, PLAIN or SCRAM-SHA-512: the embedded broker in a network
namespace of the test's own, behind a front on the address it advertises that holds the SASL conversation as Kafka
does and checks each password (tests/support/sasl_proxy.py; the embedded broker itself accepts any PLAIN password
and cannot do SCRAM). Every client the job opens, kafka-python's (admin, producer, the lag probe) and librdkafka's
(the read tasks on Spark's workers, the transactional producer of its exactly-once outputs, the read_committed
reader), logs in with the job config's `sasl.jaas.config` alone."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from elasticity.apps.demo_feed import demo_records
from elasticity.batch.coordinator.lag import lag_report
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.config.jaas import jaas_line
from elasticity.kafka.admin import BrokerLoginRefused, client_settings, create_topic
from elasticity.kafka.consumer import KafkaInputs, read_log
from elasticity.kafka.producer import send
from elasticity.kafka.transactions import JobTransactions, OutputRecord, read_committed
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import job_props
from tests.support.sasl_proxy import SaslBroker
from tests.support.tls_proxy import make_certificates

USER, PASSWORD = "etl", "s3cret,with=signs"  # SCRAM escapes ',' and '=' in names; a password is taken whole
MECHANISMS = ("PLAIN", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = SaslBroker(tmp_path_factory.mktemp("sasl-broker"), {USER: PASSWORD}, mechanisms=MECHANISMS).start()
    try:
        yield broker
    finally:
        broker.stop()


def sasl(bootstrap: str, mechanism: str, password: str = PASSWORD) -> dict[str, str]:
    props = {"systems.kafka.consumer.bootstrap.servers": bootstrap}
    for role in ("consumer", "producer"):
        props |= {
            f"systems.kafka.{role}.security.protocol": "SASL_PLAINTEXT",
            f"systems.kafka.{role}.sasl.mechanism": mechanism,
            f"systems.kafka.{role}.sasl.jaas.config": jaas_line(mechanism, USER, password),
        }
    return props


@pytest.fixture
def no_overrides(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_PROPERTIES", raising=False)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_job_runs_a_batch_with_exactly_once_kafka_outputs_over_sasl(sasl_broker, spark, tmp_path, no_overrides, mechanism):
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    props = job_props(f"sasl-{topic}", topic, tmp_path, factor=2) | sasl(sasl_broker.bootstrap, mechanism)
    props["app.class"] = "tests.support.apps:relay"  # its outputs go to Kafka in the batch's transaction
    config = validate(props)
    logins = sasl_broker.logins[(mechanism, USER)]
    assert create_topic(client_settings(config, "kafka", "admin"), topic, 2)
    assert send(client_settings(config, "kafka", "producer"), topic, demo_records(120, keys=20, seed=5)) == 120
    inputs = KafkaInputs(config)
    assert lag_report(config, CheckpointStore(config.checkpoint_store_url()), inputs).has_work

    engine = MicroBatchEngine(config, spark)
    (summary,) = engine.run(max_records=1000)  # read on Spark's workers, relayed, committed in one transaction
    assert (summary.records_read, summary.processed, summary.lag_left) == (120, 120, 0)
    relayed = read_committed(client_settings(config, "kafka", "producer"), f"{topic}-relay")
    sources = sorted((json.loads(r.value or b"")["partition"], json.loads(r.value or b"")["offset"]) for r in relayed)
    assert len(sources) == 120 and len(set(sources)) == 120  # every input once, visible to read_committed readers
    assert lag_report(config, engine.store, inputs).total == 0
    assert sasl_broker.logins[(mechanism, USER)] > logins  # the job's clients logged in with this mechanism


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_fails_fast_naming_the_broker_and_the_mechanism(sasl_broker, tmp_path, no_overrides, mechanism):
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    config = validate(job_props("sasl-wrong", topic, tmp_path) | sasl(sasl_broker.bootstrap, mechanism, "not-the-password"))
    refused = sasl_broker.refused[mechanism]
    expected = rf"Kafka broker at {sasl_broker.bootstrap} refused the SASL {mechanism} login as '{USER}': Authentication failed"
    for attempt in (
        lambda: create_topic(client_settings(config, "kafka", "admin"), topic, 1),  # admin
        lambda: read_log(client_settings(config), topic, 0),  # consumer
        lambda: send(client_settings(config, "kafka", "producer"), topic, [(b"k", b"v")]),  # producer
        lambda: lag_report(config, CheckpointStore(config.checkpoint_store_url()), KafkaInputs(config)),  # the lag probe
        lambda: JobTransactions(client_settings(config, "kafka", "producer"), f"tid-{topic}", f"commits-{topic}"),  # exactly-once
    ):
        started = time.monotonic()
        with pytest.raises(BrokerLoginRefused, match=expected) as refusal:
            attempt()
        assert time.monotonic() - started < 5, "a refused login is named at once, not after a client's retries"
        assert "not-the-password" not in str(refusal.value)
    assert sasl_broker.refused[mechanism] >= refused + 5


def test_scram_over_tls_reaches_every_client_kind(tmp_path_factory, tmp_path, no_overrides):
    """SASL_SSL: the login inside TLS, through kafka-python's clients and librdkafka's transactional producer and reader."""
    folder = tmp_path_factory.mktemp("sasl-ssl-broker")
    certificates = make_certificates(folder / "certs")
    broker = SaslBroker(folder, {USER: PASSWORD}, mechanisms=("SCRAM-SHA-512",), certificates=certificates).start()
    try:
        topic = f"sasl-ssl-{uuid.uuid4().hex[:8]}"
        props = job_props("sasl-ssl", topic, tmp_path) | sasl(broker.bootstrap, "SCRAM-SHA-512")
        for role in ("consumer", "producer"):
            props |= {f"systems.kafka.{role}.security.protocol": "SASL_SSL", f"systems.kafka.{role}.ssl.truststore.type": "PEM"}
            props |= {f"systems.kafka.{role}.ssl.truststore.location": str(certificates.ca)}
        config = validate(props)
        producer = client_settings(config, "kafka", "producer")
        assert create_topic(client_settings(config, "kafka", "admin"), topic, 1)
        assert send(producer, topic, [(b"k1", b"v1"), (b"k2", b"v2")]) == 2
        assert [key for _, key, _, _ in read_log(client_settings(config), topic, 0)] == [b"k1", b"k2"]
        transactions = JobTransactions(producer, f"tid-{topic}", f"commits-{topic}")
        assert transactions.commit([OutputRecord(topic, b"k3", b"v3")], [b"commit"]) == 1
        transactions.close()
        assert [r.key for r in read_committed(producer, topic)] == [b"k1", b"k2", b"k3"]
        assert broker.logins[("SCRAM-SHA-512", USER)] >= 5 and broker.connections >= 5
    finally:
        broker.stop()
