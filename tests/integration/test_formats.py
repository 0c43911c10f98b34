"""Schema Registry formats end to end: an Avro topic in Confluent's wire format (ids assigned by the registry)
through a stateful job on the engine to an Avro Kafka output and a typed Parquet output, its store's changelog
in Avro too. Every order comes out once with its running total, the Parquet columns are typed for pandas,
pyarrow and Spark, and a record naming a schema id the registry does not know is a dead letter with that reason.
The same job reads a Protobuf topic and writes its Kafka output and changelog in JSON Schema.

The registry is confluent-kafka's in-memory one (`mock://`): no Schema Registry server can be had from the
package registries here (Karapace is not on PyPI). The driver ships its schemas to Spark's workers with each
batch (elasticity.formats.registry), as it does in production for none but `mock://`."""

import json
import uuid
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from elasticity.api.stream import load_application
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.sinks.outputs import DEAD_LETTER_SCHEMA, read_table
from elasticity.config import ConfigError, validate
from elasticity.formats.registry import RegistrySerde, client
from elasticity.formats.wire import frame
from elasticity.kafka.admin import create_topic
from elasticity.quality.state_check import committed_state
from elasticity.serializers import deserialize, serialize
from elasticity.spark.engine import MicroBatchEngine
from tests.support.helpers import read_log

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
TOTAL = {
    "type": "record",
    "name": "UserTotal",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "total", "type": "double"},
        {"name": "count", "type": "long"},
    ],
}

STATE = {
    "type": "record",
    "name": "Running",
    "namespace": "shop",
    "fields": [{"name": "total", "type": "double"}, {"name": "count", "type": "long"}],
}


@pytest.fixture
def avro_job(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 2)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    registry = f"mock://{topic}"
    props = {
        "job.name": f"formats-{topic}",
        "task.inputs": f"kafka.{topic}",
        "job.elasticity.factor": "2",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "app.class": "elasticity.apps.totals:build",
        "task.checkpoint.read.versions": "2,1",
        "stores.totals.changelog": f"kafka.{topic}-changelog",  # backed up to and restored from it
        "stores.totals.msg.serde": "state",
        "job.state.dir": str(tmp_path / "state"),
        "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
        "job.output.path": str(tmp_path / "out"),
        "job.audit.path": str(tmp_path / "audit"),
        "job.dead.letter.path": str(tmp_path / "dlq"),
        "job.report.path": str(tmp_path / "reports"),
        "serializers.registry.orders.class": "avro",
        "serializers.registry.orders.schema.registry.url": registry,
        "serializers.registry.orders.schema": json.dumps(ORDER),
        "serializers.registry.totals.class": "avro",
        "serializers.registry.totals.schema.registry.url": registry,
        "serializers.registry.totals.schema": json.dumps(TOTAL),
        "serializers.registry.state.class": "avro",
        "serializers.registry.state.schema.registry.url": registry,
        "serializers.registry.state.schema": json.dumps(STATE),
        "systems.kafka.samza.msg.serde": "orders",
        f"streams.{topic}-totals.samza.msg.serde": "totals",
        "outputs.totals.schema.serde": "totals",
    }
    return topic, props


def registry_of(props):
    return props["serializers.registry.orders.schema.registry.url"]


def test_an_avro_topic_through_a_stateful_job_to_avro_and_typed_parquet(spark, kafka_bootstrap, avro_job):
    topic, props = avro_job
    config = validate(props)
    orders = config.serde("kafka", "msg")
    assert isinstance(orders, RegistrySerde)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    sent = []
    for i in range(120):
        user = f"user-{i % 7}"
        order = {"order_id": i, "amount": round(1 + (i * 37 % 100) / 4, 2), "note": None if i % 3 else f"n{i}"}
        producer.produce(topic, key=user.encode(), value=serialize(orders, order, topic))
        sent.append((user, order))
    # a record whose schema id the registry never assigned, and one that is not in the wire format at all
    producer.produce(topic, key=b"user-x", value=frame(999_999, b"\x02\x00"))
    producer.produce(topic, key=b"user-y", value=b'{"order_id": 1}')
    producer.flush(10)

    engine = MicroBatchEngine(config, spark)
    engine.run(max_records=1000)  # one batch: every record

    # the Avro Kafka output: each order once, with its user's running total, in the registry's framing
    totals = config.serde("kafka", "msg", f"{topic}-totals")
    out = [deserialize(totals, v, "value") for _, _, _, v in read_log(kafka_bootstrap, f"{topic}-totals", "read_committed")]
    assert sorted(o["order_id"] for o in out) == list(range(120))
    expected, running = {}, {}
    for user, order in sent:
        t, c = running.get(user, (0.0, 0))
        running[user] = (round(t + order["amount"], 2), c + 1)
        expected[order["order_id"]] = running[user]
    assert {o["order_id"]: (o["total"], o["count"]) for o in out} == expected

    # the store's changelog holds its values as Avro records of the registry, the last per user its totals
    state = config.registered_serde("state")
    changelog = {k: deserialize(state, v, "value") for _, _, k, v in read_log(kafka_bootstrap, f"{topic}-changelog")}
    assert changelog == {u.encode(): {"total": t, "count": c} for u, (t, c) in running.items()}
    gen = engine.store.generation(config.job_name)
    cps = JobCoordinator(config, engine.store, engine.inputs).checkpoints(gen)
    committed = committed_state(config, load_application(config.app_class, config.inputs), gen, cps)
    assert committed == {"totals": {u: {"total": t, "count": c} for u, (t, c) in running.items()}}
    assert sorted(client(registry_of(props)).get_subjects()) == sorted(
        [f"{topic}-value", f"{topic}-totals-value", f"{topic}-changelog-value"]
    )

    # the typed Parquet output: one typed column per field beside the provenance columns
    root = f"{props['job.output.path']}/totals"
    frame_ = pd.read_parquet(root)
    assert len(frame_) == 120 and sorted(frame_["order_id"]) == list(range(120))
    assert {c: str(frame_[c].dtype) for c in ("order_id", "user", "amount", "total", "count")} == {
        "order_id": "int64",
        "user": "object",
        "amount": "float64",
        "total": "float64",
        "count": "int64",
    }
    written = pq.read_schema(next(Path(root).glob("batch-*.parquet")))
    assert str(written.field("count").type) == "int64" and not written.field("order_id").nullable
    spark_types = dict(spark.read.parquet(root).dtypes)
    assert {c: spark_types[c] for c in ("order_id", "user", "amount", "count")} == {
        "order_id": "bigint",
        "user": "string",
        "amount": "double",
        "count": "bigint",
    }

    # the two undecodable records are dead letters with their reasons, nothing else
    dead = read_table(props["job.dead.letter.path"], DEAD_LETTER_SCHEMA).to_pylist()
    reasons = {d["key"]: d["error"] for d in dead}
    assert set(reasons) == {b"user-x", b"user-y"}, reasons
    assert "schema id 999999 is unknown to the registry" in reasons[b"user-x"]
    assert "bad magic byte 0x7b" in reasons[b"user-y"]

    # the typed output's schema against its files: a nullable field added runs, a type change is refused
    typed = "order_id BIGINT NOT NULL, user STRING NOT NULL, amount DOUBLE, total DOUBLE, count BIGINT"
    untyped = {k: v for k, v in props.items() if k != "outputs.totals.schema.serde"}
    MicroBatchEngine(validate(untyped | {"outputs.totals.schema": typed + ", channel STRING"}), spark).run(max_records=10)
    with pytest.raises(ConfigError, match="outputs.totals.schema: field 'order_id': type changed from BIGINT to INT"):
        MicroBatchEngine(validate(untyped | {"outputs.totals.schema": typed.replace("BIGINT NOT", "INT NOT")}), spark).run()


