"""Cross-key rules: what no single key's parser can see.

Each rule reads the parsed keys and yields the problems it finds, each naming the
key, its value and what is expected; `RULES` is their order in the error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from elasticity.config.kafka_clients import problems as kafka_client_problems
from elasticity.config.names import TOPIC_ALLOWED, TOPIC_MAX, commit_topic, is_topic
from elasticity.config.parsers import BUILTIN_SERDES, REGISTRY_FORMATS, REPORTER_CLASSES, SERDE_CLASSES
from elasticity.formats.registry import schema_problem
from elasticity.formats.schemas import from_avro, parse_ddl
from elasticity.jobmodel.grouping import Grouper


@dataclass(frozen=True)
class Parsed:
    """The keys as the rules see them: each one's typed value by name (a job-level key unset
    or invalid holds its default, task.inputs its resolved streams), and the text as written."""

    values: Mapping[str, Any]
    text: Mapping[str, str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


Rule = Callable[[Parsed], Iterator[str]]


def stream_names_are_not_numbered(p: Parsed) -> Iterator[str]:
    """Samza's checkpoint keys are system.stream.partition[.keyBucket]: partition 3 of
    `orders.5` would read back as stream `orders`, partition 5, bucket 3."""
    for ss in p["task.inputs"]:
        if re.search(r"\.\d+$", ss.stream):
            yield (
                f"task.inputs={str(ss)!r}: a stream name ending in '.<digits>' is ambiguous in Samza's "
                "checkpoint keys (system.stream.partition[.keyBucket]); expected a stream whose last dotted part is not a number"
            )


def each_stream_once(p: Parsed) -> Iterator[str]:
    """A stream listed twice would be read twice into the same tasks."""
    inputs = p["task.inputs"]
    if len(set(inputs)) != len(inputs):
        yield f"task.inputs={p.text.get('task.inputs')!r}: expected each stream once"


def scheme_only_with_group_by_partition(p: Parsed) -> Iterator[str]:
    """SAMZA-71's schemes say how GroupByPartition lines up partition ids of inputs with
    different partition counts; the other groupers do not group by partition id."""
    grouper, scheme = p["job.systemstreampartition.grouper.factory"], p["task.partition.scheme"]
    if scheme is not None and grouper is not Grouper.GROUP_BY_PARTITION:
        yield (
            f"task.partition.scheme={scheme.value!r}: applies only to GroupByPartition, "
            f"but job.systemstreampartition.grouper.factory is {grouper.value}"
        )


def single_task_has_no_elasticity(p: Parsed) -> Iterator[str]:
    """AllSspToSingleTask makes one task per container; key buckets would make more tasks than containers."""
    if p["job.systemstreampartition.grouper.factory"] is Grouper.ALL_SSP_TO_SINGLE_TASK and p["job.elasticity.factor"] > 1:
        yield (
            f"job.elasticity.factor={p.text['job.elasticity.factor']!r}: AllSspToSingleTask does not support "
            "elasticity (it needs tasks = containers); expected 1, or use GroupByPartition / GroupBySystemStreamPartition"
        )


def single_task_in_one_container(p: Parsed) -> Iterator[str]:
    """AllSspToSingleTask gives every container's task every SSP: each record would be processed once per container."""
    if p["job.systemstreampartition.grouper.factory"] is Grouper.ALL_SSP_TO_SINGLE_TASK and p["job.container.count"] > 1:
        yield (
            f"job.container.count={p.text['job.container.count']!r}: with AllSspToSingleTask every container "
            "would read every SSP and process each record once per container; expected 1"
        )


def autosize_bounds_in_order(p: Parsed) -> Iterator[str]:
    """An autosizer between a minimum above its maximum has no factor to choose."""
    lo, hi = p["job.elasticity.autosize.min"], p["job.elasticity.autosize.max"]
    if lo > hi:
        yield (
            f"job.elasticity.autosize.min={p.text.get('job.elasticity.autosize.min', str(lo))!r}: above "
            f"job.elasticity.autosize.max={p.text.get('job.elasticity.autosize.max', str(hi))!r}; expected min <= max"
        )


