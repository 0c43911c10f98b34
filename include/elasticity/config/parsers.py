"""Value parsers: a key's text as written, to its typed value.

A parser is a small typed object, `Parser(parse, allowed)`: `allowed` is what a bad
value's error shows (`job.elasticity.factor='0': expected an integer from 1 to 256`),
so each parser's function only has to say no.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from elasticity.config.names import JOB_NAME_ALLOWED, is_job_name
from elasticity.jobmodel.model import SystemStream

T = TypeVar("T")


class Refused(ValueError):
    """A value refused with more to say than what is allowed (e.g. Kafka's name for Samza's)."""


@dataclass(frozen=True)
class Parser(Generic[T]):
    """`parse` returns the typed value, or raises ValueError or KeyError, which become
    `allowed`; a `Refused` adds its detail after it."""

    parse: Callable[[str], T]
    allowed: str

    def __call__(self, text: str) -> T:
        try:
            return self.parse(text)
        except Refused as e:
            raise ValueError(f"{self.allowed} ({e})") from None
        except (ValueError, KeyError):
            raise ValueError(self.allowed) from None


def _items(text: str) -> tuple[str, ...]:
    """A comma-separated list, blanks dropped."""
    return tuple(s.strip() for s in text.split(",") if s.strip())


def int_range(lo: int, hi: int | None = None) -> Parser[int]:
    def parse(text: str) -> int:
        v = int(text.strip())
        if v < lo or (hi is not None and v > hi):
            raise ValueError
        return v

    return Parser(parse, f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}")


def _fraction(text: str) -> float:
    v = float(text.strip())
    if not 0 < v <= 1:  # NaN fails too
        raise ValueError
    return v


fraction = Parser(_fraction, "a number above 0 and at most 1")


def choice(names: Mapping[str, T]) -> Parser[T]:
    """One of `names` (Samza's spellings), to what it names."""
    return Parser(lambda text: names[text.strip()], "one of " + ", ".join(sorted(names, key=lambda n: (len(n), n))))


flag = choice({"true": True, "false": False})
serde = choice({"string": "string", "json": "json", "byte": "byte"})

BUILTIN_SERDES = ("string", "json", "byte")
REGISTRY_FORMATS = ("avro", "protobuf", "json-schema")
SERDE_CLASSES = {
    **{n: n for n in BUILTIN_SERDES + REGISTRY_FORMATS},
    # Samza's factories of the named serdes, so a Samza config's registrations load
    "org.apache.samza.serializers.StringSerdeFactory": "string",
    "org.apache.samza.serializers.JsonSerdeFactory": "json",
    "org.apache.samza.serializers.ByteSerdeFactory": "byte",
}
serde_class = choice(SERDE_CLASSES)
"""`serializers.registry.<name>.class`: a named serde, or a Schema Registry format (elasticity.formats.registry)."""

SUBJECT_STRATEGIES = {
    "topic": "topic",
    "record": "record",
    "topic-record": "topic-record",
    # Confluent's class names of the same strategies
    "io.confluent.kafka.serializers.subject.TopicNameStrategy": "topic",
    "io.confluent.kafka.serializers.subject.RecordNameStrategy": "record",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": "topic-record",
}
subject_strategy = choice(SUBJECT_STRATEGIES)


def _serde_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text.strip()):
        raise ValueError
    return text.strip()


serde_name = Parser(_serde_name, "string, json, byte, or the name of a serde registered as serializers.registry.<name>.class")


def _nonempty(text: str) -> str:
    if not text.strip():
        raise ValueError
    return text.strip()


nonempty = Parser(_nonempty, "a non-empty string")


def _job_name(text: str) -> str:
    if not is_job_name(name := text.strip()):
        raise ValueError
    return name


name_rule = Parser(_job_name, JOB_NAME_ALLOWED)
"""Also a job id's rule: it joins the job name in topic names and transactional ids."""


def _some_items(text: str) -> tuple[str, ...]:
    if not (items := _items(text)):
        raise ValueError
    return items


input_list = Parser(_some_items, "a comma-separated list of system.stream (or stream with job.default.system)")

_KAFKA_OFFSET_NAMES = {"earliest": "oldest", "smallest": "oldest", "latest": "upcoming", "largest": "upcoming"}


def _offset_default(text: str) -> str:
    """Samza's names; Kafka's `auto.offset.reset` names get a pointer to them."""
    value = text.strip()
    if value in ("oldest", "upcoming"):
        return value
    if hint := _KAFKA_OFFSET_NAMES.get(value.lower()):
        raise Refused(f"Kafka's {value!r} is Samza's {hint!r}")
    raise ValueError


offset_default = Parser(_offset_default, "one of oldest, upcoming")


def _callback_timeout(text: str) -> int | None:
    """Samza's -1 (its default) means no timeout; None here."""
    v = int(text.strip())
    if v == -1:
        return None
    if v < 1:
        raise ValueError
    return v


callback_timeout = Parser(_callback_timeout, "-1 (no timeout) or an integer >= 1 (ms)")


def _retention_ms(text: str) -> int | None:
    """Kafka's `retention.ms`: -1 keeps forever (None here), else how long in ms."""
    v = int(text.strip())
    if v == -1:
        return None
    if v < 0:
        raise ValueError
    return v