TOTAL_JSON_SCHEMA = {
    "title": "UserTotal",
    "type": "object",
    "properties": {
        "order_id": {"type": "integer"},
        "user": {"type": "string"},
        "amount": {"type": "number"},
        "total": {"type": "number"},
        "count": {"type": "integer"},
    },
    "required": ["order_id", "user", "amount", "total", "count"],
}
STATE_JSON_SCHEMA = {
    "title": "Running",
    "type": "object",
    "properties": {"total": {"type": "number"}, "count": {"type": "integer"}},
    "required": ["total", "count"],
}


def test_a_protobuf_topic_through_a_stateful_job_to_json_schema(spark, kafka_bootstrap, avro_job):
    topic, props = avro_job
    registry = registry_of(props)
    props = {k: v for k, v in props.items() if not k.startswith("serializers.registry.") and k != "outputs.totals.schema.serde"}
    props |= {
        "serializers.registry.orders.class": "protobuf",
        "serializers.registry.orders.schema.registry.url": registry,
        "serializers.registry.orders.message.class": "tests.support.proto_messages:Order",
        "serializers.registry.totals.class": "json-schema",
        "serializers.registry.totals.schema.registry.url": registry,
        "serializers.registry.totals.schema": json.dumps(TOTAL_JSON_SCHEMA),
        "serializers.registry.state.class": "json-schema",
        "serializers.registry.state.schema.registry.url": registry,
        "serializers.registry.state.schema": json.dumps(STATE_JSON_SCHEMA),
    }
    config = validate(props)
    orders = config.serde("kafka", "msg")
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    running: dict[str, tuple[float, int]] = {}
    expected = {}
    for i in range(60):
        user = f"user-{i % 5}"
        amount = round(1 + (i * 37 % 100) / 4, 2)
        producer.produce(topic, key=user.encode(), value=serialize(orders, {"order_id": i, "user": "", "amount": amount}, topic))
        t, c = running.get(user, (0.0, 0))
        running[user] = (round(t + amount, 2), c + 1)
        expected[i] = (user, *running[user])
    producer.produce(topic, key=b"user-x", value=frame(999_999, b"\x00\x08\x01"))  # a schema id never assigned
    producer.flush(10)

    MicroBatchEngine(config, spark).run(max_records=1000)

    totals = config.serde("kafka", "msg", f"{topic}-totals")
    out = [deserialize(totals, v, "value") for _, _, _, v in read_log(kafka_bootstrap, f"{topic}-totals", "read_committed")]
    assert {o["order_id"]: (o["user"], o["total"], o["count"]) for o in out} == expected and len(out) == 60
    state = config.registered_serde("state")
    changelog = {k: deserialize(state, v, "value") for _, _, k, v in read_log(kafka_bootstrap, f"{topic}-changelog")}
    assert changelog == {u.encode(): {"total": t, "count": c} for u, (t, c) in running.items()}
    assert client(registry).get_latest_version(f"{topic}-value").schema.schema_type == "PROTOBUF"
    assert client(registry).get_latest_version(f"{topic}-totals-value").schema.schema_type == "JSON"
    dead = read_table(props["job.dead.letter.path"], DEAD_LETTER_SCHEMA).to_pylist()
    assert [d["key"] for d in dead] == [b"user-x"] and "schema id 999999 is unknown" in dead[0]["error"]
