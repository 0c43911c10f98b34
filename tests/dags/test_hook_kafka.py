"""The `kafka_default` connection's Kafka properties reach every client of the batch, as its servers do."""

import json

import pytest

from elasticity.config import validate
from elasticity.config.kafka_clients import ENV_PROPERTIES
from elasticity.kafka.admin import client_settings


def test_a_connections_tls_and_sasl_settings_reach_the_clients(airflow_db, monkeypatch):
    from elasticity.airflow.hooks import ElasticityHook

    extra = {
        "bootstrap_servers": "broker.internal:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    }
    conn = {"conn_type": "generic", "login": "etl", "password": "conn-secret-9", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps(conn))
    env = ElasticityHook().env()
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "broker.internal:9093"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = validate({"job.name": "j", "task.inputs": "kafka.t"})
    for role in ("consumer", "producer", "admin"):
        s = client_settings(config, "kafka", role)
        assert s.bootstrap == "broker.internal:9093" and s.kwargs() == {
            "bootstrap_servers": "broker.internal:9093",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "etl",
            "sasl_plain_password": "conn-secret-9",
            "ssl_cafile": "/etc/kafka/ca.pem",
        }
        assert "conn-secret-9" not in repr(s)
    assert "ScramLoginModule" in json.loads(env[ENV_PROPERTIES])["sasl.jaas.config"]

    conn["extra"] = {**extra, "ssl.truststore.type": "JKS"}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps(conn))
    with pytest.raises(ValueError, match="connection 'kafka_default': .*ssl.truststore.type"):
        ElasticityHook().env()