def reporters_have_a_class(p: Parsed) -> Iterator[str]:
    """A reporter is what its class says; only a reporter named as a class (statsd) may leave it unset."""
    for name in p["metrics.reporters"] or ():
        if f"metrics.reporter.{name}.class" not in p.text and name not in REPORTER_CLASSES:
            yield (
                f"metrics.reporters={p.text['metrics.reporters']!r} names {name!r}, but metrics.reporter.{name}.class is not set; "
                f"expected it set to one of {', '.join(sorted(REPORTER_CLASSES))}"
            )


def read_versions_meet_written(p: Parsed) -> Iterator[str]:
    """A job reading none of the checkpoint versions it writes would never find its own checkpoints."""
    read_v, write_v = p["task.checkpoint.read.versions"], p["task.checkpoint.write.versions"]
    if not set(read_v) & set(write_v):
        yield (
            f"task.checkpoint.read.versions={','.join(map(str, read_v))!r}: reads none of the versions that "
            f"task.checkpoint.write.versions={','.join(map(str, write_v))!r} writes; expected at least one in common"
        )


def changelogs_have_a_system(p: Parsed) -> Iterator[str]:
    """A bare changelog stream takes job.changelog.system, else job.default.system (Samza's StorageConfig)."""
    system = p.text.get("job.changelog.system") or p.text.get("job.default.system")
    for name, text in sorted(p.text.items()):
        if re.fullmatch(r"stores\.[^.]+\.changelog", name) and text.strip() and "." not in text and not system:
            yield (
                f"{name}={text!r}: a stream without a system needs job.changelog.system (or job.default.system); "
                f"expected system.stream, e.g. kafka.{text.strip()}"
            )


def kafka_names_are_topics(p: Parsed) -> Iterator[str]:
    """Names that become Kafka topics meet Kafka's rule here, not at the first exactly-once commit or restore."""
    job = p["job.name"] if isinstance(p["job.name"], str) else ""  # unset: reported as required
    if len(topic := commit_topic(job, p["job.id"])) > TOPIC_MAX:
        yield (
            f"job.name and job.id: the job's commit topic {topic[:40]}... would be {len(topic)} characters, over "
            f"Kafka's {TOPIC_MAX}; expected job.name and job.id of {TOPIC_MAX - len(commit_topic('', ''))} characters together"
        )
    for name, text in sorted(p.text.items()):
        if re.fullmatch(r"stores\.[^.]+\.side\.inputs", name):
            for item in (i.strip() for i in text.split(",")):
                stream = item.partition(".")[2]
                if stream and not is_topic(stream):
                    yield f"{name}={text!r}: stream {stream!r} is not {TOPIC_ALLOWED}"


def kafka_clients_can_connect(p: Parsed) -> Iterator[str]:
    """Kafka's properties of one client depend on each other (a store location on its type, SASL on its login
    line); a client built from half of them would fail at its first connection, deep inside a Spark task."""
    yield from kafka_client_problems(p.text)


def exactly_once_producers_are_transactional(p: Parsed) -> Iterator[str]:
    """Exactly-once Kafka outputs are a transaction, which Kafka only runs on an idempotent producer that
    waits for every replica (acks=all); a producer set otherwise would fail at the job's first commit."""
    if p["processing.guarantee"] != "exactly_once":
        return
    for name, text in sorted(p.text.items()):
        m = re.fullmatch(r"systems\.([^.]+)\.producer\.(acks|enable\.idempotence)", name)
        if m and text.strip() not in ({"all", "-1"} if m.group(2) == "acks" else {"true"}):
            yield (
                f"{name}={text.strip()!r}: processing.guarantee=exactly_once writes Kafka outputs in transactions, "
                f"which need {'acks=all' if m.group(2) == 'acks' else 'enable.idempotence=true'}; "
                "set it so, or set processing.guarantee=at_least_once"
            )


_SERDE_REFERENCES = re.compile(
    r"^(systems|streams)\.[^.]+\.samza\.(key|msg)\.serde$|^outputs\.[^.]+\.schema\.serde$|^stores\.[^.]+\.msg\.serde$"
)


