"""How a key is declared: once, with its Samza name, parser, default, doc line and,
for a job-level key, its `JobConfig` field.

A job-level key is a `JobConfig` field built by `key(...)`, which keeps the rest
in the field's metadata. A key with a `<part>` in its name (one per system, store
or reporter) can be no field: it is a `Key` in one of the tuples below, and read
with `JobConfig.value(name)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, Final

from elasticity.config.kafka_clients import PROPERTIES, ROLES
from elasticity.config.parsers import (
    REPORTER_CLASSES,
    Parser,
    changelog_stream,
    choice,
    flag,
    int_range,
    module_factory,
    nonempty,
    offset_default,
    parse_factories,
    parse_side_inputs,
    serde_class,
    serde_name,
    statsd_prefix,
    subject_strategy,
)

MAX_ELASTICITY_FACTOR = 256
"""Upper bound of `job.elasticity.factor`.

Each virtual task costs a checkpoint row per commit and a Spark task per batch;
beyond 256 slices of one partition that overhead outweighs any gain in
parallelism, and a mistyped factor (say 4096) would flood the checkpoint store.
"""


@dataclass(frozen=True, kw_only=True)
class Key:
    """One Samza key. `default` is the text a `.properties` file would hold (None: unset),
    so the README's defaults read as the declarations do."""

    name: str  # `<x>` marks a name part, e.g. systems.<system>.consumer.bootstrap.servers
    parser: Parser[Any]
    default: str | None
    doc: str
    required: bool = False
    deprecated_for: str | None = None  # the key to use instead; this one still works, with a warning
    secret: bool = False  # its value is masked wherever it is shown
    samza: str | None = None  # Samza's side: SAME_AS_SAMZA, what differs on purpose, or its nearest equivalent (None: ours alone)

    @property
    def default_value(self) -> Any:
        return None if self.default is None else self.parser(self.default)

    @property
    def pattern(self) -> re.Pattern[str]:
        name = re.escape(self.name).replace(re.escape("<client>"), "(?:consumer|producer|admin)")
        return re.compile("^" + re.sub(r"<[a-z]+>", "[^.]+", name) + "$")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
"""The default of a key the job cannot do without (job.name, task.inputs)."""


SAME_AS_SAMZA: Final = "Samza's key, same meaning"
"""`Key.samza` of a key Samza reads the same way (read in Samza's TaskConfig, JobConfig, StorageConfig, SystemConfig, ...)."""


def key(name: str, parser: Parser[Any], default: str | None | _Required, *, doc: str, samza: str | None = None) -> Any:
    """A `JobConfig` field declaring key `name`; the field's default is the key's, parsed."""
    if isinstance(default, _Required):
        return field(metadata={"key": Key(name=name, parser=parser, default=None, doc=doc, required=True, samza=samza)})
    k = Key(name=name, parser=parser, default=default, doc=doc, samza=samza)
    return field(default=k.default_value, metadata={"key": k})


def declared_keys(cls: Any) -> tuple[tuple[str, Key], ...]:
    """(field name, key) of every field of `cls` that `key(...)` built, in declaration order."""
    return tuple((f.name, f.metadata["key"]) for f in fields(cls) if "key" in f.metadata)


