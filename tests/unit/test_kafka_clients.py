"""Kafka client properties, as Samza passes them, to the clients: kept under Kafka's names, given to librdkafka as
they are (but the few it spells otherwise) and to kafka-python as its arguments; the SASL login, what is refused
and why, and secrets that never show."""

from __future__ import annotations

import json
import pickle
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from elasticity.config import ConfigError, ConfigWarning, validate
from elasticity.config.jaas import jaas_line, parse_jaas
from elasticity.config.kafka_clients import PROPERTIES, client_properties
from elasticity.jobmodel.grouping import build_job_model
from elasticity.jobmodel.model import SystemStream
from elasticity.jobmodel.object_mapper import job_model_to_json
from elasticity.kafka.admin import client_settings
from elasticity.kafka.clients import KafkaClientSettings, settings_for

BASE = {"job.name": "j", "task.inputs": "kafka.orders", "systems.kafka.consumer.bootstrap.servers": "b:9093"}
PASSWORD = 'pa$$w"rd-4f1c'
SCRAM = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" password="{PASSWORD.replace(chr(34), chr(92) + chr(34))}";'
SECURE = {
    **BASE,
    "systems.kafka.consumer.security.protocol": "SASL_SSL",
    "systems.kafka.consumer.sasl.mechanism": "SCRAM-SHA-512",
    "systems.kafka.consumer.sasl.jaas.config": SCRAM,
    "systems.kafka.consumer.ssl.truststore.type": "PEM",
    "systems.kafka.consumer.ssl.truststore.location": "/etc/kafka/ca.pem",
    "systems.kafka.consumer.ssl.keystore.type": "PEM",
    "systems.kafka.consumer.ssl.keystore.location": "/etc/kafka/client.pem",
    "systems.kafka.consumer.ssl.key.password": "key-secret-77",
    "systems.kafka.consumer.fetch.max.bytes": "1048576",
    "systems.kafka.producer.security.protocol": "SSL",
    "systems.kafka.producer.ssl.endpoint.identification.algorithm": "",
    "systems.kafka.producer.acks": "-1",
    "systems.kafka.producer.compression.type": "none",
    "systems.kafka.admin.request.timeout.ms": "7000",
}
SECRETS = (PASSWORD, "key-secret-77")


def _config(props, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        return validate(props, **kw)


def test_every_property_is_an_argument_of_the_kafka_python_clients_it_applies_to():
    accepts = {"consumer": KafkaConsumer, "producer": KafkaProducer, "admin": KafkaAdminClient}
    for p in PROPERTIES:
        for role in p.roles:
            if p.arg is not None:
                assert p.arg in accepts[role].DEFAULT_CONFIG, (p.name, role)


def test_a_secure_system_keeps_kafkas_names_per_client(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_PROPERTIES", raising=False)
    config = _config(SECURE)
    consumer = dict(client_settings(config, "kafka", "consumer").properties)
    assert consumer == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/etc/kafka/client.pem",
        "ssl.key.password": "key-secret-77",
        "fetch.max.bytes": "1048576",
    }
    admin = dict(client_settings(config, "kafka", "admin").properties)  # the consumer's, less what an admin has not
    assert admin == {k: v for k, v in consumer.items() if k != "fetch.max.bytes"} | {"request.timeout.ms": "7000"}
    producer = client_settings(config, "kafka", "producer")
    assert dict(producer.properties) == {
        "security.protocol": "SSL",
        "ssl.endpoint.identification.algorithm": "",
        "acks": "all",  # Kafka's -1, spelt as Kafka's clients take it
        "compression.type": "none",
    }
    assert producer.bootstrap == "b:9093" and producer.tls


def test_kafka_pythons_clients_take_the_settings_as_their_arguments(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_PROPERTIES", raising=False)
    config = _config(SECURE)
    assert client_settings(config, "kafka", "consumer").kwargs() == {  # fetch.max.bytes: librdkafka's reads' alone
        "bootstrap_servers": "b:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "etl",
        "sasl_plain_password": PASSWORD,
        "ssl_cafile": "/etc/kafka/ca.pem",
        "ssl_certfile": "/etc/kafka/client.pem",
        "ssl_keyfile": "/etc/kafka/client.pem",
        "ssl_password": "key-secret-77",
    }
    assert client_settings(config, "kafka", "producer").kwargs(acks=1, linger_ms=5) == {
        "acks": "all",  # the job's setting over the project's default
        "linger_ms": 5,
        "bootstrap_servers": "b:9093",
        "security_protocol": "SSL",
        "ssl_check_hostname": False,
        "compression_type": None,
    }


def test_settings_are_hashable_and_travel_to_the_workers():
    s = settings_for(SECURE, "kafka", "consumer", bootstrap="b:9093")
    assert pickle.loads(pickle.dumps(s)) == s and hash(s) == hash(settings_for(SECURE, "kafka", "consumer", bootstrap="b:9093"))
    assert str(s) == "b:9093"


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30)


@given(st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]), _TEXT, _TEXT)
def test_a_jaas_line_reads_back_its_login(mechanism, username, password):
    assert parse_jaas(jaas_line(mechanism, username, password), mechanism) == (username, password)
    properties = client_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": jaas_line(mechanism, username, password),
        },
        "systems.k.consumer.",
    )
    kwargs, config = KafkaClientSettings("h:1", properties).kwargs(), KafkaClientSettings("h:1", properties).librdkafka()
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == (username, password)
    assert (config["sasl.username"], config["sasl.password"]) == (username, password)