def serdes_are_registered(p: Parsed) -> Iterator[str]:
    """A serde a system, stream or output names is a named one or registered (Samza's SerializerConfig):
    a typo must not read every record as JSON, nor dead-letter them all."""
    registered = sorted(n.split(".")[2] for n in p.text if n.startswith("serializers.registry.") and n.endswith(".class"))
    allowed = ", ".join([*BUILTIN_SERDES, *registered])
    for name, text in sorted(p.text.items()):
        if _SERDE_REFERENCES.match(name) and text.strip() not in BUILTIN_SERDES and text.strip() not in registered:
            yield f"{name}={text.strip()!r}: expected one of {allowed} (a serde is registered by serializers.registry.<name>.class)"


def registry_serdes_are_complete(p: Parsed) -> Iterator[str]:
    """What a Schema Registry serde needs to write: a writer schema that parses, a message class for Protobuf,
    a named record for the record strategies. Reading needs none of it (the record names its schema id)."""
    for name, text in sorted(p.text.items()):
        if not (name.startswith("serializers.registry.") and name.endswith(".class")):
            continue
        serde, kind = name.split(".")[2], SERDE_CLASSES.get(text.strip())
        if kind not in REGISTRY_FORMATS:
            continue
        prefix = f"serializers.registry.{serde}."
        schema = p.text.get(prefix + "schema")
        if kind == "protobuf" and not (p.text.get(prefix + "message.class") or "").strip():
            yield f"{prefix}message.class is unset: expected module:Class of the generated message for class protobuf"
        if kind == "protobuf" and schema:
            yield f"{prefix}schema: a protobuf serde takes its schema from {prefix}message.class; expected it unset"
        elif schema and (problem := schema_problem(kind, schema)):
            yield f"{prefix}schema: expected an {kind} writer schema, {problem}"
        strategy = p.values.get(prefix + "subject.name.strategy", "topic")
        if strategy != "topic" and kind != "protobuf" and not schema:
            yield f"{prefix}subject.name.strategy={strategy!r}: needs {prefix}schema (the record's name); expected it set, or topic"


def typed_outputs_parse(p: Parsed) -> Iterator[str]:
    """A typed output's schema is one the product can write: a Spark DDL of typed columns, or a registered avro
    serde's writer record; never both, which could disagree."""
    for name, text in sorted(p.text.items()):
        m = re.fullmatch(r"outputs\.([^.]+)\.schema(\.serde)?", name)
        if m is None:
            continue
        if m[2] is None:
            try:
                parse_ddl(text)
            except ValueError as e:
                yield f"{name}={text.strip()!r}: {e}"
            if p.text.get(name + ".serde"):
                yield f"{name} and {name}.serde are both set: expected one schema for output {m[1]}"
            continue
        serde = text.strip()
        prefix = f"serializers.registry.{serde}."
        if SERDE_CLASSES.get((p.text.get(prefix + "class") or "").strip()) != "avro" or not p.text.get(prefix + "schema"):
            yield f"{name}={serde!r}: expected a serde registered with {prefix}class=avro and its {prefix}schema"
            continue
        try:
            from_avro(p.text[prefix + "schema"])
        except (ValueError, KeyError, TypeError) as e:
            yield f"{name}={serde!r}: {prefix}schema has no typed columns: {e}"


RULES: tuple[Rule, ...] = (
    stream_names_are_not_numbered,
    each_stream_once,
    scheme_only_with_group_by_partition,
    single_task_has_no_elasticity,
    single_task_in_one_container,
    autosize_bounds_in_order,
    reporters_have_a_class,
    read_versions_meet_written,
    changelogs_have_a_system,
    kafka_names_are_topics,
    kafka_clients_can_connect,
    exactly_once_producers_are_transactional,
    serdes_are_registered,
    registry_serdes_are_complete,
    typed_outputs_parse,
)


def check_rules(p: Parsed) -> list[str]:
    """Every rule's problems, in the order of `RULES`."""
    return [problem for rule in RULES for problem in rule(p)]
