"""Schema Registry serdes: Avro, Protobuf and JSON Schema records in Confluent's wire format, through
confluent-kafka's Schema Registry client (the serdes Kafka's Java clients and Kafka Streams use, and Quix
Streams ships for Python; Spark's own `from_avro` reads no wire format).

A `RegistrySerde` is the plain, picklable description a job's config makes of a registered serde
(`serializers.registry.<name>.*`); it travels to the workers with the batch, where each process keeps one
registry client per registry and one confluent serializer per serde (`_codec`): schemas are fetched once per
id and process, not per record.

Decoding tells the record's fault from the registry's: a record that is not in the wire format, names a schema
id the registry does not know, or does not read as its schema raises `RecordSerdeError` (a dead letter with
the reason); a registry that cannot be reached or refuses the credentials raises as it is, so the batch fails
and is retried, nothing dead-lettered for it.

`mock://` URLs name confluent-kafka's in-memory registry, which lives in one process: the driver registers the
outputs' writer schemas before a batch (`register_outputs`), and ships everything its registry holds with the
batch (`snapshot`), which each worker loads (`load`) before it reads or writes, so the ids agree everywhere.
"""

from __future__ import annotations

import importlib
import io
import json
import struct
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from elasticity.formats.wire import HEADER, MAGIC, unframe
from elasticity.process_registry import PROCESS
from elasticity.serializers import RecordSerdeError

FORMATS = ("avro", "protobuf", "json-schema")
STRATEGIES = ("topic", "record", "topic-record")  # Confluent's TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy
SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json-schema": "JSON"}
MOCK_SCHEME = "mock://"


@dataclass(frozen=True, kw_only=True)
class RegistrySerde:
    """A serde registered as `serializers.registry.<name>.class` = avro | protobuf | json-schema."""

    name: str
    format: str
    url: str
    user_info: str | None = field(default=None, repr=False)  # basic auth, `user:password`
    strategy: str = "topic"
    auto_register: bool = True
    schema: str | None = None  # the writer schema (Avro or JSON Schema text); None: the subject's latest version
    message_class: str | None = None  # Protobuf: `module:Class` (or `module.Class`) of the generated message

    def decode(self, raw: bytes) -> Any:
        """The record's value; `RecordSerdeError` when the record is at fault."""
        schema_id, payload = unframe(raw)
        codec = _codec(self)
        try:
            reader = codec.avro_reader(schema_id) if self.format == "avro" else None
            if reader is not None:  # fastavro on the writer's schema, as confluent's AvroDeserializer reads it
                return schemaless_reader(io.BytesIO(payload), reader, None)
            value = codec.deserializer(raw, PROCESS.get(Registries).read_context)
        except Exception as e:
            _raise_record_error(self, e, schema_id)
        return codec.to_python(value)

    def encode(self, value: Any, topic: str, part: str) -> bytes:
        """`value` framed with its schema's id (registered first when `auto_register`); `part` is `key` or
        `value`, for the subject (topic strategy: `<topic>-<part>`). A value that does not fit the schema raises
        `RecordSerdeError` naming why."""
        from confluent_kafka.serialization import MessageField, SerializationContext

        codec = _codec(self)
        try:
            known = codec.writer_ids.get((topic, part))
            if known is not None:  # the id confluent's serializer registered or looked up for this subject
                out = io.BytesIO()
                out.write(HEADER.pack(MAGIC, known))
                schemaless_writer(out, codec.avro_writer, value)
                return out.getvalue()
            ctx = SerializationContext(topic, MessageField.KEY if part == "key" else MessageField.VALUE)
            framed = codec.serializer(codec.from_python(value), ctx)
        except Exception as e:
            _raise_record_error(self, e, None)
        if framed is None:
            raise RecordSerdeError(f"serde {self.name}: {self.format} wrote nothing for {type(value).__name__}")
        if codec.avro_writer is not None:
            codec.writer_ids[(topic, part)] = unframe(framed)[0]
        return framed

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPES[self.format]

    def subject(self, topic: str, part: str) -> str:
        """The subject a record of `topic` is registered under, by the serde's strategy."""
        if self.strategy == "topic":
            return f"{topic}-{part}"
        record = record_name(self)
        return record if self.strategy == "record" else f"{topic}-{record}"