def test_kafkas_own_jaas_spellings_parse():
    plain = 'org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=alice\n  password="a b;c";'
    assert parse_jaas(plain, "PLAIN") == ("alice", "a b;c")
    with pytest.raises(ValueError, match="logs in with org.apache.kafka.common.security.scram.ScramLoginModule"):
        parse_jaas(plain, "SCRAM-SHA-256")
    with pytest.raises(ValueError, match="needs password"):
        parse_jaas("org.apache.kafka.common.security.plain.PlainLoginModule required username=alice;", "PLAIN")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"systems.kafka.consumer.ssl.truststore.location": "/ca.jks"},
            "ssl.truststore.type (default JKS); set systems.kafka.consumer.ssl.truststore.type=PEM",
        ),
        (
            {"systems.kafka.consumer.ssl.truststore.type": "JKS"},
            "ssl.truststore.type='JKS': expected PEM (kafka-python reads PEM files only",
        ),
        (
            {"systems.kafka.producer.sasl.mechanism": "GSSAPI"},
            "sasl.mechanism='GSSAPI': expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kerberos",
        ),
        ({"systems.kafka.consumer.security.protocol": "SASL_SSL"}, "expected systems.kafka.consumer.sasl.jaas.config"),
        (
            {"systems.kafka.consumer.sasl.jaas.config": SCRAM},
            "SASL needs security.protocol SASL_SSL or SASL_PLAINTEXT, not PLAINTEXT (the default)",
        ),
        ({"systems.kafka.consumer.security.protocol": "TLS"}, "expected one of"),
        ({"systems.kafka.producer.fetch.max.bytes": "1"}, "'fetch.max.bytes' applies to consumer clients, not to the producer"),
        ({"systems.kafka.consumer.enable.auto.commit": "true"}, "commits offsets to its own checkpoints"),
        ({"systems.kafka.consumer.ssl.keystore.password": "x"}, "supported: bootstrap.servers, security.protocol,"),
        ({"systems.kafka.consumer.max.poll.recods": "5"}, "(did you mean 'systems.kafka.consumer.max.poll.records'?)"),
        ({"systems.kafka.admin.bootstrap.servers": "h:1"}, "connects to systems.<system>.consumer.bootstrap.servers"),
    ],
)
def test_what_kafka_python_cannot_honour_fails_naming_the_key(extra, message):
    with pytest.raises(ConfigError) as e:
        _config({**BASE, **extra})
    assert message in str(e.value)
    assert next(iter(extra)) in str(e.value)


