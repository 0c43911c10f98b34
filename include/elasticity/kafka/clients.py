"""Every Kafka client the project opens is made here, from one settings object: a client's bootstrap servers and
its Kafka properties under Kafka's own names, as the job gives them (checked by `elasticity.config.kafka_clients`).

The library is chosen here, client by client:

- librdkafka (confluent-kafka) on the data path: the slots' reader (records parsed in C, a slot's partitions in
  one fetch), the log reads of side inputs, changelogs and whole topics, the read_committed reader of commit
  records, the transactional producer of exactly-once outputs and the producers of changelogs and test records.
  librdkafka speaks Kafka's property names, so the settings go to it as they are, but for the few it spells
  otherwise or derives (`_LIBRDKAFKA`).
- kafka-python where it serves best: the cluster's metadata on the driver (the admin client: topics and
  partitions; the offsets and partition counts of the lag watch, whose `beginning_offsets`/`end_offsets` ask each
  broker for every partition in one request, and which runs in Airflow's triggerer without librdkafka's threads),
  and the at-least-once outputs' producer, whose per-record futures `unit_run` judges refused records by.
  kafka-python takes keyword arguments: each property's `arg` in `elasticity.config.kafka_clients`.

Settings are hashable and picklable (Spark ships them to the workers); their repr masks secrets; their str is the
bootstrap address, which is what errors name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elasticity.config.jaas import parse_jaas
from elasticity.config.kafka_clients import MASK, PROPERTIES, SECRET_PROPERTIES, checked_properties

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

_DECLARED = {p.name: p for p in PROPERTIES}


def _keystore(path: str) -> dict[str, str]:
    return {"ssl.certificate.location": path, "ssl.key.location": path}  # Kafka's PEM keystore: key and chain in one file


_LIBRDKAFKA: dict[str, Callable[[str], Mapping[str, str]]] = {  # Kafka's property -> librdkafka's, where they differ
    "ssl.truststore.type": lambda _: {},  # PEM, the only kind librdkafka's locations read
    "ssl.keystore.type": lambda _: {},
    "ssl.truststore.location": lambda path: {"ssl.ca.location": path},
    "ssl.keystore.location": _keystore,
    "ssl.endpoint.identification.algorithm": lambda check: {"ssl.endpoint.identification.algorithm": check or "none"},
    "sasl.jaas.config": lambda _: {},  # the login: `KafkaClientSettings.login`
    "request.timeout.ms": lambda ms: {"socket.timeout.ms": ms},
    "receive.buffer.bytes": lambda n: {"socket.receive.buffer.bytes": str(max(int(n), 0))},  # -1 and 0: the OS default
    "send.buffer.bytes": lambda n: {"socket.send.buffer.bytes": str(max(int(n), 0))},
    "fetch.max.wait.ms": lambda ms: {"fetch.wait.max.ms": ms},
    "max.request.size": lambda n: {"message.max.bytes": n},
    "max.poll.records": lambda _: {},  # the reads assign and seek: no poll loop, no group membership to keep
    "max.block.ms": lambda _: {},  # librdkafka's produce() never blocks: a full queue raises BufferError
}


@dataclass(frozen=True)
class KafkaClientSettings:
    """What one Kafka client is opened with: the bootstrap servers and the Kafka properties, (name, value) under
    Kafka's names, sorted."""

    bootstrap: str
    properties: tuple[tuple[str, str], ...] = ()

    def get(self, name: str, default: str | None = None) -> str | None:
        return dict(self.properties).get(name, default)

    @property
    def protocol(self) -> str:
        return self.get("security.protocol") or "PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def login(self) -> tuple[str, str, str]:
        """The SASL mechanism, user and password (of `sasl.jaas.config`)."""
        mechanism = self.get("sasl.mechanism") or "PLAIN"
        return (mechanism, *parse_jaas(self.get("sasl.jaas.config") or "", mechanism))

    def librdkafka(self, **defaults: Any) -> dict[str, Any]:
        """The client's librdkafka configuration: `defaults` (the project's for this client), then the configured
        properties under Kafka's names, but for the few librdkafka spells otherwise."""
        out: dict[str, Any] = {**defaults, "bootstrap.servers": self.bootstrap}
        for name, value in self.properties:
            out.update(_LIBRDKAFKA[name](value) if name in _LIBRDKAFKA else {name: value})
        if self.sasl:
            _, out["sasl.username"], out["sasl.password"] = self.login
        return out

    def kwargs(self, **defaults: Any) -> dict[str, Any]:
        """kafka-python's keyword arguments for the client: `defaults`, then the configured properties."""
        out: dict[str, Any] = {**defaults, "bootstrap_servers": self.bootstrap}
        for name, value in self.properties:
            declared = _DECLARED[name]
            if declared.arg is not None:
                out[declared.arg] = declared.parser(value)
        if "ssl_certfile" in out:
            out["ssl_keyfile"] = out["ssl_certfile"]  # Kafka's PEM keystore holds the key and its chain in one file
        if self.sasl:
            out["sasl_mechanism"], out["sasl_plain_username"], out["sasl_plain_password"] = self.login
        return out

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={MASK if k in SECRET_PROPERTIES else repr(v)}" for k, v in self.properties)
        return f"KafkaClientSettings({self.bootstrap!r}{', ' + shown if shown else ''})"

    def __str__(self) -> str:
        return self.bootstrap


@dataclass(frozen=True)
class SystemClients:
    """The settings of the three clients a component of one system opens (the changelog: read, write, create)."""

    consumer: KafkaClientSettings
    producer: KafkaClientSettings
    admin: KafkaClientSettings

    def __str__(self) -> str:
        return self.consumer.bootstrap