SYSTEM_KEYS: tuple[Key, ...] = (
    Key(
        name="systems.<system>.consumer.bootstrap.servers",
        parser=nonempty,
        default=None,
        doc="Kafka bootstrap servers of a system (KAFKA_BOOTSTRAP_SERVERS overrides it).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="systems.<system>.producer.bootstrap.servers",
        parser=nonempty,
        default=None,
        doc="Kafka bootstrap servers for output to a system.",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="systems.<system>.samza.factory",
        parser=nonempty,
        default=None,
        doc="Samza's system factory class; accepted for compatibility, not used.",
        samza="Samza's key; accepted so that a Samza config loads, not used (Kafka is the only system)",
    ),
    Key(
        name="systems.<system>.default.stream.samza.offset.default",
        parser=offset_default,
        default="upcoming",
        doc="Where the job's first generation starts on each partition: oldest or upcoming (partitions added later start at their oldest offset).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="systems.<system>.samza.offset.default",
        parser=offset_default,
        default=None,
        doc="Samza's deprecated name of the key above, read when that one is unset (as Samza's SystemConfig does).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="systems.<system>.default.stream.offset.default",
        parser=offset_default,
        default=None,
        doc="This product's earlier name of the key above, read when neither Samza key is set.",
        samza="not read by Samza, whose name is systems.<system>.default.stream.samza.offset.default",
    ),
    Key(
        name="systems.<system>.samza.key.serde",
        parser=serde_name,
        default="string",
        doc="Key serde of a system: string, json, byte, or a serde registered as serializers.registry.<name>.class.",
        samza="Samza's key; here string, json and byte need no registration",
    ),
    Key(
        name="systems.<system>.samza.msg.serde",
        parser=serde_name,
        default="json",
        doc="Message serde of a system: string, json, byte, or a serde registered as serializers.registry.<name>.class.",
        samza="as samza.key.serde; unset, Samza hands the bytes over as they are, here they are read as JSON",
    ),
)

SERDE_KEYS: tuple[Key, ...] = (
    Key(
        name="serializers.registry.<name>.class",
        parser=serde_class,
        default=None,
        doc="What serde <name> is: string, json, byte (or Samza's factories of them), or a Schema Registry format "
        "in Confluent's wire format: avro, protobuf, json-schema.",
        samza="Samza's key names a SerdeFactory class; here also avro, protobuf and json-schema",
    ),
    Key(
        name="serializers.registry.<name>.schema.registry.url",
        parser=nonempty,
        default=None,
        doc="The Schema Registry of serde <name> (Confluent's schema.registry.url; mock://<scope> is "
        "confluent-kafka's in-memory registry); the connection airflow.connection.schema.registry wins over it.",
        samza="Confluent's property name",
    ),
    Key(
        name="serializers.registry.<name>.basic.auth.user.info",
        parser=nonempty,
        default=None,
        doc="user:password for the registry's basic auth (Confluent's basic.auth.user.info).",
        secret=True,
        samza="Confluent's property name",
    ),
    Key(
        name="serializers.registry.<name>.subject.name.strategy",
        parser=subject_strategy,
        default="topic",
        doc="How serde <name> names its subjects: topic (<topic>-key, <topic>-value), record (the record's full "
        "name) or topic-record (<topic>-<record>); Confluent's strategy class names are accepted.",
        samza="Confluent's property name",
    ),
    Key(
        name="serializers.registry.<name>.auto.register.schemas",
        parser=flag,
        default="true",
        doc="Register the writer schema on write (false: it must be registered already; a write with an "
        "unregistered schema is a dead letter).",
        samza="Confluent's property name",
    ),
    Key(
        name="serializers.registry.<name>.schema",
        parser=nonempty,
        default=None,
        doc="The writer schema of serde <name> (Avro schema JSON, or a JSON Schema); unset, writes take the "
        "subject's latest version. Reads always take the record's own schema id.",
    ),
    Key(
        name="serializers.registry.<name>.message.class",
        parser=nonempty,
        default=None,
        doc="Protobuf: the generated message class of serde <name>, module:Class.",
    ),
    Key(
        name="streams.<stream>.samza.key.serde",
        parser=serde_name,
        default=None,
        doc="Key serde of one stream (a topic of any system), over its system's.",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="streams.<stream>.samza.msg.serde",
        parser=serde_name,
        default=None,
        doc="Message serde of one stream (a topic of any system), over its system's.",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="outputs.<output>.schema",
        parser=nonempty,
        default=None,
        doc="The schema of Parquet output <output>, as a Spark DDL string (`order_id BIGINT, amount DOUBLE, note "
        "STRING NOT NULL`): one typed column per field beside the provenance columns.",
    ),
    Key(
        name="outputs.<output>.schema.serde",
        parser=serde_name,
        default=None,
        doc="The schema of Parquet output <output> as the writer schema of a registered avro serde.",
    ),
)

