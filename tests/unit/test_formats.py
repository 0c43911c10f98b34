"""The formats' pure parts and the Schema Registry serdes in one process, against confluent-kafka's in-memory
registry (`mock://`, a scope per test): Confluent's wire format, Avro, Protobuf and JSON Schema round trips,
subject strategies, registration on write, what becomes a dead letter and why, the serde keys' config errors,
Spark DDL, the evolution rules of typed outputs and compaction keeping their types."""

from __future__ import annotations

import json
import re
import string
import uuid

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticity.batch.sinks.compaction import compact_root
from elasticity.batch.sinks.outputs import (
    OUTPUT_SCHEMA,
    in_file,
    list_root,
    output_schema,
    typed_output_problems,
    write_batch_file,
)
from elasticity.config import ConfigError, validate
from elasticity.formats import registry
from elasticity.formats.registry import RegistrySerde, client, load, snapshot
from elasticity.formats.schemas import (
    PROVENANCE_COLUMNS,
    TypedField,
    TypedSchema,
    from_avro,
    incompatibilities,
    parse_ddl,
)
from elasticity.formats.wire import MAX_ID, frame, unframe
from elasticity.process_registry import PROCESS
from elasticity.serializers import RecordSerdeError, deserialize, serialize

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
ORDER_JSON_SCHEMA = {
    "title": "Order",
    "type": "object",
    "properties": {"order_id": {"type": "integer"}, "amount": {"type": "number"}},
    "required": ["order_id", "amount"],
}


def avro(**kw) -> RegistrySerde:
    """The orders' Avro serde on a registry of its own."""
    return RegistrySerde(
        **{"name": "orders", "format": "avro", "url": f"mock://{uuid.uuid4().hex}", "schema": json.dumps(ORDER), **kw}
    )


# -- Confluent's wire format --------------------------------------------------------------------------------------


@given(st.integers(0, MAX_ID), st.binary(max_size=64))
def test_a_framed_record_unframes_to_its_schema_id_and_payload(schema_id, payload):
    framed = frame(schema_id, payload)
    assert framed[0] == 0 and len(framed) == 5 + len(payload)
    assert unframe(framed) == (schema_id, payload)


@given(st.binary(max_size=64).filter(lambda b: len(b) < 5 or b[0] != 0))
def test_bytes_not_in_the_wire_format_are_the_records_fault(data):
    with pytest.raises(RecordSerdeError, match="magic byte|header"):
        unframe(data)


def test_a_schema_id_outside_javas_int_is_refused():
    with pytest.raises(ValueError, match="schema id"):
        frame(MAX_ID + 1, b"")


# -- the registry serdes ------------------------------------------------------------------------------------------

orders = st.fixed_dictionaries(
    {
        "order_id": st.integers(-(2**63), 2**63 - 1),
        "amount": st.floats(allow_nan=False),
        "note": st.none() | st.text(max_size=20),
    }
)


@given(st.lists(orders, min_size=1, max_size=5))
def test_avro_records_read_back_as_written_with_one_registered_id(values):
    serde = avro()
    framed = [serialize(serde, v, "orders") for v in values]  # the first through confluent's serializer, then fastavro
    assert [deserialize(serde, b, "value") for b in framed] == values
    confluent = registry._codec(serde).deserializer  # confluent's own AvroDeserializer reads them alike
    assert [confluent(b, PROCESS.get(registry.Registries).read_context) for b in framed] == values
    assert {unframe(b)[0] for b in framed} == {client(serde.url).get_latest_version("orders-value").schema_id}


def test_json_schema_and_protobuf_records_read_back_as_written():
    url = f"mock://{uuid.uuid4().hex}"
    js = RegistrySerde(name="j", format="json-schema", url=url, schema=json.dumps(ORDER_JSON_SCHEMA))
    assert deserialize(js, serialize(js, {"order_id": 3, "amount": 1.5}, "t"), "value") == {"order_id": 3, "amount": 1.5}
    with pytest.raises(RecordSerdeError, match="'x' is not of type 'integer'"):
        serialize(js, {"order_id": "x", "amount": 1.5}, "t")
    pb = RegistrySerde(name="p", format="protobuf", url=url, message_class="tests.support.proto_messages:Order")
    value = {"order_id": 2**40, "user": "u-1", "amount": 2.25}
    assert deserialize(pb, serialize(pb, value, "p"), "value") == value
    assert sorted(client(url).get_subjects()) == ["p-value", "t-value"]


@pytest.mark.parametrize(
    ("strategy", "subject"), [("topic", "orders-value"), ("record", "shop.Order"), ("topic-record", "orders-shop.Order")]
)
def test_each_subject_strategy_registers_under_its_subject(strategy, subject):
    serde = avro(strategy=strategy)
    serialize(serde, {"order_id": 1, "amount": 1.0, "note": None}, "orders")
    assert client(serde.url).get_subjects() == [subject]
    assert serde.subject("orders", "value") == subject