def record_name(serde: RegistrySerde) -> str:
    """The writer schema's full name, as Confluent's record strategies name subjects: an Avro record's
    namespace.name, a JSON Schema's title, a Protobuf message's full name."""
    if serde.format == "protobuf":
        return _message_class(serde).DESCRIPTOR.full_name
    if serde.schema is None:
        raise ValueError(f"serde {serde.name}: the {serde.strategy} strategy needs the writer schema")
    parsed = json.loads(serde.schema)
    if serde.format == "json-schema":
        if not isinstance(parsed, dict) or "title" not in parsed:
            raise ValueError(f"serde {serde.name}: the {serde.strategy} strategy needs a JSON Schema with a title")
        return str(parsed["title"])
    if not isinstance(parsed, dict) or "name" not in parsed:
        raise ValueError(f"serde {serde.name}: the {serde.strategy} strategy needs a named Avro schema")
    name = str(parsed["name"])
    return name if "." in name or not parsed.get("namespace") else f"{parsed['namespace']}.{name}"


def schema_problem(format: str, text: str) -> str | None:
    """Why `text` is no writer schema of `format` (None: it is one): checked at config check."""
    try:
        parsed = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}"
    if format == "avro":
        import fastavro

        try:
            fastavro.parse_schema(parsed)
        except Exception as e:  # fastavro's SchemaParseException and the KeyError/TypeError of a malformed one
            return f"not an Avro schema: {type(e).__name__}: {e}"
    elif format == "json-schema":
        from jsonschema.validators import validator_for

        try:
            validator_for(parsed).check_schema(parsed)
        except Exception as e:  # jsonschema's SchemaError
            return f"not a JSON Schema: {str(e).splitlines()[0]}"
    return None


_RECORD_ERRORS = (ValueError, TypeError, EOFError, IndexError, KeyError, struct.error, OverflowError, AttributeError)


