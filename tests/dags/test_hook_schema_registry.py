"""The job's Schema Registry connection gives every registered serde its URL and basic-auth login, over the
config's, in process (`connected`) and to a spark-submit batch (its environment)."""

import json

from elasticity.config import validate
from elasticity.config.connections import Connections

CONFIG = {
    "job.name": "j",
    "task.inputs": "kafka.t",
    "serializers.registry.orders.class": "avro",
    "serializers.registry.orders.schema.registry.url": "http://from-the-config:8081",
    "systems.kafka.samza.msg.serde": "orders",
    "airflow.connection.schema.registry": "shop_registry",
}


def test_the_registry_connection_wins_over_the_config(airflow_db, monkeypatch):
    from elasticity.airflow.hooks import ElasticityHook, connected

    conn = {
        "conn_type": "http",
        "host": "registry.internal",
        "port": 8085,
        "schema": "https",
        "login": "sr",
        "password": "sr-secret-7",
    }
    monkeypatch.setenv("AIRFLOW_CONN_SHOP_REGISTRY", json.dumps(conn))
    config = validate(CONFIG)
    serde = connected(config).serde("kafka", "msg")
    assert (serde.url, serde.user_info) == ("https://registry.internal:8085", "sr:sr-secret-7")
    assert "sr-secret-7" not in repr(serde)

    env = ElasticityHook.of(config).env()
    assert env["SCHEMA_REGISTRY_URL"] == "https://registry.internal:8085"
    assert env["SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO"] == "sr:sr-secret-7"
    from_env = config.with_connections(Connections.from_env(env)).serde("kafka", "msg")
    assert (from_env.url, from_env.user_info) == (serde.url, serde.user_info)

    monkeypatch.setenv("AIRFLOW_CONN_SHOP_REGISTRY", json.dumps({"conn_type": "http", "extra": {"url": "mock://shop"}}))
    assert connected(config).serde("kafka", "msg").url == "mock://shop"
    monkeypatch.delenv("AIRFLOW_CONN_SHOP_REGISTRY")
    assert connected(config).serde("kafka", "msg").url == "http://from-the-config:8081"  # no connection: the config's