Kafka = KafkaClientSettings | str
"""Where a client connects and how: settings, or bare bootstrap servers (a plaintext cluster, Kafka's defaults)."""


def settings(kafka: Kafka) -> KafkaClientSettings:
    return kafka if isinstance(kafka, KafkaClientSettings) else KafkaClientSettings(kafka)


def settings_for(
    props: Mapping[str, str], system: str, role: str, *, bootstrap: str, env: str | None = None
) -> KafkaClientSettings:
    """The settings of a `role` client of `system` from flat properties (a job config's), with `env`
    (ENV_PROPERTIES' text) over them; a ConfigError names every problem, secrets masked."""
    return KafkaClientSettings(bootstrap, checked_properties(props, system, role, env=env))


# librdkafka: the data path

READER = {
    "group.id": "elasticity-reader",  # librdkafka asks for one; partitions are assigned, no offset is committed
    "client.id": "elasticity-reader",
    "enable.auto.commit": False,
    "isolation.level": "read_committed",  # a transactional producer's records once committed, never aborted ones
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "log.connection.close": False,  # an idle connection the broker closes between batches is not an error
    "auto.offset.reset": "error",  # a planned offset no longer in the log is an error, never a silent jump
}
_KEYED = {
    "partitioner": "murmur2_random",  # Java's (and kafka-python's) partitioner: a key lands where theirs put it
    "delivery.timeout.ms": 120_000,  # Kafka's default: a record not acknowledged by then fails, it is not waited for
    "log.connection.close": False,
}
TRANSACTION_TIMEOUT_MS = 60_000  # the longest a dead run's open transaction holds readers at its first record
_TRANSACTIONAL = {
    "enable.idempotence": True,
    "acks": "all",
    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
    "delivery.timeout.ms": TRANSACTION_TIMEOUT_MS // 2,
    "partitioner": "murmur2_random",  # Java's (and kafka-python's) partitioner: a key lands where theirs put it
    "linger.ms": 5,
    "log.connection.close": False,
}


def reader(kafka: Kafka) -> Consumer:
    """A consumer that assigns and seeks (no group, no offset committed), read_committed: the slots' reader."""
    from confluent_kafka import Consumer

    return Consumer(settings(kafka).librdkafka(**READER))


def log_reader(kafka: Kafka, client_id: str) -> Consumer:
    """A consumer that assigns and seeks to read a log whole or a range of it (side inputs, changelogs, commit
    records), read_committed; an offset below the log start reads from the log start."""
    from confluent_kafka import Consumer

    defaults = {**READER, "group.id": client_id, "client.id": client_id, "auto.offset.reset": "earliest"}
    return Consumer({**settings(kafka).librdkafka(**defaults), "isolation.level": "read_committed"})


def transactional_producer(kafka: Kafka, tid: str) -> Producer:
    """A transactional producer under `tid` (the caller runs `init_transactions`)."""
    from confluent_kafka import Producer

    return Producer({**settings(kafka).librdkafka(**_TRANSACTIONAL), "transactional.id": tid})


def producer(kafka: Kafka, **defaults: Any) -> Producer:
    """A producer of keyed records with Java's partitioner (a key lands where Kafka's clients put it):
    `defaults` (librdkafka's names), then the job's settings."""
    from confluent_kafka import Producer

    return Producer(settings(kafka).librdkafka(**{**_KEYED, **defaults}))


def ordered_producer(kafka: Kafka) -> Producer:
    """A changelog's producer: every record acknowledged by all replicas and written in the order sent, whatever
    the job's settings say (a changelog's marker is the offset of the last record sent)."""
    from confluent_kafka import Producer

    ordered = {"acks": "all", "max.in.flight.requests.per.connection": 1}
    return Producer({**settings(kafka).librdkafka(**{**_KEYED, "linger.ms": 5, "batch.size": 512 * 1024}), **ordered})


def offsets_admin(kafka: Kafka) -> AdminClient:
    """librdkafka's admin client, for ListOffsets: a partition list's log starts and ends asked at once and parsed
    in C (kafka-python builds and parses each partition in Python, one end per request)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(settings(kafka).librdkafka(**{"client.id": "elasticity-offsets", "log.connection.close": False}))


# kafka-python: the driver's metadata, the at-least-once outputs


def metadata_consumer(kafka: Kafka, *, client_id: str, **defaults: Any) -> KafkaConsumer:
    """A consumer for offsets and partition counts, read_committed (the end offset is the last stable one)."""
    from kafka import KafkaConsumer

    options = {"request_timeout_ms": 15_000, "client_id": client_id, "isolation_level": "read_committed", **defaults}
    return KafkaConsumer(**settings(kafka).kwargs(**options), enable_auto_commit=False)


def admin(kafka: Kafka) -> KafkaAdminClient:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(**settings(kafka).kwargs(request_timeout_ms=10_000, client_id="elasticity-admin"))


def output_producer(kafka: Kafka, *, alone: bool = False) -> KafkaProducer:
    """An at-least-once output's producer (idempotent, as kafka-python's is by default); `alone`: one that is not
    idempotent, one record in flight, for records that must each travel in a batch of their own."""
    from kafka import KafkaProducer

    options: dict[str, Any] = {"acks": "all", "linger_ms": 5}
    if alone:
        options |= {"linger_ms": 0, "enable_idempotence": False, "max_in_flight_requests_per_connection": 1}
    return KafkaProducer(**settings(kafka).kwargs(**options))