def _raise_record_error(serde: RegistrySerde, e: Exception, schema_id: int | None) -> Any:
    """`e` as `RecordSerdeError` when the record is at fault; raised as it is when the registry is."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    from confluent_kafka.serialization import SerializationError
    from google.protobuf.message import DecodeError, EncodeError

    at = f"schema id {schema_id}" if schema_id is not None else "its writer schema"
    if isinstance(e, SchemaRegistryError):
        if e.http_status_code == 404:  # 40403 schema not found, 40401 subject not found
            raise RecordSerdeError(f"serde {serde.name}: {at} is unknown to the registry ({e.error_message})") from e
        if e.http_status_code in (409, 422):  # an incompatible or invalid schema to register: this record's
            raise RecordSerdeError(f"serde {serde.name}: the registry refused {at}: {e.error_message}") from e
        raise e
    if isinstance(e, (SerializationError, DecodeError, EncodeError, *_RECORD_ERRORS)):
        raise RecordSerdeError(f"serde {serde.name}: not {serde.format} of {at}: {type(e).__name__}: {e}") from e
    raise e


@dataclass(kw_only=True)
class _Codec:
    """confluent-kafka's serializer and deserializer of a serde, and for Avro the fast path past them once a
    schema is known: its parsed schema by id (a writer schema with data-contract rules, a `ruleSet`, always
    goes through confluent's deserializer, which runs them), and the id each subject's writes got. The same
    fastavro calls confluent's Avro serdes make, without their per-record bookkeeping (46.6 against 3.4
    microseconds a record read, on this machine's demo orders)."""

    serializer: Any
    deserializer: Any
    to_python: Any
    from_python: Any
    serde: RegistrySerde | None = None
    readers: dict[int, Any] = field(default_factory=dict)  # schema id -> parsed writer schema (None: no fast path)
    writer_ids: dict[tuple[str, str], int] = field(default_factory=dict)  # (topic, part) -> registered id
    avro_writer: Any = None  # the parsed writer schema of an Avro serde without rules

    def avro_reader(self, schema_id: int) -> Any:
        if schema_id not in self.readers:
            assert self.serde is not None
            schema = client(self.serde.url, self.serde.user_info).get_schema(schema_id)
            plain = schema.schema_type in (None, "AVRO") and not schema.rule_set and not schema.references
            self.readers[schema_id] = parse_schema(json.loads(schema.schema_str)) if plain else None
        return self.readers[schema_id]


class Registries:
    """This process's registry clients (one per URL and login) and serdes (one per RegistrySerde), kept in the
    process registry (`PROCESS.get(Registries)`): a Python worker reuses them from batch to batch."""

    def __init__(self) -> None:
        from confluent_kafka.serialization import MessageField, SerializationContext

        self.lock = threading.Lock()
        self.clients: dict[tuple[str, str | None], Any] = {}
        self.codecs: dict[RegistrySerde, _Codec] = {}
        self.read_context = SerializationContext("", MessageField.VALUE)  # a reader takes the record's schema id

    def client(self, url: str, user_info: str | None) -> Any:
        with self.lock:
            found = self.clients.get((url, user_info))
            if found is None:
                from confluent_kafka.schema_registry import SchemaRegistryClient

                conf = {"url": url} | ({"basic.auth.user.info": user_info} if user_info else {})
                found = self.clients[(url, user_info)] = SchemaRegistryClient.new_client(conf)
            return found

    def codec(self, serde: RegistrySerde) -> _Codec:
        found = self.codecs.get(serde)
        if found is None:
            made = _make_codec(serde)
            with self.lock:
                found = self.codecs.setdefault(serde, made)
        return found


def client(url: str, user_info: str | None = None) -> Any:
    """This process's Schema Registry client of `url` (confluent-kafka's; its in-memory one for `mock://`)."""
    return PROCESS.get(Registries).client(url, user_info)


def _identity(v: Any, *_: Any) -> Any:
    return v


def _codec(serde: RegistrySerde) -> _Codec:
    return PROCESS.get(Registries).codec(serde)


def _strategy(serde: RegistrySerde) -> Any:
    from confluent_kafka.schema_registry import (
        record_subject_name_strategy,
        topic_record_subject_name_strategy,
        topic_subject_name_strategy,
    )

    return {
        "topic": topic_subject_name_strategy,
        "record": record_subject_name_strategy,
        "topic-record": topic_record_subject_name_strategy,
    }[serde.strategy]


def _make_codec(serde: RegistrySerde) -> _Codec:
    registry = client(serde.url, serde.user_info)
    conf: dict[str, Any] = {
        "auto.register.schemas": serde.auto_register and serde.schema is not None,
        "use.latest.version": serde.schema is None and serde.format != "protobuf",
        "subject.name.strategy": _strategy(serde),
    }
    if serde.format == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

        writer = AvroSerializer(registry, serde.schema, conf=conf) if serde.schema or conf["use.latest.version"] else None
        fast = parse_schema(json.loads(serde.schema)) if serde.schema else None
        return _Codec(
            serializer=writer,
            deserializer=AvroDeserializer(registry),
            to_python=_identity,
            from_python=_identity,
            serde=serde,
            avro_writer=fast,
        )
    if serde.format == "json-schema":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

        writer = JSONSerializer(serde.schema, registry, conf=conf)
        reader = JSONDeserializer(None, schema_registry_client=registry)
        return _Codec(serializer=writer, deserializer=reader, to_python=_identity, from_python=_identity)
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    cls = _message_class(serde)
    conf = {"auto.register.schemas": serde.auto_register, "use.latest.version": not serde.auto_register} | {
        "subject.name.strategy": conf["subject.name.strategy"],
        "use.deprecated.format": False,
    }
    reader = ProtobufDeserializer(cls, {"use.deprecated.format": False}, schema_registry_client=registry)
    return _Codec(
        serializer=ProtobufSerializer(cls, registry, conf=conf),
        deserializer=reader,
        to_python=message_to_python,
        from_python=_to_message(cls),
    )


def _message_class(serde: RegistrySerde) -> Any:
    if not serde.message_class:
        raise ValueError(f"serde {serde.name}: protobuf needs serializers.registry.{serde.name}.message.class")
    module, _, name = serde.message_class.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(module), name)