retention_ms = Parser(_retention_ms, "-1 (keep forever) or an integer >= 0 (ms)")

STORE_BACKENDS = ("sqlite", "postgresql")


def _store_url(text: str) -> str:
    """A SQLAlchemy URL of a backend the checkpoint store runs on."""
    try:
        url = make_url(text.strip())
    except ArgumentError:
        raise ValueError from None
    if url.get_backend_name() not in STORE_BACKENDS:
        raise Refused(f"backend {url.get_backend_name()!r} is not one of {', '.join(STORE_BACKENDS)}")
    return text.strip()


store_url = Parser(_store_url, "a SQLAlchemy URL such as sqlite:///path/checkpoints.db or postgresql+psycopg://user@host:5432/db")


def _versions(text: str) -> tuple[int, ...]:
    versions = tuple(int(v) for v in text.split(","))
    if not versions or len(set(versions)) != len(versions) or not set(versions) <= {1, 2}:
        raise ValueError
    return versions


checkpoint_versions = Parser(_versions, "a comma-separated list of checkpoint versions 1 and 2, each once (e.g. 1,2)")

# --- state: backup and restore backends, changelogs, side inputs (read by elasticity.state) ---

KAFKA_CHANGELOG_FACTORY = "org.apache.samza.storage.KafkaChangelogStateBackendFactory"
BLOB_STORE_FACTORY = "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory"
STATE_BACKEND_FACTORIES = {
    KAFKA_CHANGELOG_FACTORY: KAFKA_CHANGELOG_FACTORY,
    "KafkaChangelogStateBackendFactory": KAFKA_CHANGELOG_FACTORY,
    "kafka": KAFKA_CHANGELOG_FACTORY,
    BLOB_STORE_FACTORY: BLOB_STORE_FACTORY,
    "BlobStoreStateBackendFactory": BLOB_STORE_FACTORY,
    "blobstore": BLOB_STORE_FACTORY,
}


def _factories(text: str) -> tuple[str, ...]:
    found = tuple(STATE_BACKEND_FACTORIES[n] for n in _items(text))
    if len(set(found)) != len(found):
        raise ValueError
    return found


parse_factories = Parser(
    _factories, "a comma-separated list, each once, of " + ", ".join(sorted(STATE_BACKEND_FACTORIES, key=len))
)
"""Backend factories (Samza class names or short names), each once, as class names; empty = none."""


def _changelog_stream(text: str) -> str | None:
    value = text.strip()
    if value and (not re.fullmatch(r"[A-Za-z0-9._-]+", value) or "." in value and not all(value.partition("."))):
        raise ValueError
    return value or None


changelog_stream = Parser(
    _changelog_stream, "system.stream, or a stream of job.changelog.system (Kafka topic characters), e.g. kafka.my-job-changelog"
)
"""As Samza's StorageConfig reads it: with a dot, system.stream; without, a stream of job.changelog.system; blank, none."""


def _side_inputs(text: str) -> tuple[SystemStream, ...]:
    if not (items := _items(text)):
        raise ValueError
    streams = []
    for item in items:
        try:
            streams.append(SystemStream.parse(item))
        except ValueError as e:
            raise Refused(str(e)) from None
    return tuple(streams)


parse_side_inputs = Parser(_side_inputs, "a comma-separated list of system.stream (compacted topics)")


def _module_factory(text: str) -> str:
    module, sep, attr = text.strip().partition(":")
    if not (module and sep and attr):
        raise ValueError
    return text.strip()


module_factory = Parser(_module_factory, "module:factory, e.g. my_app.tables:users_processor")


def _py_files(text: str) -> tuple[str, ...]:
    paths = _items(text)
    if not paths or any(not p.endswith((".zip", ".whl", ".egg", ".py")) for p in paths):
        raise ValueError
    return paths


py_files = Parser(_py_files, "a comma-separated list of .zip, .whl, .egg or .py files")

# --- metrics reporters (read by elasticity.metrics.reporters) ---

REPORTER_CLASSES = {
    "statsd": "statsd",
    "elasticity.metrics.reporters.StatsdReporter": "statsd",
    "elasticity.reporters.StatsdReporter": "statsd",  # the class's module path before the package tree, kept in job configs
    # Samza's own reporters, so that a Samza config loads; they need a JVM and are not run (validation warns)
    "org.apache.samza.metrics.reporter.JmxReporterFactory": "jmx",
    "org.apache.samza.metrics.reporter.MetricsSnapshotReporterFactory": "snapshot",
}
NOT_RUN_REPORTERS = {
    "jmx": "Samza's JMX reporter (MBeans of a JVM; there is no JVM container here)",
    "snapshot": "Samza's MetricsSnapshotReporter (metrics snapshots to a Kafka stream)",
}


def _reporter_names(text: str) -> tuple[str, ...]:
    names = _items(text)
    if len(set(names)) != len(names) or any(not re.fullmatch(r"[A-Za-z0-9_-]+", n) for n in names):
        raise ValueError
    return names


reporter_names = Parser(
    _reporter_names, "a comma-separated list of reporter names (letters, digits, _ and -), each once; empty = none"
)


def _statsd_prefix(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*", value := text.strip()):
        raise ValueError
    return value


statsd_prefix = Parser(_statsd_prefix, "dot-separated names of letters, digits, _ and - (e.g. airflow.elasticity)")
