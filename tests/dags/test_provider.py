"""The package as an Airflow provider (elasticity.airflow.provider), checked in-process with Airflow's own
code: its provider info against Airflow's schema, the connection form the API server gives the UI, the hooks'
fields for Airflow 3.1's form, and what the hooks read from connections of the new types."""

from __future__ import annotations

import json
import sys
import types

import pytest

from elasticity.airflow.provider import CONNECTION_TYPES, PLUGIN_CLASS, get_provider_info
from elasticity.config.kafka_clients import PROPERTIES


def test_the_provider_info_validates_against_airflows_schema():
    from airflow._shared.module_loading import import_string
    from airflow._shared.providers_discovery import _create_provider_info_schema_validator
    from airflow._shared.providers_discovery.providers_discovery import (
        _create_customized_form_field_behaviours_schema_validator,
    )

    info = get_provider_info()
    _create_provider_info_schema_validator().validate(info)
    assert info["package-name"] == "elasticity"
    behaviours = _create_customized_form_field_behaviours_schema_validator()
    for conn in info["connection-types"]:
        hook = import_string(conn["hook-class-name"])
        assert (hook.conn_type, hook.hook_name) == (conn["connection-type"], conn["hook-name"])
        assert hook.conn_name_attr and hook.default_conn_name
        behaviours.validate(hook.get_ui_field_behaviour())  # Airflow 3.1's path, the same behaviour
    [plugin] = info["plugins"]
    assert import_string(plugin["plugin-class"]).name == plugin["name"]
    # the Kafka form's fields are Kafka properties the job's clients know (else a connection fails its check)
    known = {p.name for p in PROPERTIES}
    assert set(CONNECTION_TYPES["elasticity_kafka"]["conn-fields"]) - {"bootstrap_servers"} <= known


def test_the_connection_form_offers_both_types_with_their_fields(airflow_db):
    """What the API server gives the UI's connection form (/ui/connections/hook_meta)."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    meta = {m.connection_type: m for m in HookMetaService.hook_meta_data()}
    kafka, store = meta["elasticity_kafka"], meta["elasticity_checkpoint_store"]
    assert (kafka.hook_name, store.hook_name) == ("Kafka (elasticity)", "Elasticity checkpoint store")
    assert kafka.hook_class_name == "elasticity.airflow.hooks.KafkaSystemHook"
    assert kafka.standard_fields.url_schema.hidden and kafka.standard_fields.login.title == "SASL username"
    assert store.standard_fields.url_schema.title == "Database"
    assert set(kafka.extra_fields) == set(CONNECTION_TYPES["elasticity_kafka"]["conn-fields"])
    assert kafka.extra_fields["ssl.key.password"]["schema"]["format"] == "password"
    assert kafka.extra_fields["bootstrap_servers"]["schema"]["title"] == "Bootstrap servers"
    assert set(store.extra_fields) == {"url"}


def test_the_hooks_give_airflow_31_the_same_fields(monkeypatch):
    """Airflow 3.1 asks the hooks (with WTForms, or its API server's stand-ins when FAB is absent)."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService as M

    from elasticity.airflow.hooks import CheckpointStoreHook, KafkaSystemHook

    wtforms = types.SimpleNamespace(StringField=M.MockStringField, PasswordField=M.MockPasswordField)
    monkeypatch.setitem(sys.modules, "wtforms", wtforms)
    monkeypatch.setitem(sys.modules, "flask_babel", types.SimpleNamespace(lazy_gettext=str))
    for hook in (KafkaSystemHook, CheckpointStoreHook):
        declared = CONNECTION_TYPES[hook.conn_type]["conn-fields"]
        widgets = {name: w.param.dump() for name, w in hook.get_connection_form_widgets().items()}
        assert set(widgets) == set(declared)
        for name, field in declared.items():
            assert widgets[name]["schema"]["title"] == field["label"]
            assert widgets[name]["schema"].get("format") == field["schema"].get("format")


def test_a_store_connection_of_its_type_is_a_postgres_url_or_its_url(airflow_db, monkeypatch):
    from elasticity.airflow.hooks import CheckpointStoreHook

    conn = {"conn_type": "elasticity_checkpoint_store", "host": "db.internal", "login": "etl", "password": "p@ss/9"}
    monkeypatch.setenv("AIRFLOW_CONN_ELASTICITY_STORE", json.dumps(conn | {"schema": "elasticity"}))
    assert CheckpointStoreHook().store_url() == "postgresql+psycopg://etl:p%40ss%2F9@db.internal:5432/elasticity"
    monkeypatch.setenv("AIRFLOW_CONN_ELASTICITY_STORE", json.dumps(conn | {"extra": {"url": "sqlite:////tmp/s.db"}}))
    assert CheckpointStoreHook().store_url() == "sqlite:////tmp/s.db"
    monkeypatch.setenv("AIRFLOW_CONN_ELASTICITY_STORE", json.dumps({"conn_type": "elasticity_checkpoint_store"}))
    with pytest.raises(ValueError, match="'elasticity_store': neither a URL"):
        CheckpointStoreHook().store_url()


def test_a_kafka_forms_empty_fields_are_no_properties(airflow_db, monkeypatch):
    """The form saves a field left empty as null (or ""): it must not become a property."""
    from elasticity.airflow.hooks import ElasticityHook

    extra = {"bootstrap_servers": "", "security.protocol": "SSL", "sasl.mechanism": None, "ssl.truststore.location": ""}
    conn = {"conn_type": "elasticity_kafka", "host": "broker.internal", "port": 9093, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps(conn))
    env = ElasticityHook().env()
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "broker.internal:9093"
    assert json.loads(env["KAFKA_CLIENT_PROPERTIES"]) == {"security.protocol": "SSL"}


def test_the_plugin_class_is_the_entry_points():
    from importlib.metadata import entry_points

    [ep] = [ep for ep in entry_points(group="airflow.plugins") if ep.name == "elasticity"]
    assert ep.value.replace(":", ".") == PLUGIN_CLASS