def message_to_python(message: Any) -> Any:
    """A Protobuf message as the dict an app's operators get: field names as declared, 64-bit integers as ints
    (json_format would make them strings), nested messages as dicts, repeated fields as lists."""
    if message is None:
        return None
    out: dict[str, Any] = {}
    for f in message.DESCRIPTOR.fields:
        v = getattr(message, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            out[f.name] = {k: message_to_python(x) if hasattr(x, "DESCRIPTOR") else x for k, x in v.items()}
        elif _repeated(f):
            out[f.name] = [message_to_python(x) if hasattr(x, "DESCRIPTOR") else x for x in v]
        elif f.message_type is not None:
            out[f.name] = message_to_python(v) if message.HasField(f.name) else None
        else:
            out[f.name] = v
    return out


def _repeated(f: Any) -> bool:
    return bool(getattr(f, "is_repeated", False)) or getattr(f, "label", None) == 3


def _to_message(cls: Any) -> Any:
    from google.protobuf.json_format import ParseDict

    def convert(value: Any, *_: Any) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise TypeError(f"a {cls.DESCRIPTOR.full_name} is made from a dict, not {type(value).__name__}")
        return ParseDict({k: v for k, v in value.items() if v is not None}, cls())

    return convert


# -- the in-memory registry across processes ------------------------------------------------------------------

SchemaRow = tuple[int, str, str, int, str, str]  # id, guid, subject, version, schema type, schema text
Snapshot = tuple[tuple[str, tuple[SchemaRow, ...]], ...]  # (mock URL, its schemas)


def register_outputs(serdes: list[tuple[RegistrySerde, str, str]]) -> None:
    """Register each (serde, topic, part)'s writer schema under its subject, as the first write would: once, in
    the driver, before the batch, so a worker's write finds it registered (and a refusal stops the batch
    before it runs, naming the subject)."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    for serde, topic, part in serdes:
        if serde.schema is None or not serde.auto_register or serde.format == "protobuf":
            continue  # protobuf's schema text is made by its serializer from the message class, at its first write
        subject = serde.subject(topic, part)
        try:
            client(serde.url, serde.user_info).register_schema(subject, Schema(serde.schema, serde.schema_type))
        except SchemaRegistryError as e:
            raise ValueError(f"serde {serde.name}: the registry refused the writer schema for {subject}: {e}") from e


def snapshot(urls: set[str]) -> Snapshot:
    """Every schema this process's in-memory registries (`mock://`) hold, to ship to the workers."""
    out = []
    for url in sorted(u for u in urls if u.startswith(MOCK_SCHEME)):
        store = client(url)._store
        with store.lock:
            rows = tuple(
                (rs.schema_id, rs.guid or "", rs.subject, rs.version, rs.schema.schema_type, rs.schema.schema_str)
                for rows in store.subject_schemas.values()
                for rs in rows
            )
        out.append((url, tuple(sorted(rows))))
    return tuple(out)


def load(shipped: Snapshot) -> None:
    """Put the driver's in-memory schemas, with their ids, into this process's in-memory registries."""
    if not shipped:
        return
    from confluent_kafka.schema_registry import RegisteredSchema, Schema

    for url, rows in shipped:
        store = client(url)._store
        with store.lock:
            for schema_id, guid, subject, version, schema_type, text in rows:
                if schema_id in store.schema_id_index:
                    continue
                rs = RegisteredSchema(
                    schema_id=schema_id,
                    guid=guid or str(uuid.uuid4()),
                    schema=Schema(text, schema_type),
                    subject=subject,
                    version=version,
                )
                store.schema_id_index[schema_id] = rs
                store.schema_guid_index[rs.guid] = rs
                store.schema_index[rs.schema] = schema_id
                store.subject_schemas[subject].add(rs)
                store.max_id = max(store.max_id, schema_id)