def test_without_auto_registration_a_write_needs_the_schema_registered():
    serde = avro(auto_register=False)
    with pytest.raises(RecordSerdeError, match="unknown to the registry"):
        serialize(serde, {"order_id": 1, "amount": 1.0, "note": None}, "orders")
    registry.register_outputs([(avro(url=serde.url), "orders", "value")])
    assert deserialize(serde, serialize(serde, {"order_id": 1, "amount": 1.0, "note": None}, "orders"), "value")["order_id"] == 1


def test_what_does_not_decode_says_why():
    serde = avro()
    good = serialize(serde, {"order_id": 7, "amount": 1.0, "note": "x"}, "orders")
    assert good is not None
    cases = {
        frame(4242, good[5:]): "schema id 4242 is unknown to the registry",
        b'{"order_id": 7}': "bad magic byte 0x7b",
        good[:6]: "not avro of schema id 1",
        b"\x00\x00": "shorter than the wire format's 5-byte header",
    }
    for raw, reason in cases.items():
        with pytest.raises(RecordSerdeError, match=reason):
            deserialize(serde, raw, "value")
    with pytest.raises(RecordSerdeError, match="not avro of its writer schema"):
        serialize(serde, {"order_id": "seven", "amount": 1.0}, "orders")


def test_a_registry_that_cannot_be_reached_fails_the_batch_not_the_record():
    serde = avro(url="http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(Exception) as raised:
        deserialize(serde, frame(1, b"\x02"), "value")
    assert not isinstance(raised.value, RecordSerdeError)


def test_a_worker_reads_the_ids_its_driver_registered():
    serde = avro()
    framed = serialize(serde, {"order_id": 1, "amount": 2.0, "note": None}, "orders")
    shipped = snapshot({serde.url, "http://not-shipped:8081"})
    assert [url for url, _ in shipped] == [serde.url]
    PROCESS.close()  # a worker process: its own empty in-memory registry
    with pytest.raises(RecordSerdeError, match="unknown"):
        deserialize(serde, framed, "value")
    PROCESS.close()
    load(shipped)
    assert deserialize(serde, framed, "value") == {"order_id": 1, "amount": 2.0, "note": None}
    assert serialize(serde, {"order_id": 1, "amount": 2.0, "note": None}, "orders") == framed  # the same id


# -- the serde keys -----------------------------------------------------------------------------------------------

BASE = {"job.name": "j", "task.inputs": "kafka.orders", "app.class": "m:f"}
REGISTERED = {
    "serializers.registry.orders.class": "avro",
    "serializers.registry.orders.schema.registry.url": "mock://keys",
    "serializers.registry.orders.schema": json.dumps(ORDER),
}


def test_systems_and_streams_name_registered_serdes():
    config = validate(BASE | REGISTERED | {"systems.kafka.samza.msg.serde": "orders", "streams.totals.samza.msg.serde": "json"})
    found = config.serde("kafka", "msg", "orders")
    assert isinstance(found, RegistrySerde) and (found.format, found.url, found.strategy, found.auto_register) == (
        "avro",
        "mock://keys",
        "topic",
        True,
    )
    assert config.serde("kafka", "msg", "totals") == "json" and config.serde("kafka", "key") == "string"
    samza = validate(BASE | {"serializers.registry.s.class": "org.apache.samza.serializers.StringSerdeFactory"})
    assert samza.registered_serde("s") == "string"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"systems.kafka.samza.msg.serde": "order"},
            "systems.kafka.samza.msg.serde='order': expected one of string, json, byte, orders",
        ),
        ({"streams.x.samza.key.serde": "avro"}, "streams.x.samza.key.serde='avro': expected one of string, json, byte, orders"),
        (
            {"serializers.registry.orders.class": "avro2"},
            "serializers.registry.orders.class='avro2': expected one of avro, byte, json",
        ),
        ({"serializers.registry.orders.subject.name.strategy": "topics"}, "expected one of topic, record, topic-record"),
        (
            {"serializers.registry.orders.auto.register.schemas": "yes"},
            "auto.register.schemas='yes': expected one of true, false",
        ),
        (
            {"serializers.registry.orders.schema": '{"type": "recrd"}'},
            "serializers.registry.orders.schema: expected an avro writer schema",
        ),
        ({"serializers.registry.orders.class": "protobuf"}, "serializers.registry.orders.message.class is unset"),
        ({"outputs.out.schema": "id BIGINT, x MAP<STRING,INT>"}, "outputs.out.schema='id BIGINT, x MAP<STRING,INT>'"),
        ({"outputs.out.schema.serde": "json"}, "outputs.out.schema.serde='json': expected a serde registered with"),
    ],
)
def test_a_bad_serde_config_names_the_key_and_what_is_allowed(props, message):
    with pytest.raises(ConfigError) as raised:
        validate(BASE | REGISTERED | props)
    assert message in str(raised.value)