STORE_KEYS: tuple[Key, ...] = (
    Key(
        name="stores.<store>.backup.factories",
        parser=parse_factories,
        default=None,
        doc="Backup backends of a store (overrides stores.backup.factories); a commit writes every one's marker into CheckpointV2 (dual commit).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="stores.<store>.restore.factories",
        parser=parse_factories,
        default=None,
        doc="Restore backends of a store in priority order: the first with a marker for the store wins (default: stores.restore.factories, else the Kafka changelog when the store has one, else its backup factories).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="stores.<store>.restore.factory",
        parser=parse_factories,
        default=None,
        doc="Deprecated singular of stores.<store>.restore.factories (accepted with a warning).",
        deprecated_for="stores.<store>.restore.factories",
        samza="an older singular spelling; Samza reads the plural",
    ),
    Key(
        name="stores.<store>.changelog",
        parser=changelog_stream,
        default=None,
        doc="Compacted Kafka topic backing a store, system.stream, or a stream of job.changelog.system (created when missing).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="stores.<store>.side.inputs",
        parser=parse_side_inputs,
        default=None,
        doc="Compacted topics (system.stream, comma-separated) that feed table <store>, read whole into every container (replicated); overrides the app's TableDescriptor.",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="stores.<store>.side.inputs.processor.factory",
        parser=module_factory,
        default=None,
        doc="module:factory, a function of no arguments returning processor(message) -> [(key, value), ...] for table <store> (Samza's SideInputsProcessor); default: the record's key and value.",
        samza="Samza's key names a SideInputsProcessorFactory class; here a module:factory function",
    ),
    Key(
        name="stores.<store>.msg.serde",
        parser=serde_name,
        default=None,
        doc="Value serde of a store, its snapshots and its changelog, over the app's StoreDescriptor: a serde "
        "registered as serializers.registry.<name>.class (a Schema Registry serde registers the changelog "
        "topic's subject, or the store's name without a changelog).",
        samza=SAME_AS_SAMZA,
    ),
    Key(
        name="stores.<store>.blob.retain",
        parser=int_range(1, 1000),
        default="2",
        doc="Blob-store snapshots kept per virtual task and store; older ones are deleted after a commit.",
    ),
)

REPORTER_KEYS: tuple[Key, ...] = (
    Key(
        name="metrics.reporter.<name>.class",
        parser=choice(REPORTER_CLASSES),
        default=None,
        doc="What a reporter is: statsd (the default for a reporter named statsd); Samza's JMX and snapshot reporter factories are accepted and not run (a warning says so).",
        samza="Samza's key; its JMX and snapshot reporter factories load with a warning and are not run",
    ),
    Key(
        name="metrics.reporter.<name>.host",
        parser=nonempty,
        default=None,
        doc="StatsD host (default: Airflow's [metrics] statsd_host, else localhost).",
    ),
    Key(
        name="metrics.reporter.<name>.port",
        parser=int_range(1, 65535),
        default=None,
        doc="StatsD UDP port (default: Airflow's [metrics] statsd_port, else 8125).",
    ),
    *(
        Key(
            name=f"metrics.reporter.<name>.{k}",
            parser=nonempty,
            default=None,
            doc=f"Samza's MetricsSnapshotReporter {k}; accepted, not used.",
            samza="Samza's key; accepted so that a Samza config loads, not used",
        )
        for k in ("stream", "interval", "blacklist")
    ),
    Key(
        name="metrics.reporter.<name>.prefix",
        parser=statsd_prefix,
        default=None,
        doc="Prefix of every metric name (default: <Airflow's statsd_prefix>.elasticity, else elasticity).",
    ),
)

KAFKA_CLIENT_KEYS: tuple[Key, ...] = tuple(
    Key(
        name=f"systems.<system>.{'<client>' if p.roles == ROLES else p.roles[0]}.{p.name}",
        parser=p.parser,
        default=None,
        doc=f"Kafka's {p.name} for the system's {' and '.join(p.roles)} clients: {p.doc}",
        secret=p.secret,
        samza="Samza passes systems.<system>.consumer.* and producer.* to Kafka's clients likewise",
    )
    for p in PROPERTIES
)
"""Kafka's client properties as Samza passes them (`<client>`: consumer, producer or admin), to kafka-python
(elasticity.config.kafka_clients)."""
