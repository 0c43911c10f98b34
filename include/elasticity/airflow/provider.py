"""The package as an Airflow provider: what the `apache_airflow_provider` entry point (pyproject.toml) tells
Airflow, in its provider-info format (airflow/provider_info.schema.json).

It gives `airflow providers list` the package, the connection form its two types (the Kafka system and the
checkpoint store, with their fields: Airflow 3.2 on reads them here without importing a hook; 3.1 asks the
hooks, which return the same), and Airflow the job page's plugin, so no file need be copied into the plugins
folder. Imported by every Airflow command that discovers providers: it imports nothing but the standard library.
"""

from __future__ import annotations

from typing import Any

PACKAGE = "elasticity"
INTEGRATION = "Elasticity"
PLUGIN_NAME = "elasticity"  # the plugin's `name`: Airflow registers one plugin per name
PLUGIN_CLASS = "elasticity.airflow.plugin.ElasticityPlugin"


def _text(label: str, description: str, *, secret: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if secret:
        schema["format"] = "password"
    return {"label": label, "description": description, "schema": schema}


# Extra fields are stored in the connection's extra under their names: Kafka's own property names, read as
# the job's `systems.kafka.consumer.*` are (elasticity.config.kafka_clients).
KAFKA_FIELDS = {
    "bootstrap_servers": _text("Bootstrap servers", "host:port,host:port (else the host and port above)."),
    "security.protocol": _text("security.protocol", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    "sasl.mechanism": _text("sasl.mechanism", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the login and password above)."),
    "ssl.truststore.location": _text("ssl.truststore.location", "CA certificates (PEM) the broker's certificate must chain to."),
    "ssl.truststore.type": _text("ssl.truststore.type", "PEM (required with a truststore location)."),
    "ssl.keystore.location": _text(
        "ssl.keystore.location", "The client's private key and certificate chain (PEM), for mutual TLS."
    ),
    "ssl.keystore.type": _text("ssl.keystore.type", "PEM (required with a keystore location)."),
    "ssl.key.password": _text("ssl.key.password", "Password of the keystore's private key.", secret=True),
}
STORE_FIELDS = {
    "url": _text(
        "URL",
        "The store's SQLAlchemy URL (sqlite:///path, postgresql+psycopg://...); when set, the fields above are not read.",
    ),
}

CONNECTION_TYPES: dict[str, dict[str, Any]] = {
    "elasticity_kafka": {
        "hook-class-name": "elasticity.airflow.hooks.KafkaSystemHook",
        "hook-name": "Kafka (elasticity)",
        "connection-type": "elasticity_kafka",
        "ui-field-behaviour": {
            "hidden-fields": ["schema"],
            "relabeling": {"host": "Bootstrap host", "login": "SASL username", "password": "SASL password"},
            "placeholders": {"host": "broker-1.example.com", "port": "9092"},
        },
        "conn-fields": KAFKA_FIELDS,
    },
    "elasticity_checkpoint_store": {
        "hook-class-name": "elasticity.airflow.hooks.CheckpointStoreHook",
        "hook-name": "Elasticity checkpoint store",
        "connection-type": "elasticity_checkpoint_store",
        "ui-field-behaviour": {
            "hidden-fields": [],
            "relabeling": {"host": "PostgreSQL host", "schema": "Database"},
            "placeholders": {"port": "5432", "schema": "elasticity"},
        },
        "conn-fields": STORE_FIELDS,
    },
}


def get_provider_info() -> dict[str, Any]:
    """The provider info Airflow's ProvidersManager reads (and validates against provider_info.schema.json)."""
    return {
        "package-name": PACKAGE,
        "name": INTEGRATION,
        "description": "Samza-style elasticity (SEP-32 virtual tasks over key buckets, CheckpointV2) for "
        "Airflow-orchestrated PySpark micro-batches over Kafka.\n",
        "integrations": [{"integration-name": INTEGRATION, "tags": ["apache"]}],
        "operators": [{"integration-name": INTEGRATION, "python-modules": ["elasticity.airflow.operators"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["elasticity.airflow.hooks"]}],
        "connection-types": list(CONNECTION_TYPES.values()),
        "plugins": [{"name": PLUGIN_NAME, "plugin-class": PLUGIN_CLASS}],
    }