def test_a_registered_serde_without_a_registry_is_refused_naming_the_key():
    config = validate(BASE | {"serializers.registry.a.class": "avro", "systems.kafka.samza.msg.serde": "a"})
    with pytest.raises(ConfigError, match="serializers.registry.a.schema.registry.url is unset"):
        config.serde("kafka", "msg")


def test_the_basic_auth_login_is_masked_in_errors():
    with pytest.raises(ConfigError) as raised:
        validate(BASE | REGISTERED | {"serializers.registry.orders.basic.auth.user.info": " "})
    assert "basic.auth.user.info=***" in str(raised.value)


# -- Spark DDL and the evolution rules ----------------------------------------------------------------------------

TYPES = [
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "STRING",
    "BINARY",
    "DATE",
    "TIMESTAMP",
    "DECIMAL(10,2)",
]
names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=8).filter(lambda n: n not in PROVENANCE_COLUMNS)
fields = st.lists(st.tuples(names, st.sampled_from(TYPES), st.booleans()), min_size=1, max_size=6, unique_by=lambda f: f[0])


@given(fields)
def test_a_schema_reads_back_from_its_ddl(declared):
    schema = TypedSchema(tuple(TypedField(n, t, nullable) for n, t, nullable in declared))
    assert parse_ddl(schema.ddl()) == schema
    assert [f.name for f in schema.arrow()] == [n for n, _, _ in declared]


def test_ddl_takes_sparks_aliases_comments_and_quoted_names():
    schema = parse_ddl("order_id LONG NOT NULL, `amount`: DEC(12, 3) COMMENT 'in euros, net', note VARCHAR(20), n INTEGER")
    assert schema.ddl() == "order_id BIGINT NOT NULL, amount DECIMAL(12,3), note STRING, n INT"


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("id BIGINT,", "an empty field"),
        ("id BIGNUM", "type 'BIGNUM' is not one of"),
        ("id BIGINT, id STRING", "field 'id' declared twice"),
        ("value STRING", "field 'value' is a column every output has"),
        ("id ARRAY<INT>", "expected `name TYPE [NOT NULL]`"),
    ],
)
def test_a_bad_ddl_says_which_field_and_why(ddl, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_ddl(ddl)


def test_an_avro_record_gives_typed_columns():
    schema = from_avro(
        json.dumps(
            {
                **ORDER,
                "fields": [
                    *ORDER["fields"],
                    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                    {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}]},
                ],
            }
        )
    )
    assert schema.ddl() == "order_id BIGINT NOT NULL, amount DOUBLE NOT NULL, note STRING, day DATE NOT NULL, price DECIMAL(9,2)"


@given(fields, st.lists(st.tuples(names, st.sampled_from(TYPES)), max_size=3, unique_by=lambda f: f[0]))
def test_adding_nullable_fields_is_compatible(declared, added):
    old = TypedSchema(tuple(TypedField(n, t, nullable) for n, t, nullable in declared))
    more = [TypedField(n, t, True) for n, t in added if n not in {f.name for f in old.fields}]
    assert incompatibilities(old, old) == []
    assert incompatibilities(old, TypedSchema(old.fields + tuple(more))) == []


@given(fields, st.data())
def test_a_type_change_or_a_not_null_field_dropped_or_added_is_refused_naming_it(declared, data):
    old = TypedSchema(tuple(TypedField(n, t, nullable) for n, t, nullable in declared))
    changed = data.draw(st.sampled_from(old.fields))
    other = data.draw(st.sampled_from([t for t in TYPES if t != changed.type]))
    retyped = TypedSchema(tuple(TypedField(f.name, other, f.nullable) if f is changed else f for f in old.fields))
    assert [p for p in incompatibilities(old, retyped) if f"'{changed.name}'" in p and "type changed" in p]
    dropped = TypedSchema(tuple(f for f in old.fields if f is not changed))
    assert bool(incompatibilities(old, dropped)) == (not changed.nullable)
    added = TypedSchema((*old.fields, TypedField("zz_new", "STRING", nullable=False)))
    assert incompatibilities(old, added) == [
        "field 'zz_new': added NOT NULL (files already written have no value for it); expected it nullable"
    ]