def test_a_connections_properties_go_over_the_jobs(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    config = _config({**BASE, "systems.kafka.consumer.security.protocol": "SSL", "systems.kafka.consumer.client.id": "job"})
    monkeypatch.setenv("KAFKA_CLIENT_PROPERTIES", json.dumps({"client.id": "conn", "acks": "1"}))
    assert dict(client_settings(config, "kafka", "consumer").properties) == {"security.protocol": "SSL", "client.id": "conn"}
    assert dict(client_settings(config, "kafka", "producer").properties) == {"client.id": "conn", "acks": "1"}
    monkeypatch.setenv("KAFKA_CLIENT_PROPERTIES", json.dumps({"sasl.kerberos.service.name": "kafka"}))
    with pytest.raises(ConfigError, match="KAFKA_CLIENT_PROPERTIES: .*GSSAPI"):
        client_settings(config, "kafka", "consumer")
    monkeypatch.setenv("KAFKA_CLIENT_PROPERTIES", "[1]")
    with pytest.raises(ConfigError, match="KAFKA_CLIENT_PROPERTIES: expected a JSON object"):
        client_settings(config, "kafka", "consumer")


def test_secrets_never_show(monkeypatch):
    """Nowhere a config or a client's settings are shown: reprs, the stored and printed job model, errors."""
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_PROPERTIES", raising=False)
    config = _config(SECURE)
    shown = [
        repr(config),
        str(config.shown_map),
        job_model_to_json(build_job_model(config, {SystemStream("kafka", "orders"): 2})),
        *(repr(client_settings(config, "kafka", role)) for role in ("consumer", "producer", "admin")),
        *(str(client_settings(config, "kafka", role)) for role in ("consumer", "producer", "admin")),
    ]
    for bad in (
        {"systems.kafka.consumer.sasl.jaas.config": SCRAM.replace("required", "mandatory")},
        {"systems.kafka.consumer.sasl.jaas.config": SCRAM.replace("ScramLoginModule", "PlainLoginModule")},
        {"systems.kafka.consumer.ssl.key.password": "   "},
        {"systems.kafka.consumer.security.protocol": "SSL"},  # SASL settings without SASL
        {"systems.kafka.admin.sasl.jaas.config": SCRAM, "systems.kafka.admin.sasl.mechanism": "PLAIN"},
    ):
        with pytest.raises(ConfigError) as e:
            _config({**SECURE, **bad})
        shown.append(str(e.value))
    monkeypatch.setenv("KAFKA_CLIENT_PROPERTIES", json.dumps({"sasl.jaas.config": SCRAM, "sasl.mechanism": "PLAIN"}))
    with pytest.raises(ConfigError) as e:
        client_settings(config, "kafka", "consumer")
    shown.append(str(e.value))
    leaks = [(secret, text) for text in shown for secret in (*SECRETS, 'username="etl" password') if secret in text]
    assert leaks == []
    assert "sasl.jaas.config=***" in shown[3] and "ssl.key.password=***" in shown[3]
    assert "'systems.kafka.consumer.sasl.jaas.config': '***'" in shown[1]


def test_a_plain_bootstrap_string_is_a_plaintext_client():
    s = KafkaClientSettings("h:1")
    assert s.kwargs(client_id="x") == {"client_id": "x", "bootstrap_servers": "h:1"} and not s.tls
    assert s.librdkafka(**{"client.id": "x"}) == {"client.id": "x", "bootstrap.servers": "h:1"}


def test_a_consumers_settings_map_onto_librdkafka_its_sasl_login_too(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("KAFKA_CLIENT_PROPERTIES", raising=False)
    tls = {k: v for k, v in SECURE.items() if "sasl" not in k} | {"systems.kafka.consumer.security.protocol": "SSL"}
    consumer = client_settings(_config(tls), "kafka", "consumer")
    assert consumer.librdkafka(**{"fetch.max.bytes": 64, "group.id": "g"}) == {
        "bootstrap.servers": "b:9093",
        "group.id": "g",
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.pem",
        "ssl.key.password": "key-secret-77",
        "fetch.max.bytes": "1048576",  # the job's setting over the reader's default, under its own name
    }
    sasl = client_settings(_config(SECURE), "kafka", "consumer").librdkafka()
    assert {k: v for k, v in sasl.items() if k.startswith(("sasl.", "security."))} == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",  # Kafka's name, which librdkafka takes
        "sasl.username": "etl",
        "sasl.password": PASSWORD,
    }


def test_every_consumer_property_has_a_librdkafka_name_that_librdkafka_takes():
    """librdkafka refuses an unknown property name as the consumer is made (no broker needed)."""
    from confluent_kafka import Consumer

    samples = {"security.protocol": "SASL_PLAINTEXT", "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    samples |= {"ssl.endpoint.identification.algorithm": "https", "check.crcs": "true", "client.rack": "r1", "group.id": "g"}
    samples |= {"fetch.max.bytes": "52428800", "max.partition.fetch.bytes": "1048576", "receive.buffer.bytes": "-1"}
    samples |= {"sasl.mechanism": "SCRAM-SHA-512", "session.timeout.ms": "45000", "heartbeat.interval.ms": "3000"}
    props = {"sasl.jaas.config": SCRAM}
    for p in PROPERTIES:
        if "consumer" not in p.roles or p.name.startswith(("ssl.", "sasl.jaas")):
            continue
        props[p.name] = samples.get(p.name, "1000")
    properties = client_properties(props, "systems.kafka.consumer.")
    config = KafkaClientSettings("127.0.0.1:1", properties).librdkafka(**{"group.id": "g"})
    assert len(config) > len(properties) // 2 and config["sasl.username"] == "etl" and config["fetch.wait.max.ms"] == "1000"
    Consumer(config).close()


def test_every_producer_property_has_a_librdkafka_name_that_a_transactional_producer_takes():
    """The exactly-once outputs' producer is librdkafka's: each producer property maps onto a name it accepts,
    with the value librdkafka reads (no broker needed: a bad name or value fails as the producer is made)."""
    from confluent_kafka import Producer

    samples = {"acks": "all", "compression.type": "lz4", "enable.idempotence": "true", "security.protocol": "SASL_PLAINTEXT"}
    samples |= {"ssl.endpoint.identification.algorithm": "https", "max.in.flight.requests.per.connection": "5"}
    samples |= {"receive.buffer.bytes": "-1", "send.buffer.bytes": "-1", "max.request.size": "1048576"}
    samples |= {"delivery.timeout.ms": "30000"}  # librdkafka wants it above linger.ms, at most transaction.timeout.ms
    samples |= {"sasl.mechanism": "PLAIN"}
    props = {"sasl.jaas.config": SCRAM.replace("scram.ScramLoginModule", "plain.PlainLoginModule")}
    for p in PROPERTIES:
        if "producer" not in p.roles or p.name.startswith(("ssl.", "sasl.jaas")):
            continue
        props[p.name] = samples.get(p.name, "1000")
    properties = client_properties(props, "systems.kafka.producer.", "producer")
    config = KafkaClientSettings("127.0.0.1:1", properties).librdkafka(**{"transactional.id": "t"})
    assert config["acks"] == "all" and config["compression.type"] == "lz4" and config["sasl.mechanism"] == "PLAIN"
    Producer(config).flush(0)