def test_a_record_that_does_not_fit_names_the_field():
    schema = parse_ddl("order_id BIGINT NOT NULL, amount DOUBLE, day DATE, small TINYINT")
    assert schema.row({"order_id": 1, "amount": 2, "extra": "ignored"}) == (1, 2.0, None, None)
    for value, message in [
        ({"amount": 1.0}, "field 'order_id': missing or null, and it is BIGINT NOT NULL"),
        ({"order_id": "1"}, "field 'order_id': '1' \\(str\\) is not BIGINT"),
        ({"order_id": True}, "field 'order_id': True \\(bool\\) is not BIGINT"),
        ({"order_id": 1, "small": 300}, "field 'small': 300 \\(int\\) is not TINYINT"),
        ({"order_id": 1, "day": "2026-01-01"}, "field 'day': '2026-01-01' \\(str\\) is not DATE"),
        ([1, 2], "a typed output takes a record"),
    ]:
        with pytest.raises(RecordSerdeError, match=message):
            schema.row(value)


# -- typed files: their evolution and compaction ------------------------------------------------------------------


def _typed_file(root: str, batch: int, typed: TypedSchema, rows: list[dict]) -> None:
    schema = in_file(output_schema(typed))
    provenance = [(None, b"{}", "Partition 0", i, 0, i, "kafka", "orders", 1) for i in range(len(rows))]
    columns = [*zip(*provenance, strict=True)] if rows else [()] * (len(OUTPUT_SCHEMA.names) - 1)
    values = [[typed.row(r)[k] for r in rows] for k in range(len(typed.fields))]
    arrays = [pa.array(c, f.type) for c, f in zip([*columns, *values], schema, strict=True)]
    write_batch_file(root, batch, "slot-0", pa.Table.from_arrays(arrays, schema=schema))


def test_compaction_keeps_the_typed_columns(tmp_path):
    root = str(tmp_path / "totals")
    first = parse_ddl("order_id BIGINT NOT NULL, amount DOUBLE")
    second = parse_ddl("order_id BIGINT NOT NULL, amount DOUBLE, note STRING")  # a nullable field added
    assert typed_output_problems(root, second) == []  # nothing written yet
    _typed_file(root, 1, first, [{"order_id": 1, "amount": 1.5}, {"order_id": 2, "amount": None}])
    assert typed_output_problems(root, second) == []
    _typed_file(root, 2, second, [{"order_id": 3, "amount": 2.5, "note": "n"}])
    assert typed_output_problems(root, parse_ddl("order_id INT NOT NULL, amount DOUBLE")) == [
        "field 'order_id': type changed from BIGINT to INT (expected BIGINT)"
    ]
    compact_root(root, OUTPUT_SCHEMA, sink="parquet.totals", through_batch=2, now_ms=0, target_bytes=1 << 20, retention_ms=None)
    (compacted,) = list_root(root).live
    assert compacted.kind == "compacted"
    schema = pq.read_schema(compacted.path)
    assert [(f.name, str(f.type), f.nullable) for f in schema if f.name not in OUTPUT_SCHEMA.names] == [
        ("order_id", "int64", False),
        ("amount", "double", True),
        ("note", "string", True),
    ]
    frame_ = pd.read_parquet(root)
    assert {c: str(frame_[c].dtype) for c in ("order_id", "amount", "note")} == {
        "order_id": "int64",
        "amount": "float64",
        "note": "object",
    }
    assert frame_.sort_values("order_id")["note"].tolist() == [None, None, "n"]


def test_a_typed_output_writes_typed_columns_and_dead_letters_what_does_not_fit(tmp_path):
    """Through the engine's process stage (the test harness): the typed Parquet output's files hold the declared
    columns; an order whose amount is text is a dead letter naming the field, its other outputs kept."""
    from elasticity.testing import TestRun

    config = {
        "job.name": "typed",
        "task.inputs": "kafka.orders",
        "app.class": "elasticity.apps.totals:build",
        "job.output.path": str(tmp_path / "out"),
        "job.state.dir": str(tmp_path / "state"),
        "outputs.totals.schema": "order_id BIGINT NOT NULL, user STRING NOT NULL, amount DOUBLE, total DOUBLE, count BIGINT",
    }
    orders = [
        ("u1", {"order_id": 1, "amount": 2.5}),
        ("u1", {"order_id": 2, "amount": 1}),
        ("u2", {"order_id": "three", "amount": 4.0}),
    ]
    with TestRun(config=config, partitions=1) as run:
        result = run.process(orders)
    assert [d.error for d in result.dead_letters] == ["parquet.totals: field 'order_id': 'three' (str) is not BIGINT"]
    assert [v["order_id"] for _, v in result.outputs["parquet.totals"]] == [1, 2]
    assert [v["order_id"] for _, v in result.outputs["kafka.orders-totals"]] == [1, 2, "three"]  # JSON takes it
    frame_ = pd.read_parquet(tmp_path / "out" / "totals")
    assert {c: str(frame_[c].dtype) for c in ("order_id", "user", "amount", "total", "count")} == {
        "order_id": "int64",
        "user": "object",
        "amount": "float64",
        "total": "float64",
        "count": "int64",
    }
    assert frame_.sort_values("order_id")["total"].tolist() == [2.5, 3.5]
